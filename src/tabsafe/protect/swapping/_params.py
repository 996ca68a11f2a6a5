"""The parameters record swapping declares (shared by targeted and random swapping)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from tabsafe.capabilities import Capabilities
from tabsafe.errors import InputError, param
from tabsafe.method import MicrodataMethod, MicrodataOutcome
from tabsafe.params import _NAME, Constraint, Optional, Real, Text, TextList, parameter

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.model.microdata import Microdata


@dataclass(frozen=True)
class Profiles(Constraint):
    """Similarity profiles tried in order: ``a,b;a`` on the command line (profiles separated by
    ``;``, variables by ``,``), a list of lists in JSON; empty: any household matches."""

    allowed: str = "similarity profiles such as 'household_size,tenure;household_size'"
    metavar: str = "A,B[;C]"

    def check(self, name: str, value: Any) -> tuple[tuple[str, ...], ...]:
        if value is None:
            return ()
        if isinstance(value, str):
            value = [p for p in value.split(";")] if value.strip() else []
        if not isinstance(value, (list, tuple)):
            raise InputError(f"parameter {param(name)} must be {self.allowed}; got {value!r}")
        out = []
        for prof in value:
            if isinstance(prof, str):
                prof = [v.strip() for v in prof.split(",")]
            if not isinstance(prof, (list, tuple)) or not prof or any(
                    not isinstance(v, str) or not _NAME.match(v) for v in prof):
                raise InputError(f"parameter {param(name)} must be {self.allowed}; got {value!r}")
            if len(set(prof)) != len(prof):
                raise InputError(f"parameter {param(name)}: a profile names a variable twice ({','.join(prof)})")
            out.append(tuple(prof))
        if len(set(out)) != len(out):
            raise InputError(f"parameter {param(name)} gives the same profile twice")
        return tuple(out)

    def to_json(self, value: Any) -> Any:
        return [list(p) for p in value]


#: sdcMicro's default swap rate (share of households swapped)
DEFAULT_SWAPRATE = 0.05


@dataclass(frozen=True, kw_only=True)
class SwapMethod(MicrodataMethod):
    """Base of the record swapping methods: the geography and what pairs must share.

    Attributes:
        geography: geography variables, top level first (e.g. region,area,small_area); each
            level's codes must identify their area on their own and nest in the level above.
        similar: similarity profiles a household and its partner must share, tried in order
            (fallbacks separated by ';', e.g. 'household_size,tenure;household_size'); the values
            of a household's first record are compared. Empty: any household.
        swaprate: share of households swapped, both households of a pair counted (sdcMicro's
            recordSwap meaning: 0.05 moves 5% of households); reached in every top-level area.
            0.05 when neither this nor pairrate is given.
        pairrate: instead of the swap rate, the share of households sampled for swapping, each
            with a partner from another area (so about twice this share change geography; the
            meaning tabsafe's --swaprate had before, and seed 002 §3.1's "5% sampled + partners").
        carry_along: household-level variables that travel with the geography.
        household: the household variable (whole households are swapped); none: every record on
            its own.
    """

    declared: ClassVar[Capabilities] = Capabilities(random=True)

    geography: tuple[str, ...] = parameter(check=TextList())
    similar: tuple[tuple[str, ...], ...] = parameter((), check=Profiles())
    swaprate: float | None = parameter(None, check=Optional(Real(min=0, max=1)))
    pairrate: float | None = parameter(None, check=Optional(Real(min=0, max=1)))
    carry_along: tuple[str, ...] = parameter((), check=TextList(min_items=0))
    household: str | None = parameter("household_id", check=Optional(Text(identifier=True)))

    @property
    def rate(self) -> float:
        """The swap rate in force: the one given, else 0.05 (unless the pair rate is given)."""
        if self.swaprate is not None:
            return self.swaprate
        return 0.0 if self.pairrate is not None else DEFAULT_SWAPRATE

    def columns(self) -> tuple[str, ...]:
        names = [*self.geography, *(v for p in self.similar for v in p), *self.carry_along,
                 *getattr(self, "risk_vars", ()), *getattr(self, "risk", ()),
                 *([self.flag] if getattr(self, "flag", None) else []),
                 *([self.household] if self.household else [])]
        return tuple(dict.fromkeys(names))

    def spec(self) -> Any:
        """The procedure's parameters (:class:`~tabsafe.protect.swapping._swap.SwapSpec`)."""
        raise NotImplementedError

    def apply(self, microdata: Microdata, seed: int | None) -> MicrodataOutcome:
        from tabsafe.protect.swapping._swap import swap_records

        assert seed is not None  # a random method always gets one
        result = swap_records(microdata.read(), self.spec(), seed, where=microdata.source.describe())
        return MicrodataOutcome(data=result.data, evaluation=result.evaluation, figures=result.figures,
                                private=result.private, notes=result.notes)

    def validate(self) -> None:
        if self.pairrate is not None and self.swaprate is not None:
            raise InputError(f"give {param('swaprate')} (share of households swapped) or {param('pairrate')} (share "
                             "sampled, each with a partner), not both")

    def apply_on(self, engine: Any, microdata: Microdata, seed: int | None) -> MicrodataOutcome:
        """On an engine holding PySpark DataFrames: the same swaps, area by area where the records are
        (:mod:`tabsafe.protect.swapping._spark`); the records stay a Spark DataFrame."""
        if getattr(engine, "dataframes", None) != "pyspark":  # the engine holds records as PySpark DataFrames
            return super().apply_on(engine, microdata, seed)
        from tabsafe.protect.swapping._spark import swap_on_spark

        assert seed is not None
        out = swap_on_spark(engine, microdata, self.spec(), seed)
        data = engine.held(out.data, name=f"{microdata.source.describe()} ({self.name})", cached=out.cached,
                           flagged=out.flagged)
        return MicrodataOutcome(data=data, evaluation=out.evaluation, figures=out.figures, private=out.private,
                                notes=out.notes)
