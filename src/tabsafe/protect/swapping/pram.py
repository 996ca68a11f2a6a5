"""PRAM, the post-randomisation method: method ``pram`` of the registry (seed 001 §6,
METHODS.md §9).

Each unit (a household, or a record) keeps or changes its category of one variable at random by
a Markov transition matrix ``P`` whose rows are the current category and columns the new one. The
matrix is *invariant* for the data, ``t P = t`` with ``t`` the counts per category, so the expected
count of every category after PRAM is the count before (seed 001 §6: "on average after PRAM has
been applied there will still be x1 households in m1, x2 households in m2, and so on").

The matrix is given as a file, or built from a retention probability ``q`` as in seed 001 §6
(``p = 1 - q``): within a stratum of ``m`` categories with counts ``x_1..x_m`` and smallest count
``x_min``, a unit of category ``i`` moves with probability ``p·x_min/x_i``, to each other
category equally::

    P_ii = 1 - p·x_min/x_i,    P_ij = p·x_min / ((m-1)·x_i)   (j ≠ i)

so ``p·x_min/(m-1)`` units are expected to move from each category to each other one, and back:
the smallest category keeps a unit with probability ``q``, larger ones more often. Strata
(``within``, e.g. the area of a small area) keep every move inside the stratum, as the seed's
example keeps households inside their SLA.

A matrix file is CSV, either long (columns ``from,to,p``, zero entries may be left out) or wide
(a header of the new categories after a first column of the current ones). Each row must sum to
1, and the matrix must be invariant for the data (in every stratum): otherwise the error names
the category and its row. With ``invariant``, a matrix ``P`` that is not invariant is replaced,
in every stratum, by its invariant form ``R = P·Q`` (Gouweleeuw, Kooiman, Willenborg and De Wolf
1998, the paper seed 001 §6 cites), where ``Q`` is the backward matrix
``Q_ij = P_ji·t_j / Σ_k P_ki·t_k``: a unit goes forward by ``P`` and back by ``Q``, so
``t R = t``.

**The published matrix** (seed 001 §6: "the level of information loss … can be accurately
described to the table users by releasing the transition matrix"). The report carries the matrix
applied in each stratum (:func:`matrix_table`: the strata's values, ``from``, ``to``, ``p``, only
the categories the stratum has), and ``tabsafe protect``/``tabsafe swap`` write it beside their
output as a release file. An analyst corrects a table ``T*`` of the PRAMed variable (by itself or
crossed with other variables) with the moment estimator ``T̂ = T* · R⁻¹`` (``E T* = T R``). What it
reveals: an invariant matrix is a function of the stratum's category counts ``t`` (the retention
form's ``P_ii = 1 − p·t_min/t_i``; any invariant form), so with the stratum's total it gives each
category's original number of units in that stratum — publish it where those counts are public.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tabsafe.capabilities import Capabilities
from tabsafe.errors import InputError, param
from tabsafe.method import Examples, MicrodataMethod, MicrodataOutcome
from tabsafe.params import Bool, File, Optional, Real, Text, TextList, parameter

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from tabsafe.model.microdata import Microdata

#: rows must sum to 1 and ``t P`` must equal ``t`` within these tolerances
ROW_TOLERANCE = 1e-6
INVARIANCE_TOLERANCE = 1e-6  # times the stratum's number of units


def invariant_matrix(counts: np.ndarray, retention: float) -> np.ndarray:
    """Seed 001 §6's invariant transition matrix for categories with ``counts`` (all > 0).

    >>> invariant_matrix(np.array([10, 20]), 0.8).round(3).tolist()
    [[0.8, 0.2], [0.1, 0.9]]
    """
    x = np.asarray(counts, dtype=float)
    m = x.size
    if m < 2:
        return np.ones((m, m))
    move = (1.0 - retention) * x.min() / x  # probability that a unit of category i moves
    out = np.repeat((move / (m - 1))[:, None], m, axis=1)
    np.fill_diagonal(out, 1.0 - move)
    return out


@dataclass(frozen=True)
class TransitionFile:
    """A transition matrix read from a file: transitions ``from → to`` with probability ``p``
    and, per current category, the line of the file where its row is."""

    path: str
    source: np.ndarray  # current category (text)
    target: np.ndarray  # new category (text)
    p: np.ndarray
    row_line: dict[str, int]


def read_matrix(path: str) -> TransitionFile:
    """Read and check a transition matrix file (module docstring): numbers in [0, 1], each row
    summing to 1, no transition given twice."""
    where = str(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.reader(f))
    except OSError as exc:
        raise InputError(f"cannot read the transition matrix: {exc.strerror}", where=where) from None
    except UnicodeDecodeError:
        raise InputError("the transition matrix is not UTF-8 text", where=where) from None
    rows = [r for r in rows if any(c.strip() for c in r)]
    if len(rows) < 2:
        raise InputError("the transition matrix has no rows", where=where)
    header = [c.strip() for c in rows[0]]
    src: list[str] = []
    dst: list[str] = []
    prob: list[float] = []
    line_of: dict[str, int] = {}
    lines: list[int] = []

    def number(text: str, line: int) -> float:
        try:
            v = float(text)
        except ValueError:
            raise InputError(f"line {line}: {text!r} is not a probability", where=where) from None
        if not 0.0 <= v <= 1.0:
            raise InputError(f"line {line}: probability {text} is outside [0, 1]", where=where)
        return v

    if [h.lower() for h in header] == ["from", "to", "p"]:
        for i, r in enumerate(rows[1:], start=2):
            if len(r) != 3:
                raise InputError(f"line {i}: expected from,to,p; got {len(r)} fields", where=where)
            a, b = r[0].strip(), r[1].strip()
            src.append(a)
            dst.append(b)
            prob.append(number(r[2].strip(), i))
            lines.append(i)
            line_of.setdefault(a, i)
    else:
        targets = header[1:]
        if not targets or any(not t for t in targets) or len(set(targets)) != len(targets):
            raise InputError("the header must name every new category once (or be from,to,p)", where=where)
        for i, r in enumerate(rows[1:], start=2):
            if len(r) != len(header):
                raise InputError(f"line {i}: expected {len(header)} fields, got {len(r)}", where=where)
            a = r[0].strip()
            if a in line_of:
                raise InputError(f"line {i}: row {a!r} is given twice (line {line_of[a]})", where=where)
            line_of[a] = i
            for t, cell in zip(targets, r[1:]):
                src.append(a)
                dst.append(t)
                prob.append(number(cell.strip(), i))
                lines.append(i)
    source, target, p = np.array(src, dtype=object), np.array(dst, dtype=object), np.array(prob)
    seen: set[tuple[str, str]] = set()
    for a, b, line in zip(src, dst, lines):
        if (a, b) in seen:
            raise InputError(f"line {line}: transition {a!r} → {b!r} is given twice", where=where)
        seen.add((a, b))
    for a, line in line_of.items():
        total = float(p[source == a].sum())
        if abs(total - 1.0) > ROW_TOLERANCE:
            raise InputError(f"row {a!r} (line {line}) sums to {total:.9g}, not 1", where=where)
    return TransitionFile(where, source, target, p, line_of)


@dataclass(frozen=True, kw_only=True)
class Pram(MicrodataMethod):
    """PRAM: a categorical variable changed at random by an invariant transition matrix (001 §6).

    Attributes:
        variable: the categorical variable to perturb (e.g. small_area).
        within: strata that every change stays inside (e.g. area); the matrix is built, and
            checked for invariance, per stratum.
        retention: probability that a unit of a stratum's smallest category keeps its value
            (larger categories keep theirs more often, so expected counts stay; seed 001 §6).
        matrix: transition matrix file (CSV from,to,p or a square table) instead of retention.
        household: a household variable: whole households change together (the variable and the
            strata must be household-level); none: every record on its own.
        invariant: with matrix: apply the matrix's invariant form R = P·Q in every stratum
            (Gouweleeuw et al. 1998) instead of refusing a matrix that is not invariant.
    """

    name: ClassVar[str] = "pram"
    declared: ClassVar[Capabilities] = Capabilities(random=True)

    variable: str = parameter(check=Text(identifier=True))
    within: tuple[str, ...] = parameter((), check=TextList(min_items=0))
    retention: float | None = parameter(None, check=Optional(Real(min=0, max=1)))
    matrix: str | None = parameter(None, check=Optional(File()))
    household: str | None = parameter(None, check=Optional(Text(identifier=True)))
    invariant: bool = parameter(False, check=Bool())

    #: the publishable table the report carries (:attr:`~tabsafe.method.Method.side_tables`)
    side_tables: ClassVar[tuple[str, ...]] = ("transitions",)

    def validate(self) -> None:
        if (self.retention is None) == (self.matrix is None):
            raise InputError(f"PRAM needs either {param('retention')} or {param('matrix')} (one of them)")
        if self.invariant and self.matrix is None:
            raise InputError(f"{param('invariant')} turns a {param('matrix')} file into its invariant form: give one "
                             f"(the {param('retention')} matrix is invariant already)")
        if self.variable in self.within:
            raise InputError(f"{param('within')} cannot hold the perturbed variable {self.variable!r}")
        if self.household is not None and self.household in (self.variable, *self.within):
            raise InputError(f"the household variable {self.household!r} cannot be perturbed or a stratum")
        object.__setattr__(self, "_matrix", read_matrix(self.matrix) if self.matrix is not None else None)

    @classmethod
    def examples(cls) -> Examples:
        from tabsafe.protect.swapping.examples import population

        return Examples(
            typical=(cls(variable="small_area", within=("area",), retention=0.8, household="household_id"),
                     cls(variable="age", retention=0.9)),
            identity=cls(variable="small_area", within=("area",), retention=1.0, household="household_id"),
            data=population(),
        )

    def columns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([self.variable, *self.within, *([self.household] if self.household else [])]))

    def apply(self, microdata: Microdata, seed: int | None) -> MicrodataOutcome:
        assert seed is not None  # a random method always gets one
        table = microdata.read()
        return pram_records(table, self, seed, where=microdata.source.describe())


def pram_records(table: pa.Table, method: Pram, seed: int, *, where: str) -> MicrodataOutcome:
    """Apply PRAM to ``table`` (module docstring); draws per stratum from the stratum's stream."""
    import pyarrow as pa

    from tabsafe._arrow import from_numpy
    from tabsafe.protect.swapping._matching import area_key, stream
    from tabsafe.protect.swapping._population import (
        check_columns,
        check_constant,
        column_codes,
        combine,
        households,
    )

    wanted = [(method.variable, "variable"), *((v, "within") for v in method.within)]
    if method.household is not None:
        wanted.append((method.household, "household"))
    check_columns(table, wanted, where=where)
    hh = households(table, method.household, option="household", where=where)
    var = column_codes(table, method.variable, option="variable", where=where)
    strata_codes = [column_codes(table, v, option="within", where=where) for v in method.within]
    check_constant(table, hh, var, method.variable, what="has two values of the perturbed variable", where=where)
    for name, codes in zip(method.within, strata_codes):
        check_constant(table, hh, codes, name, what="lies in two strata", where=where)
    n_units = hh.n
    cat = var.codes[hh.first]
    stratum, n_strata = combine([c.codes[hh.first] for c in strata_codes], [c.n for c in strata_codes], n_units,
                                dense=True)
    parts = _stratum_parts(strata_codes, hh.first, stratum, n_strata)
    stratum_label = _stratum_labels(parts)
    # counts per (stratum, category)
    counts = np.bincount(stratum * var.n + cat, minlength=n_strata * var.n).reshape(n_strata, var.n)

    u = np.empty((2, n_units))
    order = np.argsort(stratum, kind="stable")
    sizes = np.bincount(stratum, minlength=n_strata)
    start = 0
    for s, size in enumerate(sizes):
        if size == 0:
            continue
        idx = order[start:start + size]
        start += size
        gen = stream(seed, 2, area_key(stratum_label[s])) if method.within else stream(seed, 1)
        u[:, idx] = gen.random((2, int(size)))

    new, mats, note = _transitions(method, cat, stratum, counts, var.labels, stratum_label, u)
    entries = int(sum(c.size ** 2 for c in _present(counts)))
    matrix = matrix_table(mats, var.labels, method.within, parts) if mats is not None else None
    notes = [note]
    if matrix is None:
        notes.append(f"the transition matrix has {entries:,} entries (over {MAX_PUBLISHED_ENTRIES:,}): not written; "
                     f"PRAM within smaller strata ({param('within')}) gives a smaller one")
    else:
        notes.append("the transition matrix applied (per stratum) may be published for analysts to correct their "
                     "estimates (T* R⁻¹; seed 001 §6); it gives each stratum's original number of units per category")
    changed_unit = new != cat
    data = table
    if changed_unit.any():
        # each category's value is taken from a record that has it, so the column keeps its type
        rep = np.full(var.n, -1, dtype=np.int64)
        rep[var.codes[::-1]] = np.arange(var.codes.size - 1, -1, -1)
        src = rep[new[hh.of_record]]
        i = data.schema.get_field_index(method.variable)
        data = data.set_column(i, data.schema.field(i), data.column(method.variable).take(from_numpy(src)))
    changed = changed_unit[hh.of_record]
    evaluation = pa.Table.from_arrays([from_numpy(changed)], names=["changed"])
    n_changed = int(changed_unit.sum())
    figures = {"units": n_units, "units_changed": n_changed,
               "share_changed": round(n_changed / n_units, 6) if n_units else 0.0,
               "records_changed": int(changed.sum()),
               "matrix_entries": entries, "matrix_published": matrix is not None}
    tables = {"transitions": matrix} if matrix is not None else {}
    return MicrodataOutcome(data=data, evaluation=evaluation, figures=figures, notes=tuple(notes), tables=tables)


