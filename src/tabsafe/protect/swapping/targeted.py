"""Targeted record swapping: method ``targeted-swap`` of the registry (seed 000 §5.6.1,
METHODS.md §8; the procedure is in :mod:`._swap`).

Households at risk — a member whose combination of the risk variables occurs fewer than ``k``
times in their area, or whose risk reaches ``r_high`` (computed, or given with the data), or
who is flagged as in a small cell — are swapped, top level of the geography first, with a
household of the same similarity profile from a different area at that level (anywhere, as the
seed and sdcMicro's ``recordSwap`` do, or within the same top-level area), drawn with
probability proportional to its risk; the lowest level is topped up to the swap rate (the share
of households swapped, sdcMicro's meaning). Tables built from the
swapped records stay additive and consistent (seed 000 §5.3); the UK 2021 census added the cell
key method on top (``--method targeted-swap,ckm``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from tabsafe.method import Examples
from tabsafe.params import Choice, Int, Optional, Real, Text, TextList, parameter
from tabsafe.protect.swapping._params import SwapMethod

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.protect.swapping._swap import SwapSpec


@dataclass(frozen=True, kw_only=True)
class TargetedSwap(SwapMethod):
    """Targeted record swapping: risky households swap geography with similar ones elsewhere (000 §5.6).

    Attributes:
        risk_vars: the variables whose combination makes a record identifiable in an area
            (e.g. sex,age): the risk of a record at a level is 1/count of its combination in its
            area there (seed 000 §5.6.1). Give this, risk or flag.
        k: a household is at risk at a level when a member's risk-variable combination occurs
            fewer than k times in its area there (risk 1/count > 1/k), unless risk_threshold is given.
        donors: where a household at risk below the top level finds its donor: anywhere (any
            other area at that level: seed 000 §5.6.1 step 3 and sdcMicro) or same-top-area (a
            different area of the same top-level area: top-level counts stay exact).
        risk: columns of per-record risks given with the data (sdcMicro's risk): one for every
            level or one per level, top first; a household's risk is its members' largest.
        risk_threshold: r_high: a household is at risk at a level when its risk there is at least
            this (needed with risk; with risk_vars it replaces k).
        flag: a variable marking records in small cells (true/false or 1/0; ONS style): their
            households are at risk at the lowest level.
    """

    name: ClassVar[str] = "targeted-swap"

    risk_vars: tuple[str, ...] = parameter((), check=TextList(min_items=0))
    k: int = parameter(3, check=Int(min=1))
    donors: str = parameter("anywhere", check=Choice(("anywhere", "same-top-area")))
    risk: tuple[str, ...] = parameter((), check=TextList(min_items=0))
    risk_threshold: float | None = parameter(None, check=Optional(Real(min=0, min_open=True)))
    flag: str | None = parameter(None, check=Optional(Text(identifier=True)))

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

        return SwapSpec(geography=self.geography, risk_vars=self.risk_vars, k=self.k, swaprate=self.rate,
                        similar=self.similar, carry_along=self.carry_along, household=self.household,
                        donors=self.donors, pairrate=self.pairrate, risk=self.risk,
                        risk_threshold=self.risk_threshold, flag=self.flag)

    def validate(self) -> None:
        from tabsafe.protect.swapping._swap import check_risk_options

        super().validate()
        check_risk_options(self.spec())
