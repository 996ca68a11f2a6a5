"""Over-imputation: method ``over-imputation`` of the registry (seed 000 §5.3, pre-tabular; seed
004 §2: "randomly deleting variables in existing records and imputing the variables using the Edit
and Imputation System already in use during census downstream processing").

A share ``rate`` of the records, drawn at random (a simple random sample of ``round(rate·n)``
records), have the values of ``variables`` deleted and imputed, as a census's edit and imputation
system imputes an item left blank: by a *hot deck* within imputation classes. The model is the
empirical distribution of the variables in the record's class (the records with the same values
of ``within``, e.g. area × sex × age band): each deleted record takes every imputed variable from
one *donor*, a record of its class drawn with equal probability among those that kept their values
— so the imputed variables stay consistent with each other, and the class's distribution of them is
kept in expectation. What the imputation blurs is the relation of the imputed variables to every
variable outside the classes: for a class ``c``, a value ``v`` of the imputed variables and a value
``w`` of another variable, a table's expected count after over-imputation is

    E n*(c, w, v) = (1 − r)·n(c, w, v) + r·n(c, w)·n(c, v)/n(c)

(``r`` the rate; the second term: the deleted records of ``(c, w)`` take ``v`` with the class's
frequency). So a small cell is no longer certain to hold the records it shows, and the release
gives an intruder "no certainty that a small count is real" — the protection seed 000 §5.3 asks
of pre-tabular methods — while tables of the classes by the imputed variables are kept on average.

A class whose every record was drawn has no donor: its records keep their values, and the report
counts them (``no_donor``). Records keep every column; a flag ``imputed`` per record goes to the
evaluation (private: it says which records' values are real).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tabsafe.capabilities import Capabilities
from tabsafe.errors import InputError, param, shown_list
from tabsafe.method import Examples, MicrodataMethod, MicrodataOutcome
from tabsafe.params import Real, TextList, parameter

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from tabsafe.model.microdata import Microdata

__all__ = ["OverImputation", "donors"]


def codes_of(column: Any) -> np.ndarray:
    """Integer codes of a column's distinct values (a missing value is a value of its own)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from tabsafe._arrow import to_numpy

    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    encoded = pc.dictionary_encode(column).combine_chunks()
    indices = to_numpy(encoded.indices, fill=-1).astype(np.int64)
    return np.where(indices < 0, len(encoded.dictionary), indices)


def classes(table: pa.Table, within: tuple[str, ...]) -> np.ndarray:
    """Each record's imputation class (0..k-1) from the values of ``within`` (one class without)."""
    cls = np.zeros(table.num_rows, dtype=np.int64)
    for v in within:
        codes = codes_of(table.column(v))
        cls = cls * (int(codes.max(initial=0)) + 1) + codes
        cls = np.unique(cls, return_inverse=True)[1].astype(np.int64)  # keep the codes small
    return cls


def donors(cls: np.ndarray, drawn: np.ndarray, u: np.ndarray) -> np.ndarray:
    """For each drawn record (``drawn``: their rows, ascending), the row of its donor: a record of
    the same class that was not drawn, each with equal probability (``u``: one uniform per drawn
    record); -1 when its class has none.

    >>> donors(np.array([0, 0, 1, 1, 0]), np.array([0, 2, 3]), np.array([0.2, 0.9, 0.5])).tolist()
    [1, -1, -1]
    """
    kept = np.ones(cls.size, dtype=bool)
    kept[drawn] = False
    pool = np.flatnonzero(kept)
    pool = pool[np.argsort(cls[pool], kind="stable")]  # by class, rows ascending within
    n_cls = int(cls.max(initial=-1)) + 1
    count = np.bincount(cls[pool], minlength=n_cls)
    start = np.concatenate([[0], np.cumsum(count)])[:-1]
    c = cls[drawn]
    have = count[c] > 0
    pick = start[c] + np.minimum((u * count[c]).astype(np.int64), np.maximum(count[c] - 1, 0))
    return np.where(have, pool[np.minimum(pick, max(pool.size - 1, 0))] if pool.size else -1, -1)


