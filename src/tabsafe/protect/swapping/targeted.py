"""Targeted record swapping: method ``targeted-swap`` of the registry (seed 000 §5.6.1,
METHODS.md §8; the procedure is in :mod:`._swap`).

Households at risk — a member whose combination of the risk variables occurs fewer than ``k``
times in their area — are swapped, top level of the geography first, with a household of the
same similarity profile from a different area at that level, drawn with probability
proportional to its risk; the lowest level is topped up to the swap rate. Tables built from the
swapped records stay additive and consistent (seed 000 §5.3); the UK 2021 census added the cell
key method on top (``--method targeted-swap,ckm``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from tabsafe.method import Examples
from tabsafe.params import Int, TextList, parameter
from tabsafe.protect.swapping._params import SwapMethod

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.protect.swapping._swap import SwapSpec


@dataclass(frozen=True, kw_only=True)
class TargetedSwap(SwapMethod):
    """Targeted record swapping: risky households swap geography with similar ones elsewhere (000 §5.6).

    Attributes:
        risk_vars: the variables whose combination makes a record identifiable in an area
            (e.g. sex,age).
        k: a household is at risk at a level when a member's risk-variable combination occurs
            fewer than k times in its area there (risk 1/count > 1/k).
    """

    name: ClassVar[str] = "targeted-swap"

    risk_vars: tuple[str, ...] = parameter(check=TextList())
    k: int = parameter(3, check=Int(min=1))

    @classmethod
    def examples(cls) -> Examples:
        from tabsafe.protect.swapping.examples import population

        geo = ("region", "area", "small_area")
        return Examples(
            typical=(cls(geography=geo, risk_vars=("sex", "age"), k=3, swaprate=0.1, similar=(("hsize",),)),
                     cls(geography=geo[1:], risk_vars=("age",), k=2, swaprate=0.05,
                         similar=(("hsize", "tenure"), ("hsize",)), carry_along=("tenure",))),
            identity=cls(geography=geo, risk_vars=("sex", "age"), k=1, swaprate=0.0),
            data=population(),
        )

    def spec(self) -> SwapSpec:
        from tabsafe.protect.swapping._swap import SwapSpec

        return SwapSpec(geography=self.geography, risk_vars=self.risk_vars, k=self.k, swaprate=self.swaprate,
                        similar=self.similar, carry_along=self.carry_along, household=self.household)
