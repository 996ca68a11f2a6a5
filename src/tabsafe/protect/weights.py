"""Perturbation weights on households: method ``weights`` of the registry (seed 001 §7;
METHODS.md §9). A microdata method: tables built after it count weighted records.

The paper's sample design, step by step: "1. Place each household in the microdata file into a
strata defined by CD and household size groups 1, 2, 3, 4, 5+. 2. Within each strata we perturb
the record weight by a multiplicative factor, referred to as the perturbation weight. The
perturbation weight that is applied to a household is also used for all persons within a
household. […] 3. Tables are produced using weighted aggregates. If the final weight is 0, the
unit does not contribute to any cell count. If the final weight is 2 […] it contributes 2 to that
cell."

The distribution of step 4 was lost in the text; METHODS.md §9 reconstructs it from the
properties the paper states — "a large probability to non-perturbation", weights 0, 2 and 3
("allowing perturbation weights to be reassigned as 3 gives us additional protection against
disclosure of uniques"), mean 1, and a variance bounded by 1.6 per expected perturbed household:
with ``q = 1/a_k`` (``a_k ≥ 1``) a household of stratum ``k`` gets weight 1 with probability
``1 − q``, 0 with ``0.6q``, 2 with ``0.2q`` and 3 with ``0.2q``. Then ``E w = 1`` and
``Var w = 4·0.2q + 9·0.2q + (1 − q) − 1 = 1.6q``; with ``n_k`` households in the stratum,
``n_k·q = n_k/a_k`` of them are expected to be perturbed — "a_k may then be set to values such
as n_k or 0.5 n_k in order to achieve an expected value of 1 or 2 households per stratum". The
parameter ``per_stratum`` is that expected number: ``a_k = max(1, n_k / per_stratum)``.

The strata are the paper's by default: the small area (``strata``) crossed with the household
size group 1, 2, 3, 4, 5+ (``size_groups = 5``; the paper adds that "groups 1, 2, 3+" may do:
``size_groups = 3``), the size being the household's number of persons in the data.

Records keep every column; the method adds the weight column (the product of an existing record
weight and the perturbation weight) and tells tabulation to count by it, so every table built from
the perturbed records is a weighted sum: consistent across tables (the same microdata) and
additive, as the paper says. An existing record weight must be a whole number (tables count
integers): a fractional, negative or missing weight is refused with one line, never truncated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa

from tabsafe.capabilities import Capabilities
from tabsafe.errors import InputError, param, shown_list
from tabsafe.method import Examples, MicrodataMethod, MicrodataOutcome
from tabsafe.params import Int, Real, Text, TextList, parameter

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.model.microdata import Microdata

__all__ = ["PerturbationWeights", "perturbation_weights"]

#: The weights other than 1 and their shares of the perturbed households (METHODS.md §9).
WEIGHTS = np.array([0, 2, 3])
SHARES = np.array([0.6, 0.2, 0.2])


def perturbation_weights(q: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The perturbation weight of each household from its perturbation probability ``q`` and a
    uniform draw ``u``: 1 if ``u ≥ q``, else 0, 2 or 3 for ``u/q`` in ``[0, 0.6)``, ``[0.6, 0.8)``
    and ``[0.8, 1)`` (001 §7; METHODS.md §9).

    >>> perturbation_weights(np.array([0.5, 0.5, 0.5, 0.5]), np.array([0.9, 0.1, 0.35, 0.45])).tolist()
    [1, 0, 2, 3]
    """
    q = np.asarray(q, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)
    v = np.where(q > 0, u / np.where(q > 0, q, 1.0), 1.0)
    other = WEIGHTS[np.searchsorted(np.cumsum(SHARES), v, side="right").clip(0, WEIGHTS.size - 1)]
    return np.where(u < q, other, 1).astype(np.int64)


def _codes(column: pa.ChunkedArray) -> np.ndarray:
    """Integer codes of a column's distinct values (nulls are a value of their own)."""
    import pyarrow.compute as pc

    from tabsafe._arrow import to_numpy

    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    encoded = pc.dictionary_encode(column).combine_chunks()
    indices = to_numpy(encoded.indices, fill=-1).astype(np.int64)
    return np.where(indices < 0, len(encoded.dictionary), indices)


