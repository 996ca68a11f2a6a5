"""Sampling: method ``sampling`` of the registry (seed 000 §5.3, pre-tabular; seed 001 §7's first
design).

Seed 001 §7: "Suppose we took a without replacement simple random sample of census households
with a sampling fraction of 1/3 say. When forming all the tables we can only use the 1/3 of
households that were chosen in the sample and multiply all cell counts by 3. All tables would then
be consistent and we have protected ourselves against differencing and the 100% cell issue." It
names the price too: two thirds of the information are lost, and "an observed cell count of 3 or 6
is a sample unique and could quite possibly be a population unique" — the reason the paper moves
on to perturbation weights (method ``weights``).

Here: households (``household``; or records) are sampled without replacement with fraction
``1/one_in``, within strata if given (e.g. small area × household size, the stratification seed
001 §7 recommends), and every person of a sampled household gets the weight ``one_in`` (times an
existing record weight), every other one weight 0: tables count weighted records, so every cell is
a multiple of ``one_in`` and an unbiased (Horvitz–Thompson) estimate of the original count. The
sample size of a stratum of ``n_k`` units is ``⌊n_k/N⌋``, plus one with probability
``n_k/N − ⌊n_k/N⌋`` (``N = one_in``): every unit's inclusion probability is exactly ``1/N`` and each
stratum's sample is as close to ``n_k/N`` as a whole number can be. Records are kept (weight 0, as
seed 001 §7 reads a weight of 0: "analogous to the household not being sampled"), so the output
has the input's records and a ``weight`` column; the flag ``sampled`` goes to the evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tabsafe.capabilities import Capabilities
from tabsafe.errors import InputError, param, shown_list
from tabsafe.method import Examples, MicrodataMethod, MicrodataOutcome
from tabsafe.params import Int, Optional, Text, TextList, parameter

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.model.microdata import Microdata

__all__ = ["Sampling", "stratified_sample"]


def stratified_sample(stratum: np.ndarray, one_in: int, u_size: np.ndarray, u_order: np.ndarray) -> np.ndarray:
    """Which units are sampled: per stratum ``⌊n_k/N⌋`` units, one more when ``u_size`` of the
    stratum is below the fraction's remainder, taken in the order of ``u_order`` (a random
    permutation within the stratum): a simple random sample without replacement in which every
    unit has probability exactly ``1/N``.

    >>> stratified_sample(np.array([0, 0, 0, 0, 1, 1]), 2, np.array([0.9, 0.9]),
    ...                   np.array([0.1, 0.7, 0.4, 0.9, 0.3, 0.2])).tolist()
    [True, False, True, False, False, True]
    """
    n_strata = int(stratum.max(initial=-1)) + 1
    n_k = np.bincount(stratum, minlength=n_strata)
    size = n_k // one_in + (u_size[:n_strata] < (n_k % one_in) / one_in)
    order = np.lexsort((u_order, stratum))  # by stratum, then at random
    rank = np.empty(stratum.size, dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(n_k)])[:-1]
    rank[order] = np.arange(stratum.size) - start[stratum[order]]
    return rank < size[stratum]


@dataclass(frozen=True, kw_only=True)
class Sampling(MicrodataMethod):
    """Sampling: tables from a random sample of households, each weighted by the inverse fraction (000 §5.3, 001 §7).

    Households (or records) are sampled without replacement with fraction ``1/one_in`` within
    strata; persons of sampled households get the weight ``one_in``, the others 0, and tables
    count weighted records: every cell is a multiple of ``one_in`` and an unbiased estimate of
    the original count (the module docstring gives the design).

    Attributes:
        one_in: one unit in this many is sampled; its records are weighted by it (the paper's
            example: 3).
        strata: the variables whose combinations are the strata, each sampled with the same
            fraction (e.g. small_area, household_size); none: one simple random sample.
        household: the household identifier (households are sampled whole); none: records are
            sampled on their own.
        weight: the weight column added to the records (tables count by it).
    """

    name: ClassVar[str] = "sampling"
    declared: ClassVar[Capabilities] = Capabilities(random=True)

    one_in: int = parameter(3, check=Int(min=1, max=1_000_000))
    strata: tuple[str, ...] = parameter((), check=TextList(min_items=0))
    household: str | None = parameter("household_id", check=Optional(Text(identifier=True)))
    weight: str = parameter("weight", check=Text(identifier=True))

    def validate(self) -> None:
        if self.household is not None and self.household in self.strata:
            raise InputError(f"{param('household')} {self.household!r} is also a stratum variable ({param('strata')})")
        if self.weight in (*self.strata, *([self.household] if self.household else [])):
            raise InputError(f"{param('weight')} {self.weight!r} names a column the method reads")

    @classmethod
    def examples(cls) -> Examples:
        from tabsafe.protect.swapping.examples import population

        return Examples(
            typical=(cls(), cls(one_in=2, strata=("area", "hsize")), cls(one_in=4, household=None, weight="w")),
            why_no_identity="the records always gain a weight column; with one_in 1 every weight is 1 and tables "
                            "are unchanged (tests/reference/test_pretabular_reference.py)",
            data=population(),
        )

    def apply(self, microdata: Microdata, seed: int | None) -> MicrodataOutcome:
        """Sample the units within their strata; every record gets its unit's weight."""
        import pyarrow as pa

        from tabsafe._arrow import from_numpy
        from tabsafe.protect.over_imputation import classes, codes_of

        records = microdata.read()
        names = records.column_names
        where = microdata.source.describe()
        wanted = [*((v, "strata") for v in self.strata), *([(self.household, "household")] if self.household else [])]
        for col, option in wanted:
            if col not in names:
                raise InputError(f"unknown variable {col!r} in {param(option)}; the data have: {shown_list(names)}",
                                 where=where)
        if self.weight in names and self.weight != microdata.weight:
            raise InputError(f"the data already have a column {self.weight!r}: choose another {param('weight')}",
                             where=where)
        unit_of = (np.unique(codes_of(records.column(self.household)), return_inverse=True)[1].astype(np.int64)
                   if self.household else np.arange(records.num_rows, dtype=np.int64))
        n_units = int(unit_of.max(initial=-1)) + 1
        first = np.full(n_units, records.num_rows, dtype=np.int64)
        np.minimum.at(first, unit_of, np.arange(records.num_rows))
        stratum = classes(records, self.strata)
        if self.strata and (stratum != stratum[first][unit_of]).any():
            bad = int(np.unique(unit_of[stratum != stratum[first][unit_of]]).size)
            raise InputError(f"{bad:,} households have persons in different strata ({', '.join(self.strata)}): a "
                             "household's persons must share them", where=where)
        unit_stratum = np.unique(stratum[first], return_inverse=True)[1].astype(np.int64)
        rng = np.random.default_rng(seed)
        n_strata = int(unit_stratum.max(initial=-1)) + 1
        sampled = stratified_sample(unit_stratum, self.one_in, rng.random(n_strata), rng.random(n_units))
        w = np.where(sampled[unit_of], self.one_in, 0).astype(np.int64)
        if microdata.weight is not None:
            from tabsafe.protect.weights import _record_weights

            w = w * _record_weights(records, microdata.weight, where=where)
        column = from_numpy(w)
        data = (records.set_column(names.index(self.weight), self.weight, column) if self.weight in names
                else records.append_column(self.weight, column))
        evaluation = pa.Table.from_arrays([from_numpy(sampled[unit_of])], names=["sampled"])
        n_sampled = int(sampled.sum())
        unit = "households" if self.household else "records"
        figures: dict[str, Any] = {unit: n_units, f"{unit}_sampled": n_sampled, "strata": n_strata,
                                   "fraction": round(n_sampled / n_units, 6) if n_units else 0.0,
                                   "weight": self.one_in}
        notes = (f"tables count {unit} sampled one in {self.one_in} "
                 + (f"within {' × '.join(self.strata)} " if self.strata else "")
                 + f"weighted by {self.one_in} ({self.weight!r}): every cell is a multiple of {self.one_in} and an "
                   "unbiased estimate of the original count; a published "
                 + f"{self.one_in} may be a population unique (seed 001 §7)",)
        return MicrodataOutcome(data=data, evaluation=evaluation, weight=self.weight, figures=figures, notes=notes)