@dataclass(frozen=True, kw_only=True)
class OverImputation(MicrodataMethod):
    """Over-imputation: a random share of records get their values of some variables imputed from a donor (000 §5.3).

    The values of ``variables`` are deleted in a simple random sample of ``round(rate·n)``
    records and imputed by hot deck: every variable from one donor, a record of the same
    imputation class (``within``) that kept its values, drawn with equal probability. Tables of
    the classes by the imputed variables are kept in expectation; relations to other variables
    are blurred (the module docstring gives the expected table).

    Attributes:
        variables: the variables whose values are deleted and imputed (together, from one donor).
        rate: the share of records over-imputed (0: none; the paper's systems impute a few per
            cent).
        within: the imputation classes: a donor has the record's values of these variables (e.g.
            area, sex, age band); none: any record is a donor.
    """

    name: ClassVar[str] = "over-imputation"
    declared: ClassVar[Capabilities] = Capabilities(random=True)

    variables: tuple[str, ...] = parameter(check=TextList(min_items=1))
    rate: float = parameter(0.05, check=Real(min=0, max=1))
    within: tuple[str, ...] = parameter((), check=TextList(min_items=0))

    def validate(self) -> None:
        both = sorted(set(self.variables) & set(self.within))
        if both:
            raise InputError(f"{param('within')} cannot hold an imputed variable ({', '.join(both)}): a donor has the "
                             "record's values of the classes")

    @classmethod
    def examples(cls) -> Examples:
        from tabsafe.protect.swapping.examples import population

        return Examples(
            typical=(cls(variables=("age",), rate=0.2, within=("area", "sex")),
                     cls(variables=("age", "tenure"), rate=0.5)),
            identity=cls(variables=("age",), rate=0.0, within=("area",)),
            data=population(),
        )

    def columns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.within, *self.variables]))

    def apply(self, microdata: Microdata, seed: int | None) -> MicrodataOutcome:
        """Draw the records, their donors, and copy the donors' values (module docstring)."""
        import pyarrow as pa

        from tabsafe._arrow import from_numpy

        records = microdata.read()
        names = records.column_names
        for col, option in [*((v, "variables") for v in self.variables), *((v, "within") for v in self.within)]:
            if col not in names:
                raise InputError(f"unknown variable {col!r} in {param(option)}; the data have: {shown_list(names)}",
                                 where=microdata.source.describe())
        n = records.num_rows
        rng = np.random.default_rng(seed)
        k = int(round(self.rate * n))
        drawn = np.sort(rng.permutation(n)[:k])
        cls = classes(records, self.within)
        donor = donors(cls, drawn, rng.random(k))
        source = np.arange(n)
        ok = donor >= 0
        source[drawn[ok]] = donor[ok]
        data = records
        changed = np.zeros(n, dtype=bool)
        if ok.any():
            take = from_numpy(source)
            for v in self.variables:
                i = data.schema.get_field_index(v)
                before = data.column(i)
                after = before.take(take)
                changed |= ~np.asarray(before.combine_chunks().to_numpy(zero_copy_only=False) ==
                                       after.combine_chunks().to_numpy(zero_copy_only=False))
                data = data.set_column(i, data.schema.field(i), after)
        imputed = np.zeros(n, dtype=bool)
        imputed[drawn[ok]] = True
        evaluation = pa.Table.from_arrays([from_numpy(imputed), from_numpy(changed)], names=["imputed", "changed"])
        figures = {"records": n, "records_imputed": int(ok.sum()), "share_imputed": round(int(ok.sum()) / n, 6) if n
                   else 0.0, "no_donor": int((~ok).sum()), "classes": int(np.unique(cls).size)}
        private = {"records_changed": int(changed.sum())}
        notes = [f"{self.rate:g} of the records had {', '.join(self.variables)} imputed by hot deck "
                 + (f"within {' × '.join(self.within)}" if self.within else "from any record")
                 + ": tables of the classes by the imputed variables are kept on average (seed 000 §5.3, 004 §2)"]
        if (~ok).any():
            notes.append(f"{int((~ok).sum()):,} drawn records kept their values: their class had no other record "
                         "to take values from")
        return MicrodataOutcome(data=data, evaluation=evaluation, figures=figures, private=private, notes=tuple(notes))
