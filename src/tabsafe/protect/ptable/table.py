"""The p-table value: rows ``(i, j, p, v, p_int_lb, p_int_ub)`` on read-only numpy arrays.

A p-table holds, for every original count ``i = 0 .. i_max``, the distribution of the perturbed
value ``j``: ``v = j - i`` is the noise and ``(p_int_lb, p_int_ub]`` the cumulative interval a
cell key in ``[0, 1)`` falls into (seed 000 §5.4, Table 5.16; METHODS.md §2). A cell with count
``n`` uses the rows of ``min(n, i_max)``.

Only numpy is needed to build, check and look up a p-table: reading one from a file or using it
in the cell key method imports neither pandas nor scipy. :attr:`PTable.rows` and
:attr:`PTable.report` build pandas frames on demand for callers who want one.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tabsafe.errors import InputError
from tabsafe.protect.ptable.columns import COLUMNS, FILE_TOL, numeric_column, row_labels
from tabsafe.protect.ptable.files import KINDS, ptable_text, read_columns, write_ptable
from tabsafe.protect.ptable.params import PTableParams

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["COLUMNS", "FILE_TOL", "VARIANCE_TOL", "PTable", "RowReport", "numeric_column", "row_labels",
           "validate_columns"]

_INTS = ("i", "j", "v")
#: columns that may hold fractional steps (a magnitude p-table made with R ptable's ``step``)
_STEPS = ("j", "v")
REPORT_COLUMNS: tuple[str, ...] = ("i", "targets", "mean", "variance", "p_stay", "pstay_bound", "iterations")

VARIANCE_TOL = 5e-4
"""A row reaches ``V`` when its variance rounds to ``V`` at 3 decimals (R ptable's criterion)."""


@dataclass(frozen=True)
class RowReport:
    """What one original value's row block reached.

    Attributes:
        i: the original value (the last one stands for every larger count).
        targets: number of perturbed values ``j`` it may go to.
        mean: mean noise ``sum v p`` (0 up to rounding).
        variance: noise variance reached.
        p_stay: probability of no change.
        pstay_bound: the final lower bound on ``p_stay`` (NaN without ``pstay``).
        iterations: solves of this row (R ptable's ``iter``; 0 when read from a file).
    """

    i: int
    targets: int
    mean: float
    variance: float
    p_stay: float
    pstay_bound: float = math.nan
    iterations: int = 0

    def below(self, variance: float) -> bool:
        """Whether this row stays below the variance ``V`` aimed at (row 0 never moves)."""
        return self.i > 0 and self.variance < variance - VARIANCE_TOL

    def to_json(self) -> dict[str, Any]:
        return {
            "i": self.i, "targets": self.targets, "mean": self.mean, "variance": self.variance,
            "p_stay": self.p_stay, "pstay_bound": None if math.isnan(self.pstay_bound) else self.pstay_bound,
            "iterations": self.iterations,
        }


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


def _fail(source: str, what: str) -> InputError:
    return InputError(what, where=source)


def _check_row_blocks(cols: Mapping[str, np.ndarray], source: str) -> None:
    """Each original value's rows (sorted by (i, j)) are a distribution: p sums to 1 and the bounds
    p_int_lb/p_int_ub are its cumulative sums from 0 to 1 (METHODS.md §2)."""
    i = cols["i"]
    starts = np.flatnonzero(np.r_[True, i[1:] != i[:-1]])
    ends = np.r_[starts[1:], i.size]
    for s, e in zip(starts.tolist(), ends.tolist()):
        at = int(i[s])
        p, lb, ub = cols["p"][s:e], cols["p_int_lb"][s:e], cols["p_int_ub"][s:e]
        total = float(p.sum())
        if abs(total - 1.0) > FILE_TOL:
            raise _fail(source, f"row i={at}: probabilities sum to {total:.8g}, not 1 (tolerance {FILE_TOL:g})")
        if (
            abs(lb[0]) > FILE_TOL
            or abs(ub[-1] - 1.0) > FILE_TOL
            or np.any(np.abs(ub - lb - p) > FILE_TOL)
            or np.any(np.abs(lb[1:] - ub[:-1]) > FILE_TOL)
            or np.any(ub < lb)
        ):
            raise _fail(source, f"row i={at}: bounds p_int_lb/p_int_ub are not the cumulative sums of p "
                                "(must run from 0 to 1 with p = p_int_ub - p_int_lb)")


def validate_columns(columns: Mapping[str, Any], source: str) -> dict[str, np.ndarray]:
    """Check p-table columns (METHODS.md §2 layout) and return them typed and sorted by (i, j).

    ``j`` and ``v`` are integers (int64) in a count p-table; a magnitude p-table (R ptable
    ``create_num_ptable(..., step = 2)``, tau-ARGUS ``data/cellkey/Magnitude``) has them in
    fractional steps, kept as float64.

    Raises:
        InputError: a column is missing, a value is not a number, ``i`` is not an integer,
            ``j`` or ``p`` is negative, ``v != j - i``, a ``(i, j)`` pair repeats, an ``i`` is
            missing (in a count p-table), a row block does not sum to 1, the bounds are not its
            cumulative sums — or row ``i = 0`` moves a zero: a cell without records has no cell key (tables
            store only cells with records), so a count of 0 must stay 0.
    """
    missing = [c for c in COLUMNS if c not in columns]
    if missing:
        raise _fail(source, f"missing column(s) {', '.join(missing)}; a p-table needs {', '.join(COLUMNS)}")
    n = len(np.asarray(columns["i"]))
    if n == 0:
        raise _fail(source, "the p-table has no rows")
    if any(len(np.asarray(columns[c])) != n for c in COLUMNS):
        raise _fail(source, "the p-table's columns have different lengths")
    i_text = row_labels(columns["i"])
    num = {c: numeric_column(c, columns[c], i_text, source) for c in COLUMNS}
    cols: dict[str, np.ndarray] = {}
    fractional = any(bool(np.any(num[c] != np.round(num[c]))) for c in _STEPS)
    for c in COLUMNS:
        if c in _STEPS and fractional:
            cols[c] = num[c]
        elif c in _INTS:
            frac = num[c] != np.round(num[c])
            if frac.any():
                k = int(np.flatnonzero(frac)[0])
                raise _fail(source, f"row i={i_text[k]}: column {c} must hold integers; got {num[c][k]:g}")
            cols[c] = num[c].astype(np.int64)
        else:
            cols[c] = num[c]
    i, j, v, p = cols["i"], cols["j"], cols["v"], cols["p"]
    for mask, text in (
        (i < 0, "original value i is negative"),
        (j < 0, "perturbed value j is negative"),
        (np.abs(v - (j - i)) > 1e-9, "v differs from j - i"),
        (p < 0, "p is negative"),
    ):
        if mask.any():
            raise _fail(source, f"row i={int(i[np.flatnonzero(mask)[0]])}: {text}")
    order = np.lexsort((j, i))
    cols = {c: a[order] for c, a in cols.items()}
    i, j = cols["i"], cols["j"]
    dup = np.flatnonzero((i[1:] == i[:-1]) & (j[1:] == j[:-1]))
    if dup.size:
        k = int(dup[0]) + 1
        raise _fail(source, f"row i={int(i[k])}: perturbed value j={j[k]:g} appears twice")
    present = np.unique(i)
    gaps = np.setdiff1d(np.arange(int(present[-1]) + 1), present)
    # a magnitude p-table has rows for categories of i only (R ptable's icat: 0, 1, D in
    # tau-ARGUS's data/cellkey/Magnitude); a count p-table must cover every count
    if gaps.size and not fractional:
        raise _fail(source, f"row i={int(gaps[0])}: no rows for this original value "
                            f"(rows must cover i = 0..{int(present[-1])})")
    _check_row_blocks(cols, source)
    zero = i == 0
    stays = float(cols["p"][zero & (cols["j"] == 0)].sum())
    if abs(stays - 1.0) > FILE_TOL:
        moved = sorted({int(x) for x in cols["j"][zero & (cols["p"] > FILE_TOL) & (cols["j"] != 0)]})
        raise _fail(source, f"row i=0: a count of 0 must stay 0 (j=0 with p=1), but this p-table moves it to "
                            f"j={','.join(map(str, moved))}: a cell without records has no cell key, and tables "
                            "store only cells with records")
    return cols


def _reports(cols: Mapping[str, np.ndarray]) -> tuple[RowReport, ...]:
    i = cols["i"]
    out = []
    for value in np.unique(i).tolist():
        sel = i == value
        p = cols["p"][sel]
        v = cols["v"][sel].astype(float)
        mean = float(p @ v)
        stay = p[v == 0]
        out.append(RowReport(i=int(value), targets=int(sel.sum()), mean=mean,
                             variance=float(p @ (v - mean) ** 2), p_stay=float(stay[0]) if stay.size else 0.0))
    return tuple(out)


class PTable:
    """An immutable p-table: rows ``(i, j, p, v, p_int_lb, p_int_ub)`` for ``i = 0..i_max``.

    Build one with :func:`~tabsafe.protect.ptable.generate_ptable`, :meth:`from_file`,
    :meth:`from_rows`, :meth:`from_columns` or :meth:`from_frame`. Its arrays are read-only;
    :attr:`rows` and :attr:`report` return new pandas frames, so a p-table never changes.
    """

    __slots__ = ("_cols", "_i_max", "_kind", "_lookup", "_params", "_reports")

    _cols: dict[str, np.ndarray]
    _params: PTableParams | None
    _reports: tuple[RowReport, ...]
    _i_max: int
    _lookup: dict[int, tuple[np.ndarray, np.ndarray]]
    _kind: str | None

    def __init__(self) -> None:
        raise TypeError("build a PTable with generate_ptable(), PTable.from_file(), PTable.from_rows(), "
                        "PTable.from_columns() or PTable.from_frame()")

    @classmethod
    def _create(cls, cols: Mapping[str, np.ndarray], *, params: PTableParams | None,
                reports: Sequence[RowReport] | None = None, kind: str | None = None) -> PTable:
        """Wrap columns already checked and sorted by (i, j); ``j``/``v`` stay float64 when
        they came so (fractional steps)."""
        obj = object.__new__(cls)

        steps = any(np.any(np.asarray(cols[c], dtype=float) % 1 != 0) for c in _STEPS)

        def dtype(c: str) -> type:
            if c in _STEPS and steps:
                return float
            return np.int64 if c in _INTS else float

        frozen = {c: _readonly(np.asarray(cols[c], dtype=dtype(c))) for c in COLUMNS}
        i = frozen["i"]
        starts = np.flatnonzero(np.r_[True, i[1:] != i[:-1]])
        ends = np.r_[starts[1:], i.size]
        lookup = {int(i[s]): (frozen["p_int_ub"][s:e], frozen["v"][s:e])
                  for s, e in zip(starts.tolist(), ends.tolist())}
        object.__setattr__(obj, "_cols", frozen)
        object.__setattr__(obj, "_params", params)
        object.__setattr__(obj, "_reports", tuple(reports) if reports is not None else _reports(frozen))
        object.__setattr__(obj, "_i_max", int(i[-1]))
        object.__setattr__(obj, "_lookup", lookup)
        object.__setattr__(obj, "_kind", kind)
        return obj

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("PTable is immutable")

    def __repr__(self) -> str:
        return f"PTable(i_max={self._i_max}, rows={self.n_rows}, params={self._params!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PTable):
            return NotImplemented
        if self.n_rows != other.n_rows or (self._kind or "all") != (other._kind or "all"):
            return False
        return all(np.allclose(self._cols[c], other._cols[c], rtol=0, atol=1e-12) for c in COLUMNS)

    def __hash__(self) -> int:
        return hash((self._i_max, self.n_rows))

    # -- accessors ---------------------------------------------------------------------------

    @property
    def params(self) -> PTableParams | None:
        """The parameters it was generated with; None when read from a file or rows."""
        return self._params

    @property
    def kind(self) -> str | None:
        """The ``type`` the table came with (``all``, ``even`` or ``odd``), None without one.
        R ptable's ``even``/``odd`` tables hold the rows for even / odd counts only."""
        return self._kind

    @property
    def integral(self) -> bool:
        """Whether ``j`` and ``v`` are integers (a count p-table); False for fractional steps."""
        return self._cols["v"].dtype.kind == "i"

    @property
    def i_max(self) -> int:
        """Largest original value with rows of its own; larger counts use its rows."""
        return self._i_max

    @property
    def n_rows(self) -> int:
        return int(self._cols["i"].size)

    def column(self, name: str) -> np.ndarray:
        """A read-only column (``i, j, p, v, p_int_lb, p_int_ub``), rows sorted by (i, j)."""
        if name not in self._cols:
            raise InputError(f"a p-table has the columns {', '.join(COLUMNS)}; got {name!r}")
        return self._cols[name]

    @property
    def row_reports(self) -> tuple[RowReport, ...]:
        """Per original value: targets, mean, variance reached, p(stay), final pstay bound, solves."""
        return self._reports

    def rows_below(self, variance: float | None = None) -> tuple[RowReport, ...]:
        """Rows whose variance stays below ``variance`` (default: the ``V`` it was generated with)."""
        if variance is None:
            if self._params is None:
                return ()
            variance = self._params.variance
        return tuple(r for r in self._reports if r.below(variance))

    def shortfall(self, flag: Callable[[str], str] = str) -> str | None:
        """One sentence naming the rows that stay below the ``V`` they were generated for, with
        the variance each reached, or None; ``flag`` renders a parameter's name (``--max-noise``
        on the command line)."""
        below = self.rows_below()
        if not below or self._params is None:
            return None
        shown = ", ".join(f"{'i>=' if r.i == self._i_max else 'i='}{r.i}: {r.variance:.4g}" for r in below)
        rows = "row" if len(below) == 1 else f"{len(below)} rows"
        return (f"{rows} of the p-table stay below {flag('variance')} {self._params.variance:g} ({shown}): "
                f"V is an upper bound, and at maximum entropy these rows' targets spread no further "
                f"(a larger {flag('max_noise')} lets them)")

    def intervals(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Read-only ``(p_int_ub, v)`` arrays of original value ``min(i, i_max)``, by ``j``.

        Raises:
            InputError: ``i`` falls between the categories of a magnitude p-table (see
                :attr:`covers`).
        """
        at = min(int(i), self._i_max)
        if at not in self._lookup:
            raise InputError(f"the p-table has rows for i = {', '.join(map(str, self._lookup))} only; "
                             f"none for i={at}")
        return self._lookup[at]

    @property
    def covers(self) -> bool:
        """Whether every original value ``0..i_max`` has rows (False for a magnitude p-table
        with rows for categories of ``i`` only)."""
        return len(self._lookup) == self._i_max + 1

    @property
    def rows(self) -> pd.DataFrame:
        """The rows as a new pandas frame, columns exactly ``i, j, p, v, p_int_lb, p_int_ub``."""
        import pandas as pd

        return pd.DataFrame({c: np.array(self._cols[c]) for c in COLUMNS})

    @property
    def report(self) -> pd.DataFrame:
        """:attr:`row_reports` as a new pandas frame (one row per original value)."""
        import pandas as pd

        return pd.DataFrame(
            {c: [getattr(r, c) for r in self._reports] for c in REPORT_COLUMNS}
        ).astype({"i": np.int64, "targets": np.int64, "iterations": np.int64})

    # -- constructors ------------------------------------------------------------------------

    @classmethod
    def from_columns(cls, columns: Mapping[str, Any], *, source: str = "p-table") -> PTable:
        """From columns ``i, j, p, v, p_int_lb, p_int_ub`` (sequences or arrays, numbers or texts).

        Raises:
            InputError: see :func:`validate_columns`.
        """
        if not isinstance(columns, Mapping):
            raise _fail(source, f"p-table columns must be a mapping of names to values; got {type(columns).__name__}")
        return cls._create(validate_columns(columns, source), params=None, kind=_kind_of(columns, source))

    @classmethod
    def from_frame(cls, frame: Any, *, source: str = "p-table") -> PTable:
        """From a pandas (or any column-indexable) frame with the six columns."""
        cols = getattr(frame, "columns", None)
        if cols is None or not hasattr(frame, "__getitem__"):
            raise _fail(source, f"expected a data frame; got {type(frame).__name__}")
        return cls.from_columns({str(c): np.asarray(frame[c]) for c in cols}, source=source)

    @classmethod
    def from_rows(cls, rows: Any, *, source: str = "p-table") -> PTable:
        """From a list of row mappings (``i, j, p, v, p_int_lb, p_int_ub``), as :meth:`to_rows` gives."""
        if not isinstance(rows, list) or not all(isinstance(r, Mapping) for r in rows):
            raise _fail(source, "p-table rows must be a list of mappings")
        missing = sorted({c for r in rows for c in COLUMNS if c not in r}, key=COLUMNS.index)
        if missing:
            raise _fail(source, f"missing column(s) {', '.join(missing)}; a p-table needs {', '.join(COLUMNS)}")
        return cls.from_columns({c: np.array([r[c] for r in rows], dtype=object) for c in COLUMNS}, source=source)

    def to_rows(self) -> list[dict[str, Any]]:
        """The rows as plain mappings (JSON)."""
        lists = {c: self._cols[c].tolist() for c in COLUMNS}
        return [{c: lists[c][k] for c in COLUMNS} for k in range(self.n_rows)]

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> PTable:
        """Read a p-table in either layout — tabsafe's CSV or tau-ARGUS' — told apart by the header."""
        return read_ptable(path)

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str]) -> PTable:
        """Read a p-table in the tabsafe CSV layout (``i,j,p,v,p_int_lb,p_int_ub``)."""
        return read_ptable(path, layout="csv")

    @classmethod
    def from_tau_argus(cls, path: str | os.PathLike[str]) -> PTable:
        """Read a p-table in the tau-ARGUS text layout (``i;j;p;v;p_int_ub``)."""
        return read_ptable(path, layout="tau-argus")

    # -- output ------------------------------------------------------------------------------

    def to_text(self, layout: str = "csv") -> str:
        """The file content in ``layout`` ``"csv"`` (tabsafe) or ``"tau-argus"``."""
        return ptable_text(self, layout)

    def to_csv(self, path: str | os.PathLike[str]) -> Path:
        """Write the tabsafe CSV layout atomically (a ``.csv`` or ``.txt`` file); returns the path."""
        return write_ptable(self, path, layout="csv")

    def to_tau_argus(self, path: str | os.PathLike[str]) -> Path:
        """Write the tau-ARGUS layout atomically (a ``.txt`` or ``.csv`` file); returns the path."""
        return write_ptable(self, path, layout="tau-argus")


def _kind_of(columns: Mapping[str, Any], source: str) -> str | None:
    """The one ``type`` of an optional ``type`` column (``all``, ``even``, ``odd``), or None."""
    if "type" not in columns:
        return None
    kinds = sorted({str(x).strip() for x in np.asarray(columns["type"]).tolist()})
    if len(kinds) != 1 or kinds[0] not in KINDS:
        raise _fail(source, f"column type must hold one of {', '.join(KINDS)} for every row; got {kinds}")
    return kinds[0]


def read_ptable(path: str | os.PathLike[str], *, layout: str | None = None) -> PTable:
    """Read a p-table file (:func:`tabsafe.protect.ptable.files.read_columns`); ``layout`` None
    tells the layouts apart by the header.

    Raises:
        InputError: the file is missing, unreadable or malformed, or its rows are not a p-table
            (naming the file and the row).
    """
    columns, source = read_columns(path, layout=layout)
    return PTable.from_columns(columns, source=source)
