"""Random record swapping: method ``random-swap`` of the registry (seed 002 §3.1, seed 004 §3.1,
METHODS.md §8).

A share of households, sampled at random in every top-level area (the large area of the
control strata), swap geography with a random household of the same top-level area and
similarity profile (the further control variables: household size, age–sex composition) from a
different lowest-level area. Seed 002 sampled 5% in each NUTS2 region (10% swapped with their
partners); seed 004 swapped 10% within local authorities between output areas. The procedure is
targeted swapping's without risk (:mod:`._swap`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from tabsafe.method import Examples
from tabsafe.protect.swapping._params import SwapMethod

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.protect.swapping._swap import SwapSpec


@dataclass(frozen=True, kw_only=True)
class RandomSwap(SwapMethod):
    """Random record swapping: random pairs of similar households within a large area swap geography (002 §3.1).

    Attributes:
        geography: geography variables, top level first: pairs come from the same top-level area
            (the large area) and from different lowest-level areas, and exchange every level below
            the top.
    """

    name: ClassVar[str] = "random-swap"

    @classmethod
    def examples(cls) -> Examples:
        from tabsafe.protect.swapping.examples import population

        return Examples(
            typical=(cls(geography=("area", "small_area"), swaprate=0.1, similar=(("hsize",),)),
                     cls(geography=("region", "small_area"), swaprate=0.05, household=None)),
            identity=cls(geography=("area", "small_area"), swaprate=0.0),
            data=population(),
        )

    def spec(self) -> SwapSpec:
        from tabsafe.protect.swapping._swap import SwapSpec

        return SwapSpec(geography=self.geography, risk_vars=None, k=1, swaprate=self.rate,
                        similar=self.similar, carry_along=self.carry_along, household=self.household,
                        pairrate=self.pairrate)