def _transitions(method: Pram, cat: np.ndarray, stratum: np.ndarray, counts: np.ndarray, labels: list[str],
                 stratum_label: list[str], u: np.ndarray) -> tuple[np.ndarray, Any, str]:
    """Each unit's new category, the matrix applied in each stratum (its categories, the matrix
    over them; None when too large to publish) and the report's note."""
    present = _present(counts)
    small = sum(c.size ** 2 for c in present) <= MAX_PUBLISHED_ENTRIES
    transitions = method._matrix  # type: ignore[attr-defined]
    if transitions is None:
        retention = float(method.retention)  # type: ignore[arg-type]
        new = _draw_invariant(cat, stratum, counts, retention, u)
        mats = [(c, invariant_matrix(counts[s, c], retention)) for s, c in enumerate(present)] if small else None
        return new, mats, (f"retention {method.retention:g}: a unit of a stratum's smallest category keeps its value "
                           "with that probability, larger categories more often, so expected counts stay (seed 001 §6)")
    dense = _file_matrix(counts, labels, transitions, method)
    if method.invariant:
        mats = [(c, invariant_form(dense[c], counts[s])) for s, c in enumerate(present)]
        return (_draw_local(cat, stratum, mats, u[0]), mats if small else None,
                f"transition matrix {transitions.path} in its invariant form R = P·Q per stratum (Gouweleeuw et al. "
                "1998): expected counts stay")
    _check_invariant(counts, dense, labels, transitions, stratum_label, method)
    mats = [(c, dense[np.ix_(c, c)]) for c in present] if small else None
    return (_draw_from_file(cat, dense, u), mats,
            f"transition matrix {transitions.path}: invariant for the data in every stratum")


