"""The cell key method on plain numpy arrays: record keys, cell keys, noise look-up.

The method (seed 000 §5.4; METHODS.md §2): every record carries a key ``rk ~ U[0, 1)`` with a
fixed number of decimal digits; a cell's key is ``ck = frac(sum rk)`` over its records, summed
exactly as integers; a cell with count ``n`` takes its noise ``v`` from the p-table rows of
``min(n, i_max)`` whose interval holds the key, ``p_int_lb < ck <= p_int_ub``. The ABS integer
form (seed 004 §3.3) uses integer keys modulo ``m`` and a look-up table indexed by (capped)
count and key. Magnitudes get noise from the cell key as in R *cellKey*'s "flex function"
design; means are published as ``m_hat / n_hat`` (seed 000 §5.7).

These functions know nothing of tables: callers pass one array entry per cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

import tabsafe.errors
from tabsafe.protect.ptable import PTable

__all__ = [
    "MagnitudeParams",
    "abs_cell_keys",
    "abs_lookup",
    "abs_lookup_table",
    "cell_keys",
    "flex_multiplier",
    "generate_record_keys",
    "lookup_noise",
    "perturb_counts",
    "perturb_magnitudes",
    "perturbed_mean",
]

MAX_DIGITS = 15
"""Record keys keep at most 15 digits so that ``k / 10**digits`` is exact in a float64."""


def _bad(where: str, what: str) -> tabsafe.errors.InputError:
    return tabsafe.errors.InputError(what, where=where)


def _as_counts(counts: np.ndarray, where: str) -> np.ndarray:
    arr = np.asarray(counts)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise _bad(where, "counts must be whole numbers")
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "iu":
        raise _bad(where, f"counts must be integers; got dtype {arr.dtype}")
    if arr.size and arr.min() < 0:
        raise _bad(where, f"counts must be >= 0; got {int(arr.min())}")
    return arr.astype(np.int64, copy=False)


def _as_keys(cell_keys: np.ndarray, shape: tuple[int, ...], where: str) -> np.ndarray:
    ck = np.asarray(cell_keys, dtype=float)
    if ck.shape != shape:
        raise _bad(where, f"cell_keys has shape {ck.shape} but counts has shape {shape}")
    if ck.size and (not np.all(np.isfinite(ck)) or ck.min() < 0 or ck.max() > 1):
        raise _bad(where, "cell keys must lie in [0, 1]")
    return ck


# --------------------------------------------------------------------------------------------
# record keys and cell keys


def generate_record_keys(n: int, seed: int, digits: int = 10) -> np.ndarray:
    """Record keys ``rk ~ U[0, 1)`` with exactly ``digits`` decimals (seed 000 §5.4).

    Each key is ``k / 10**digits`` with an integer ``k`` drawn uniformly from
    ``0 .. 10**digits - 1`` by a PCG64 generator seeded with ``seed``, so the same seed always
    gives the same keys.

    >>> generate_record_keys(3, seed=1, digits=2).tolist() == generate_record_keys(3, 1, 2).tolist()
    True
    """
    for name, value, low in (("n", n, 0), ("seed", seed, 0), ("digits", digits, 1)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            raise _bad("generate_record_keys", f"{name} must be an integer >= {low}; got {value!r}")
    if digits > MAX_DIGITS:
        raise _bad("generate_record_keys", f"digits must be <= {MAX_DIGITS}; got {digits}")
    scale = 10 ** int(digits)
    rng = np.random.Generator(np.random.PCG64(int(seed)))
    k = rng.integers(0, scale, size=int(n), dtype=np.int64)
    return k / scale


def _group_sum_mod(values: np.ndarray, cell_index: np.ndarray, n_cells: int, modulus: int) -> np.ndarray:
    """``(sum values per cell) mod modulus`` in exact int64 arithmetic."""
    out = np.zeros(n_cells, dtype=np.int64)
    if values.size:
        # reducing each term first keeps every partial sum below modulus * n, far from overflow
        np.add.at(out, cell_index, values % modulus)
    return out % modulus


def _check_index(cell_index: np.ndarray, size: int, n_cells: int, where: str) -> np.ndarray:
    idx = np.asarray(cell_index)
    if idx.dtype.kind not in "iu":
        raise _bad(where, f"cell_index must be integers; got dtype {idx.dtype}")
    if idx.shape != (size,):
        raise _bad(where, f"cell_index has shape {idx.shape}; expected ({size},)")
    if not isinstance(n_cells, (int, np.integer)) or n_cells < 0:
        raise _bad(where, f"n_cells must be an integer >= 0; got {n_cells!r}")
    if idx.size and (idx.min() < 0 or idx.max() >= n_cells):
        raise _bad(where, f"cell_index must lie in 0..{n_cells - 1}")
    return idx.astype(np.int64, copy=False)


def cell_keys(
    record_keys: np.ndarray, cell_index: np.ndarray, n_cells: int, digits: int = 10
) -> np.ndarray:
    """Cell keys ``ck = frac(sum rk)`` per cell, summed exactly as ``digits``-digit integers.

    Source: seed 000 §5.4 (Table 5.17: 0.9 + 0.3 + 0.6 gives 0.8); METHODS.md §2 asks for the
    exact fixed-point sum. A cell without records gets key 0.

    Args:
        record_keys: one key per record, each a multiple of ``10**-digits`` in ``[0, 1)``.
        cell_index: the cell (``0 .. n_cells-1``) each record falls in.
        n_cells: number of cells.
        digits: decimals of the record keys.

    >>> cell_keys(np.array([0.9, 0.3, 0.6]), np.array([0, 0, 0]), 1, digits=1).tolist()
    [0.8]
    """
    where = "cell_keys"
    rk = np.asarray(record_keys, dtype=float)
    if rk.ndim != 1:
        raise _bad(where, "record_keys must be one-dimensional")
    if not isinstance(digits, (int, np.integer)) or not 1 <= digits <= MAX_DIGITS:
        raise _bad(where, f"digits must be an integer in 1..{MAX_DIGITS}; got {digits!r}")
    if rk.size and (not np.all(np.isfinite(rk)) or rk.min() < 0 or rk.max() >= 1):
        raise _bad(where, "record keys must lie in [0, 1)")
    scale = 10 ** int(digits)
    k = np.rint(rk * scale)
    if rk.size and np.max(np.abs(k / scale - rk)) > 0.5 / scale * 1e-3:
        raise _bad(where, f"record keys have more than {digits} decimal digits")
    idx = _check_index(cell_index, rk.size, n_cells, where)
    return _group_sum_mod(k.astype(np.int64), idx, int(n_cells), scale) / scale


def abs_cell_keys(
    record_keys: np.ndarray, cell_index: np.ndarray, n_cells: int, modulus: int = 256
) -> np.ndarray:
    """ABS integer cell keys ``ckey = (sum rkey) mod m`` per cell (seed 004 §3.3).

    >>> abs_cell_keys(np.array([200, 100, 7]), np.array([0, 0, 1]), 2).tolist()
    [44, 7]
    """
    where = "abs_cell_keys"
    rk = np.asarray(record_keys)
    if rk.ndim != 1 or (rk.size and rk.dtype.kind not in "iu"):
        raise _bad(where, "record_keys must be a one-dimensional integer array")
    if not isinstance(modulus, (int, np.integer)) or modulus < 2:
        raise _bad(where, f"modulus must be an integer >= 2; got {modulus!r}")
    if rk.size and (rk.min() < 0 or rk.max() >= modulus):
        raise _bad(where, f"record keys must lie in 0..{modulus - 1}")
    idx = _check_index(cell_index, rk.size, n_cells, where)
    return _group_sum_mod(rk.astype(np.int64), idx, int(n_cells), int(modulus))


# --------------------------------------------------------------------------------------------
# counts


def _count_table(ptable: object, where: str) -> PTable:
    """A p-table a count may be perturbed with: integer noise (no fractional steps, which only
    magnitudes take) for every count (type ``all``, not R ptable's even- or odd-only tables)."""
    if not isinstance(ptable, PTable):
        raise _bad(where, f"ptable must be a PTable; got {type(ptable).__name__}")
    if not ptable.integral:
        raise _bad(where, "the p-table has fractional j/v (a magnitude p-table): counts need integer noise")
    if ptable.kind not in (None, "all"):
        raise _bad(where, f"the p-table is of type {ptable.kind!r}: counts need one of type 'all'")
    return ptable


def lookup_noise(counts: np.ndarray, cell_keys: np.ndarray, ptable: PTable) -> np.ndarray:
    """Noise ``v`` per cell from a p-table (seed 000 §5.4, Tables 5.16/5.17).

    A cell with count ``n`` uses the rows of ``min(n, i_max)`` and takes ``v`` from the row with
    ``p_int_lb < ck <= p_int_ub``. A key of exactly 0 takes the first row of positive
    probability (``p_int_lb <= 0 < p_int_ub``), the limit of the rule as ``ck`` falls to 0; so
    no key ever lands on a zero-probability target and blocked values stay impossible.

    Args:
        counts: original counts (integers ``>= 0``), any shape.
        cell_keys: cell keys in ``[0, 1]``, same shape.
        ptable: the p-table.

    Returns:
        int64 noise, same shape as ``counts``.

    >>> pt = PTable.from_columns({"i": [0, 1, 1], "j": [0, 0, 2], "p": [1, .5, .5], "v": [0, -1, 1],
    ...                           "p_int_lb": [0, 0, .5], "p_int_ub": [1, .5, 1]})
    >>> lookup_noise(np.array([1, 1, 5]), np.array([0.5, 0.51, 0.2]), pt).tolist()
    [-1, 1, -1]
    """
    ptable = _count_table(ptable, "lookup_noise")
    n = _as_counts(counts, "lookup_noise")
    ck = _as_keys(cell_keys, n.shape, "lookup_noise")
    rows = np.minimum(n, ptable.i_max).ravel()
    keys = ck.ravel()
    out = np.zeros(rows.shape, dtype=np.int64)
    # one searchsorted per original value: sorting the cells by row is not needed
    for i in np.unique(rows):
        ub, v = ptable.intervals(int(i))
        sel = rows == i
        k = keys[sel]
        pos = np.searchsorted(ub, k, side="left")
        zero = k == 0
        if zero.any():
            pos[zero] = np.searchsorted(ub, 0.0, side="right")
        out[sel] = v[np.minimum(pos, v.size - 1)]
    return out.reshape(n.shape)


def perturb_counts(counts: np.ndarray, cell_keys: np.ndarray, ptable: PTable) -> np.ndarray:
    """Perturbed counts ``n_hat = n + v`` with ``v`` from :func:`lookup_noise`.

    A p-table made by :func:`~tabsafe.protect.ptable.generate_ptable` never yields a negative
    count nor one in ``1..js``: those targets have no row.
    """
    n = _as_counts(counts, "perturb_counts")
    return n + lookup_noise(n, cell_keys, ptable)


# --------------------------------------------------------------------------------------------
# ABS integer form


def abs_lookup_table(ptable: PTable, modulus: int = 256, cap: int | None = None) -> np.ndarray:
    """ABS look-up table (seed 004 §3.3) of shape ``(cap + 1, modulus)`` from a p-table.

    Integer key ``c`` stands for the uniform key ``(c + 1) / modulus``, so row ``i`` holds
    ``v`` exactly ``floor(m * p_int_ub) - floor(m * p_int_lb)`` times: each probability
    rounded to a multiple of ``1/m`` with the cumulative sums kept (the ONS package uses
    ``m = 256``). Rows above ``i_max`` repeat the last one; ``cap`` defaults to ``i_max``.
    """
    where = "abs_lookup_table"
    ptable = _count_table(ptable, where)
    if not isinstance(modulus, (int, np.integer)) or modulus < 2:
        raise _bad(where, f"modulus must be an integer >= 2; got {modulus!r}")
    if cap is None:
        cap = ptable.i_max
    if not isinstance(cap, (int, np.integer)) or cap < 0:
        raise _bad(where, f"cap must be None or an integer >= 0; got {cap!r}")
    keys = (np.arange(int(modulus)) + 1) / int(modulus)
    table = np.empty((int(cap) + 1, int(modulus)), dtype=np.int64)
    for i in range(int(cap) + 1):
        ub, v = ptable.intervals(i)
        table[i] = v[np.minimum(np.searchsorted(ub, keys, side="left"), v.size - 1)]
    return table


def abs_lookup(counts: np.ndarray, ckey_int: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Noise from an ABS look-up table: ``table[min(n, cap), ckey]`` (seed 004 §3.3).

    >>> abs_lookup(np.array([0, 7]), np.array([3, 1]), np.array([[0, 0, 0, 0], [1, -1, 2, 0]])).tolist()
    [0, -1]
    """
    where = "abs_lookup"
    tab = np.asarray(table)
    if tab.ndim != 2 or tab.dtype.kind not in "iu" or tab.shape[0] < 1 or tab.shape[1] < 1:
        raise _bad(where, "table must be a two-dimensional integer array (cap + 1, modulus)")
    n = _as_counts(counts, where)
    c = np.asarray(ckey_int)
    if c.shape != n.shape:
        raise _bad(where, f"ckey_int has shape {c.shape} but counts has shape {n.shape}")
    if c.size and (c.dtype.kind not in "iu" or c.min() < 0 or c.max() >= tab.shape[1]):
        raise _bad(where, f"cell keys must be integers in 0..{tab.shape[1] - 1}")
    return tab[np.minimum(n, tab.shape[0] - 1), c.astype(np.int64)]


# --------------------------------------------------------------------------------------------
# magnitudes: the cellKey "flex function" design


@dataclass(frozen=True, kw_only=True)
class MagnitudeParams:
    """Parameters of magnitude noise from the cell key, as R *cellKey*'s flex design.

    Source: R cellKey ``ck_params_nums`` with ``ck_flexparams`` (Deliverable D4.2, SGA "Open
    Source tools for perturbative confidentiality methods"). For the ``k``-th largest
    contribution ``x`` (or the cell value itself) the noise scale is

    * ``x_delta = 1`` and look-up in ``small_cells_ptable`` if ``|x| < z_s`` (separation),
    * ``x_delta = x * p_small`` if ``|x| < fp``,
    * ``x_delta = x * m(|x|) * epsilon[k]`` otherwise, with the flex function
      ``m(x) = p_large * (1 + (p_small x - p_large fp) / (p_large fp) * (2 fp / (fp + x))^q)``,
      which equals ``p_small`` at ``x = fp`` and falls towards ``p_large`` for large ``x``,

    and the noise added is ``sign(cell) * |x_delta| * sign(v) * (mu + |v|)`` with ``v`` looked
    up in ``ptable`` at ``a = |cell / x_delta|`` (capped at ``i_max``, linearly interpolated
    between the rows of ``floor(a)`` and ``ceil(a)``; within a row the first target with
    ``key < p_int_ub``, as cellKey looks up magnitudes). A scale larger than the running cell
    value is cut to that value. Negative noise never flips the sign of the cell.
    ``mu = mu_c`` for sensitive cells, else 0; ``cell`` is the running value after the
    noise of the larger contributions.

    Attributes:
        ptable: noise distribution for magnitudes (R ``create_num_ptable`` with ``step = 1`` is
            a count p-table with ``js = 0``; with ``step = 2`` its ``j``/``v`` go in half steps,
            as tau-ARGUS's ``data/cellkey/Magnitude`` tables, and a fractional ``v`` just
            scales ``x_delta``). Of type ``all`` (or none): even/odd tables are refused.
        fp: flex point, ``> 0``.
        p_small: relative noise for contributions below ``fp``, in ``(0, 1]``.
        p_large: relative noise approached by large contributions, ``0 <= p_large <= p_small``.
        q: flex exponent, ``>= 1``.
        epsilon: weights of the ``top_k`` largest contributions; ``epsilon[0] == 1``,
            non-increasing, each in ``[0, 1]``. Its length is ``top_k``.
        mu_c: extra noise amount for sensitive cells, ``>= 0``.
        same_key: the largest contribution uses the cell key itself (True) or a scrambled one.
        small_cells_ptable: optional p-table for very small values; its last row's variance
            ``m1^2`` sets the separation point ``z_s = m1 / (sqrt(sum epsilon^2) * p_small)``.
        key_digits: decimals of the cell keys, used to scramble keys for contributions 2..k.
    """

    ptable: PTable
    fp: float
    p_small: float = 0.25
    p_large: float = 0.05
    q: float = 3.0
    epsilon: tuple[float, ...] = (1.0,)
    mu_c: float = 0.0
    same_key: bool = True
    small_cells_ptable: PTable | None = None
    key_digits: int = 10
    _zs: float = field(default=0.0, init=False, repr=False)

    def __post_init__(self) -> None:
        def fail(name: str, allowed: str, value: object) -> tabsafe.errors.InputError:
            return tabsafe.errors.InputError(
                f"parameter '{name}' must be {allowed}; got {value!r}", where="MagnitudeParams"
            )

        def real(x: object) -> bool:
            return (
                isinstance(x, (int, float, np.integer, np.floating))
                and not isinstance(x, bool)
                and math.isfinite(float(x))
            )

        if not isinstance(self.ptable, PTable):
            raise fail("ptable", "a PTable", type(self.ptable).__name__)
        for name in ("ptable", "small_cells_ptable"):
            table = getattr(self, name)
            if isinstance(table, PTable) and table.kind not in (None, "all"):
                # R ptable's even/odd tables hold half the counts each; the flex design here
                # looks every row up in one table
                raise fail(name, "a p-table of type 'all'", f"type {table.kind!r}")
            if isinstance(table, PTable) and not table.covers:
                # rows for categories of i only (R ptable's icat): looking a value up between
                # two categories is cellKey's own interpolation, not the row-by-row one here
                raise fail(name, "a p-table with rows for every i = 0..i_max",
                           f"rows for i = {', '.join(str(int(x)) for x in np.unique(table.column('i')))}")
        if not real(self.fp) or self.fp <= 0:
            raise fail("fp", "a finite number > 0", self.fp)
        if not real(self.p_small) or not 0 < self.p_small <= 1:
            raise fail("p_small", "a number in (0, 1]", self.p_small)
        if not real(self.p_large) or not 0 <= self.p_large <= self.p_small:
            raise fail("p_large", f"a number in [0, p_small={self.p_small}]", self.p_large)
        if not real(self.q) or self.q < 1:
            raise fail("q", "a number >= 1", self.q)
        eps = tuple(float(e) for e in np.atleast_1d(np.asarray(self.epsilon, dtype=float)))
        if (
            not 1 <= len(eps) <= 6
            or eps[0] != 1.0
            or any(not 0 <= e <= 1 for e in eps)
            or any(b > a for a, b in zip(eps, eps[1:]))
        ):
            raise fail(
                "epsilon", "1 to 6 non-increasing numbers in [0, 1] starting with 1", self.epsilon
            )
        if not real(self.mu_c) or self.mu_c < 0:
            raise fail("mu_c", "a number >= 0", self.mu_c)
        if not isinstance(self.same_key, (bool, np.bool_)):
            raise fail("same_key", "True or False", self.same_key)
        if self.small_cells_ptable is not None and not isinstance(self.small_cells_ptable, PTable):
            raise fail("small_cells_ptable", "None or a PTable", type(self.small_cells_ptable).__name__)
        if not isinstance(self.key_digits, (int, np.integer)) or not 1 <= self.key_digits <= MAX_DIGITS:
            raise fail("key_digits", f"an integer in 1..{MAX_DIGITS}", self.key_digits)
        object.__setattr__(self, "epsilon", eps)
        zs = 0.0
        if self.small_cells_ptable is not None:
            small = self.small_cells_ptable
            last = small.column("i") == small.i_max
            m1sq = float(np.sum(small.column("v")[last].astype(float) ** 2 * small.column("p")[last]))
            zs = math.sqrt(m1sq) / (math.sqrt(sum(e * e for e in eps)) * self.p_small)
        object.__setattr__(self, "_zs", zs)

    @property
    def top_k(self) -> int:
        """How many of the largest contributions get noise of their own."""
        return len(self.epsilon)

    @property
    def separation_point(self) -> float:
        """``z_s``: values with ``|x| < z_s`` are perturbed like counts (0 without a table)."""
        return self._zs


def flex_multiplier(x: np.ndarray, params: MagnitudeParams) -> np.ndarray:
    """The relative noise scale ``m(x)`` of the flex function (R cellKey ``.para_m``):
    ``p_small`` below ``fp``, ``p_large (1 + f1 f2^q)`` from ``fp`` on (see MagnitudeParams)."""
    ax = np.abs(np.asarray(x, dtype=float))
    fp, ps, pl, q = float(params.fp), float(params.p_small), float(params.p_large), float(params.q)
    f1 = (ps * ax - pl * fp) / (pl * fp) if pl > 0 else np.zeros_like(ax)
    f2 = (2.0 * fp / (fp + ax)) ** q
    flex = pl * (1.0 + f1 * f2) if pl > 0 else ps * ax / fp * f2
    return np.where(ax < fp, ps, flex)


def _scrambled_keys(ck: np.ndarray, top_k: int, same_key: bool, digits: int) -> np.ndarray:
    """Keys for contributions 1..k (R cellKey ``.scramble_ckeys``): the decimal digits of the
    key, without trailing zeros, rotated left by one place per contribution.

    Returns shape ``(cells, top_k)``; column 0 is the key itself when ``same_key``.
    """
    out = np.empty((ck.size, top_k))
    if same_key and top_k == 1:
        out[:, 0] = ck
        return out
    s = np.rint(ck * 10.0**digits).astype(np.int64)
    length = np.full(ck.size, digits, dtype=np.int64)
    for _ in range(digits - 1):
        # drop trailing zeros, as R's as.character() does
        trailing = (s % 10 == 0) & (length > 1) & (s > 0)
        s = np.where(trailing, s // 10, s)
        length = np.where(trailing, length - 1, length)

    def rotate(s: np.ndarray, length: np.ndarray) -> np.ndarray:
        high = 10 ** (length - 1)
        return (s % high) * 10 + s // high

    if not same_key:
        # a one-digit key "d" becomes "0d" first (R: an empty rest reads as "0")
        single = length == 1
        s = np.where(single, s, rotate(s, length))
        length = np.where(single, 2, length)
    out[:, 0] = s / 10.0**length
    for j in range(1, top_k):
        s = rotate(s, length)
        out[:, j] = s / 10.0**length
    out[ck == 0] = 0.0
    return out


def _row_noise(ptable: PTable, rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``v`` of the first target with ``key < p_int_ub`` in each row (R cellKey
    ``.lookup_v_flex``: the magnitude look-up takes the lower bound as closed)."""
    out = np.zeros(rows.size)
    for i in np.unique(rows):
        ub, v = ptable.intervals(int(i))
        sel = rows == i
        out[sel] = v[np.minimum(np.searchsorted(ub, keys[sel], side="right"), v.size - 1)]
    return out


def _interp_noise(ptable: PTable, a: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Noise at (possibly fractional) rows ``a``, capped at ``i_max``: linear interpolation
    between the rows ``floor(a)`` and ``floor(a) + 1`` looked up with the same key."""
    a = np.minimum(a, float(ptable.i_max))
    lo = np.floor(a).astype(np.int64)
    lam = a - lo
    v_lo = _row_noise(ptable, lo, keys)
    frac = lam > 0
    v = v_lo.copy()
    if frac.any():
        v_hi = _row_noise(ptable, lo[frac] + 1, keys[frac])
        v[frac] = (1.0 - lam[frac]) * v_lo[frac] + lam[frac] * v_hi
    return v


def _magnitude_inputs(values: np.ndarray, cell_keys: np.ndarray, params: MagnitudeParams,
                      contributions: np.ndarray | None,
                      sensitive: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The inputs of :func:`perturb_magnitudes` checked and as arrays: the values, the cell keys,
    the ``(cells, top_k)`` contributions (the value itself when none are given and ``top_k`` is
    1) and the sensitive mask (none by default); one error line naming what is wrong."""
    where = "perturb_magnitudes"
    if not isinstance(params, MagnitudeParams):
        raise _bad(where, f"params must be a MagnitudeParams; got {type(params).__name__}")
    x0 = np.asarray(values, dtype=float)
    if x0.ndim != 1 or not np.all(np.isfinite(x0)):
        raise _bad(where, "values must be a one-dimensional array of finite numbers")
    ck = np.asarray(cell_keys, dtype=float)
    if ck.shape != x0.shape:
        raise _bad(where, f"cell_keys has shape {ck.shape} but values has shape {x0.shape}")
    if ck.size and (not np.all(np.isfinite(ck)) or ck.min() < 0 or ck.max() >= 1):
        raise _bad(where, "cell keys must lie in [0, 1)")
    k = params.top_k
    if contributions is None:
        if k != 1:
            raise _bad(where, f"contributions are needed when top_k = {k} > 1")
        contrib = x0[:, None]
    else:
        contrib = np.asarray(contributions, dtype=float)
        if contrib.ndim == 1:
            contrib = contrib[:, None]
        if contrib.shape != (x0.size, k) or not np.all(np.isfinite(contrib)):
            raise _bad(where, f"contributions must be finite with shape ({x0.size}, {k})")
    if sensitive is None:
        sens = np.zeros(x0.size, dtype=bool)
    else:
        sens = np.asarray(sensitive, dtype=bool)
        if sens.shape != x0.shape:
            raise _bad(where, f"sensitive has shape {sens.shape} but values has shape {x0.shape}")
    return x0, ck, contrib, sens


def perturb_magnitudes(
    values: np.ndarray,
    cell_keys: np.ndarray,
    params: MagnitudeParams,
    *,
    contributions: np.ndarray | None = None,
    sensitive: np.ndarray | None = None,
) -> np.ndarray:
    """Perturbed magnitudes by the flex design of R cellKey (``.perturb_cell_flex``).

    For each cell the ``top_k`` largest contributions are treated in turn (see
    :class:`MagnitudeParams` for the formula); each adds ``x_hat_k`` to the running value and
    the result is ``value + sum_k x_hat_k``. A cell with key 0 (no contributors) or value 0 is
    left unchanged. Contribution ``k`` uses the cell key scrambled ``k - 1`` times.

    Args:
        values: the cell values (sums), one per cell.
        cell_keys: the cell keys in ``[0, 1)``.
        params: magnitude noise parameters.
        contributions: the ``top_k`` largest contributions per cell, shape ``(cells, top_k)``,
            missing ones as 0; by default the cell value itself (cellKey ``type = "sum"``).
        sensitive: cells that get the extra amount ``mu_c``; by default none.

    Returns:
        float64 perturbed values.
    """
    x0, ck, contrib, sens = _magnitude_inputs(values, cell_keys, params, contributions, sensitive)
    k = params.top_k
    keys = _scrambled_keys(ck, k, bool(params.same_key), int(params.key_digits))
    mult = flex_multiplier(contrib, params)
    ps = float(params.p_small)
    zs = params.separation_point
    mu = np.where(sens, float(params.mu_c), 0.0)
    active = (ck != 0) & (x0 != 0)
    xo = x0.copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(k):
            xj = contrib[:, j]
            eps_j = params.epsilon[j]
            small = np.abs(xj) < zs
            x_delta = np.where(small, 1.0, np.where(np.abs(xj) < params.fp, xj * ps, xj * mult[:, j] * eps_j))
            # the noise scale may not exceed the value that is left: rescale
            rescale = np.abs(xo) < np.abs(x_delta)
            x_delta = np.where(rescale, xo, x_delta)
            x_rescaled = xo / (ps * eps_j) if eps_j > 0 else np.full(xo.size, np.inf)
            small_after = rescale & (np.abs(x_rescaled) < zs)
            x_delta = np.where(small_after, 1.0, x_delta)
            small = small | small_after
            live = active & (x_delta != 0) & ~(small_after & (j > 0))
            a = np.abs(xo / x_delta)
            v = np.zeros(xo.size)
            big = live & ~small
            if big.any():
                v[big] = _interp_noise(params.ptable, a[big], keys[big, j])
            tiny = live & small
            if tiny.any():
                v[tiny] = _interp_noise(params.small_cells_ptable, a[tiny], keys[tiny, j])  # type: ignore[arg-type]
            sign_v = np.where(v >= 0, 1.0, -1.0)
            sign_xo = np.where(xo >= 0, 1.0, -1.0)
            x_hat = sign_xo * np.abs(x_delta) * sign_v * (mu + np.abs(v))
            # negative noise stops at zero: it never flips the sign of the cell
            x_hat = np.where(
                sign_v < 0, np.where(sign_xo < 0, np.minimum(x_hat, -xo), np.maximum(x_hat, -xo)), x_hat
            )
            xo = np.where(live, xo + x_hat, xo)
    return xo


def perturbed_mean(magnitude_pert: np.ndarray, count_pert: np.ndarray) -> np.ndarray:
    """Published mean ``m_hat / n_hat`` from the perturbed magnitude and count (seed 000 §5.7).

    Dividing by the perturbed count, never the original one, avoids the attack of Tables
    5.23/5.24. A perturbed count of 0 gives NaN.

    >>> perturbed_mean(np.array([90.0, 5.0]), np.array([9, 0])).tolist()
    [10.0, nan]
    """
    m = np.asarray(magnitude_pert, dtype=float)
    n = np.asarray(count_pert, dtype=float)
    if m.shape != n.shape:
        raise _bad("perturbed_mean", f"shapes differ: {m.shape} and {n.shape}")
    out = np.full(np.broadcast(m, n).shape, np.nan)
    np.divide(m, n, out=out, where=n != 0)
    return out