@dataclass(frozen=True, kw_only=True)
class PerturbationWeights(MicrodataMethod):
    """Perturbation weights: households within strata weighted 0, 1, 2 or 3 at random (001 §7).

    Within each stratum (small area × household-size group 1, 2, 3, 4, 5+) each household gets the weight 1
    with probability ``1 − q``, else 0, 2 or 3 (shares 0.6, 0.2, 0.2), where
    ``q = per_stratum / n_k`` for a stratum of ``n_k`` households (at most 1): ``per_stratum``
    households per stratum are expected to be perturbed. Every person of a household gets its
    household's weight, multiplied into an existing record weight; tables count weighted records
    (mean weight 1: unbiased; variance 1.6 per perturbed household). The module docstring gives
    the derivation.

    Attributes:
        strata: the variables whose combinations are the strata, with the size groups (the
            paper: the small area).
        size_groups: households are also stratified by their number of persons in groups 1, 2,
            …, N-1, N+ (the paper: 5, i.e. 1, 2, 3, 4, 5+; it suggests 3 may do); 0: not by size.
        household: the household identifier; every person of a household gets its weight.
        per_stratum: households per stratum expected to get a weight other than 1 (a_k = n_k /
            per_stratum, at least 1); 0 leaves every weight at 1.
        weight: the weight column added to the records (tables count by it).
    """

    name: ClassVar[str] = "weights"
    declared: ClassVar[Capabilities] = Capabilities(random=True)

    strata: tuple[str, ...] = parameter(("small_area",), check=TextList(min_items=0))
    size_groups: int = parameter(5, check=Int(min=0, max=1000))
    household: str = parameter("household_id", check=Text(identifier=True))
    per_stratum: float = parameter(1.0, check=Real(min=0))
    weight: str = parameter("weight", check=Text(identifier=True))

    def validate(self) -> None:
        if self.household in self.strata:
            raise InputError(f"{param('household')} {self.household!r} is also a stratum variable ({param('strata')})")
        if self.weight in (*self.strata, self.household):
            raise InputError(f"{param('weight')} {self.weight!r} names a column the method reads")

    @classmethod
    def examples(cls) -> Examples:
        import pandas as pd

        rng = np.random.default_rng(5)
        sizes = rng.integers(1, 5, 120)
        household = np.repeat(np.arange(sizes.size), sizes)
        area = rng.choice(["s1", "s2", "s3"], sizes.size)[household]
        data = pd.DataFrame({
            "small_area": area,
            "household_size": np.minimum(sizes, 3).astype(str)[household],
            "household_id": household,
            "sex": rng.choice(["1", "2"], household.size),
            "rkey": rng.integers(0, 10**10, household.size) / 1e10,
        })
        return Examples(
            typical=(cls(), cls(per_stratum=3.0), cls(strata=("small_area",), weight="w")),
            why_no_identity="the records always gain a weight column; with per_stratum 0 every weight is 1 "
                            "and tables are unchanged (tests/properties/test_perturbation_properties.py)",
            data=data,
        )

    def apply(self, microdata: Microdata, seed: int | None) -> MicrodataOutcome:
        """Draw one weight per household within its stratum; every person gets it."""
        records = microdata.read()
        names = records.column_names
        for col, option in [*((v, "strata") for v in self.strata), (self.household, "household")]:
            if col not in names:
                shown = shown_list(names)
                raise InputError(f"unknown variable {col!r} in {param(option)}; the data have: {shown}",
                                 where=microdata.source.describe())
        if self.weight in names and self.weight != microdata.weight:
            raise InputError(f"the data already have a column {self.weight!r}: choose another {param('weight')}",
                             where=microdata.source.describe())
        household = _codes(records.column(self.household))
        stratum = np.zeros(records.num_rows, dtype=np.int64)
        for v in self.strata:
            codes = _codes(records.column(v))
            stratum = stratum * (int(codes.max(initial=0)) + 1) + codes
        # one stratum per household (its persons share the strata variables)
        hh, first, size = np.unique(household, return_index=True, return_counts=True)
        hh_stratum = stratum[first]
        mixed = stratum != hh_stratum[np.searchsorted(hh, household)]
        if mixed.any():
            raise InputError(f"{_n(int(np.unique(household[mixed]).size), 'household')} have persons in different "
                             f"strata ({', '.join(self.strata)}): a household's persons must share them",
                             where=microdata.source.describe())
        if self.size_groups:
            # the paper's household-size groups 1, 2, …, N+ from the persons in the data
            hh_stratum = hh_stratum * (self.size_groups + 1) + np.minimum(size, self.size_groups)
        _, stratum_of_hh, n_k = np.unique(hh_stratum, return_inverse=True, return_counts=True)
        q = np.minimum(1.0, self.per_stratum / n_k[stratum_of_hh])
        w_hh = perturbation_weights(q, np.random.default_rng(seed).random(hh.size))
        w = w_hh[np.searchsorted(hh, household)]
        if microdata.weight is not None:
            w = w * _record_weights(records, microdata.weight, where=microdata.source.describe())
        from tabsafe._arrow import from_numpy

        column = from_numpy(w.astype(np.int64))
        if self.weight in names:
            data = records.set_column(names.index(self.weight), self.weight, column)
        else:
            data = records.append_column(self.weight, column)
        perturbed = w_hh != 1
        private: dict[str, Any] = {
            "households": int(hh.size),
            "strata": int(n_k.size),
            "households_perturbed": int(perturbed.sum()),
            "households_weight_0": int(np.count_nonzero(w_hh == 0)),
            "expected_perturbed": round(float(q.sum()), 2),
            "variance_bound": round(1.6 * float(q.sum()), 2),
        }
        evaluation = pa.table({self.household: records.column(self.household).take(pa.array(first)),
                               "perturbation_weight": from_numpy(w_hh)})
        return MicrodataOutcome(
            data=data, evaluation=evaluation, weight=self.weight, private=private,
            notes=(f"tables count records weighted by {self.weight!r} (perturbation weights 0, 1, 2, 3 on whole "
                   "households): they are consistent and additive",),
        )


def _record_weights(records: pa.Table, name: str, *, where: str) -> np.ndarray:
    """The data's own record weights as integers: tables count whole units, so a fractional
    weight is refused (never truncated), as tabulation refuses it."""
    from tabsafe._arrow import to_numpy

    col = records.column(name)
    if col.null_count:
        raise InputError(f"the record weight {name!r} has {_n(col.null_count, 'missing value')}", where=where)
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_decimal(col.type)):
        raise InputError(f"the record weight {name!r} must hold numbers; it holds {col.type}", where=where)
    values = np.asarray(to_numpy(col.cast(pa.float64()).combine_chunks()), dtype=np.float64)
    bad = ~np.isfinite(values) | (values < 0) | (values != np.floor(values))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(f"the record weight {name!r} must hold whole numbers of 0 or more (tables count whole "
                         f"units; perturbation weights multiply it); row {row + 1:,} has {values[row]:g}", where=where)
    return values.astype(np.int64)


def _n(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"