#: a transition matrix of more entries (all strata) is not carried in the report nor written
MAX_PUBLISHED_ENTRIES = 4_000_000


def _present(counts: np.ndarray) -> list[np.ndarray]:
    """Each stratum's categories (codes, ascending) that have units."""
    return [np.flatnonzero(row) for row in counts]


def invariant_form(rows: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The invariant form ``R = P·Q`` of a transition matrix for categories with counts ``t``
    (Gouweleeuw et al. 1998): ``rows`` are ``P``'s rows of the categories present (``t > 0``),
    over every category; ``Q_ij = P_ji·t_j / λ_i`` with ``λ = t P`` sends a unit back, so
    ``t R = t``. Returns ``R`` over the categories present.

    >>> P = np.array([[0.8, 0.2], [0.2, 0.8]])
    >>> R = invariant_form(P, np.array([10, 30]))
    >>> np.allclose(np.array([10, 30]) @ R, [10, 30]) and np.allclose(R.sum(axis=1), 1)
    True
    """
    present = np.flatnonzero(t)
    tp = np.asarray(t, dtype=float)[present]
    lam = tp @ rows  # expected units in each category after P
    reach = lam > 0
    q = (rows[:, reach].T * tp) / lam[reach][:, None]  # backward: from a reached category to a present one
    return rows[:, reach] @ q


def matrix_table(mats: list[tuple[np.ndarray, np.ndarray]], labels: list[str], within: tuple[str, ...],
                 parts: list[tuple[str, ...]]) -> pa.Table:
    """The matrices applied, one per stratum, as the published long table: the strata's values,
    ``from``, ``to``, ``p`` (the stratum's categories only; zero entries left out)."""
    import pyarrow as pa

    names = np.array(labels, dtype=object)
    cols: dict[str, list[Any]] = {v: [] for v in within}
    src: list[Any] = []
    dst: list[Any] = []
    prob: list[Any] = []
    for s, (cats, m) in enumerate(mats):
        i, j = np.nonzero(m > 0)
        src.append(names[cats[i]])
        dst.append(names[cats[j]])
        prob.append(m[i, j])
        for v, value in zip(within, parts[s]):
            cols[v].append(np.full(i.size, value, dtype=object))
    data = {v: pa.array(np.concatenate(c) if c else [], pa.string()) for v, c in cols.items()}
    data.update({"from": pa.array(np.concatenate(src) if src else [], pa.string()),
                 "to": pa.array(np.concatenate(dst) if dst else [], pa.string()),
                 "p": pa.array(np.concatenate(prob) if prob else [], pa.float64())})
    return pa.table(data)


def _stratum_parts(codes: list[Any], first: np.ndarray, stratum: np.ndarray, n_strata: int) -> list[tuple[str, ...]]:
    """Each stratum's values of the strata variables (``()`` without strata)."""
    if not codes:
        return [()] * n_strata
    _, first_unit = np.unique(stratum, return_index=True)
    return [tuple(c.labels[int(c.codes[first[unit]])] for c in codes) for unit in first_unit]


def _stratum_labels(parts: list[tuple[str, ...]]) -> list[str]:
    """Each stratum as text ("A1" or "A1|x"): what its random stream is keyed by."""
    return ["|".join(p) if p else "(all)" for p in parts]


def _draw_invariant(cat: np.ndarray, stratum: np.ndarray, counts: np.ndarray, retention: float,
                    u: np.ndarray) -> np.ndarray:
    """New categories by seed 001 §6's matrix: move with probability ``p·x_min/x_i``, then to
    one of the stratum's other categories, each equally likely."""
    present = counts > 0
    m = present.sum(axis=1)  # categories per stratum
    x_min = np.where(present, counts, np.iinfo(np.int64).max).min(axis=1)
    x = counts[stratum, cat].astype(float)
    move = (1.0 - retention) * x_min[stratum] / x
    moves = (u[0] < move) & (m[stratum] > 1)
    # the stratum's categories in code order, and each unit's place among them
    cats_sorted = np.flatnonzero(present.ravel())  # stratum * n_cat + category, sorted
    n_cat = counts.shape[1]
    offset = np.concatenate([[0], np.cumsum(m)])
    local = np.searchsorted(cats_sorted, stratum * n_cat + cat) - offset[stratum]
    r = np.minimum((u[1] * (m[stratum] - 1)).astype(np.int64), np.maximum(m[stratum] - 2, 0))
    r = np.where(r >= local, r + 1, r)  # skip the unit's own category
    new = cats_sorted[np.minimum(offset[stratum] + r, cats_sorted.size - 1)] % n_cat
    return np.where(moves, new, cat)


def _file_matrix(counts: np.ndarray, labels: list[str], tf: TransitionFile, method: Pram) -> np.ndarray:
    """The matrix of a file over the data's categories (dense), after checking it covers them and
    moves no unit to a category the data do not have."""
    code_of = {lab: i for i, lab in enumerate(labels)}
    n_cat = len(labels)
    rows_present = set(tf.row_line)
    for i, lab in enumerate(labels):
        if counts[:, i].any() and lab not in rows_present:
            raise InputError(f"category {lab!r} of {param('variable')} {method.variable!r} has no row in the "
                             "transition matrix", where=tf.path)
    keep = np.array([a in code_of for a in tf.source], dtype=bool)
    unknown_to = [b for a, b, p in zip(tf.source[keep], tf.target[keep], tf.p[keep]) if b not in code_of and p > 0]
    if unknown_to:
        # mass to a category the data do not have can never be invariant
        b = unknown_to[0]
        a = next(a for a, bb, p in zip(tf.source, tf.target, tf.p) if bb == b and p > 0 and a in code_of)
        raise InputError(f"not invariant for the data: row {a!r} (line {tf.row_line[a]}) moves units to {b!r}, a "
                         f"category the data of {method.variable!r} do not have", where=tf.path)
    ok = keep & np.array([b in code_of for b in tf.target], dtype=bool)
    src = np.array([code_of[a] for a in tf.source[ok]], dtype=np.int64)
    dst = np.array([code_of[b] for b in tf.target[ok]], dtype=np.int64)
    dense = np.zeros((n_cat, n_cat))
    dense[src, dst] = tf.p[ok]
    return dense


def _check_invariant(counts: np.ndarray, dense: np.ndarray, labels: list[str], tf: TransitionFile,
                     stratum_label: list[str], method: Pram) -> None:
    """``t P = t`` in every stratum, else one line naming the category whose count moves most."""
    expected = counts @ dense
    gap = np.abs(expected - counts)
    limit = INVARIANCE_TOLERANCE * np.maximum(counts.sum(axis=1, keepdims=True), 1)
    if (gap > limit).any():
        s, j = (int(v) for v in np.unravel_index(np.argmax(np.where(gap > limit, gap, -1.0)), gap.shape))
        lab = labels[j]
        in_stratum = f" in {'/'.join(method.within)} {stratum_label[s]}" if method.within else ""
        line = tf.row_line.get(lab)
        row = f"row {lab!r} (line {line})" if line else f"category {lab!r}"
        raise InputError(f"not invariant for the data{in_stratum}: {row}: PRAM would expect {expected[s, j]:.6g} "
                         f"units in {lab!r}, the data have {int(counts[s, j])} (or give {param('invariant')}: its "
                         "invariant form)", where=tf.path)


def _draw_from_file(cat: np.ndarray, dense: np.ndarray, u: np.ndarray) -> np.ndarray:
    """New categories by one matrix for every stratum: the inverse CDF of the unit's row."""
    src, dst = np.nonzero(dense)
    p = dense[src, dst]
    cum = np.cumsum(p)
    row_start = np.searchsorted(src, src, side="left")
    base = np.concatenate([[0.0], cum])[row_start]
    bound = src + (cum - base)
    last = np.append(src[1:] != src[:-1], True)
    bound[last] = src[last] + 1.0  # rows sum to 1 up to rounding: close them exactly
    pos = np.searchsorted(bound, cat + u[0], side="right")
    return dst[np.minimum(pos, dst.size - 1)]


def _draw_local(cat: np.ndarray, stratum: np.ndarray, mats: list[tuple[np.ndarray, np.ndarray]],
                u: np.ndarray) -> np.ndarray:
    """New categories by each stratum's own matrix over its categories (the inverse CDF of the
    unit's row; the rows laid end to end, row ``r`` spanning ``(r, r+1]``)."""
    new = cat.copy()
    order = np.argsort(stratum, kind="stable")
    starts = np.searchsorted(stratum[order], np.arange(len(mats) + 1))
    for s, (cats, m) in enumerate(mats):
        idx = order[starts[s]:starts[s + 1]]
        if idx.size == 0 or cats.size < 2:
            continue
        k = cats.size
        cum = np.cumsum(m, axis=1)
        cum[:, -1] = 1.0  # rows sum to 1 up to rounding: close them exactly
        bound = (np.arange(k)[:, None] + cum).ravel()
        local = np.searchsorted(cats, cat[idx])
        pos = np.searchsorted(bound, local + u[idx], side="right")
        new[idx] = cats[np.minimum(pos - local * k, k - 1)]
    return new
