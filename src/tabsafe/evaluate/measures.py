"""Information-loss measures: how far a protected table is from the original.

Seed 004 §5.2 gives the formulas of the distance metrics, the variance ratio and the change of
rank orderings (its Tables 6–10 are the results for two census tables); seed 000 §5.8 lists the
statistical tests (exact binomial test of a random rounding realisation, signed-rank test,
Pearson χ² and Cramér's V, Spearman's rank correlation, the ANOVA between-variance R²); seed 002
§4.2 defines the relative absolute distance over the non-zero original cells. METHODS.md §12.

Two layers:

* functions over arrays — ``original`` and ``published`` of shape (rows, cells), a row being a
  geography code and its cells the categories of the table (004 §5.2) — each returning the value
  per row with the mean and its standard error (:class:`RowMeasure`) or the test's figures;
* :class:`Comparison` — an original :class:`~tabsafe.model.table.Table` and a published one on
  the same grid as dense arrays, with the views the measures are taken on: the inner cells, the
  margins and subtotals (cells with at least one aggregate code), and each marginal table (004
  Table 8: some variables at their total).

Conventions (ours, stated in the report): a suppressed cell counts as 0 — the naive user of 000
§5.8; a negative published count counts as 0 in the χ² and ANOVA figures; the standard error of
a mean over rows is ``sqrt(s² / n_r)`` with ``s²`` the rows' variance (004 prints the variance
formula; the bracketed figures of its Tables 6–7 are of the size of the standard error).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tabsafe.errors import InputError

__all__ = [
    "Comparison",
    "RowMeasure",
    "anova_r2",
    "average_absolute_distance",
    "binomial_test",
    "chi_square",
    "decile_change",
    "hellinger_distance",
    "relative_absolute_distance",
    "signed_rank_test",
    "spearman",
    "variance_ratio",
]


# ------------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class RowMeasure:
    """A measure taken per row and averaged over the rows (004 §5.2).

    Attributes:
        per_row: the value of each row (NaN where the row has no value, e.g. no non-zero cell).
        mean: the average over the rows with a value.
        se: the standard error of that average, ``sqrt(s² / n_r)`` (NaN with fewer than 2 rows).
        rows: the number of rows with a value.
    """

    per_row: np.ndarray
    mean: float
    se: float
    rows: int

    @classmethod
    def of(cls, per_row: np.ndarray) -> RowMeasure:
        values = np.asarray(per_row, dtype=float)
        ok = values[~np.isnan(values)]
        n = int(ok.size)
        mean = float(ok.mean()) if n else math.nan
        se = float(math.sqrt(ok.var(ddof=1) / n)) if n >= 2 else math.nan
        frozen = values.copy()
        frozen.setflags(write=False)
        return cls(per_row=frozen, mean=mean, se=se, rows=n)

    def to_json(self) -> dict[str, Any]:
        return {"mean": _num(self.mean), "se": _num(self.se), "rows": self.rows}


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _pair(original: Any, published: Any, mask: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    o = np.atleast_2d(np.asarray(original, dtype=float))
    p = np.atleast_2d(np.asarray(published, dtype=float))
    if o.shape != p.shape:
        raise InputError(f"original and published have different shapes: {o.shape} and {p.shape}")
    m = np.ones(o.shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), o.shape)
    return o, p, m


# ------------------------------------------------------------------------------- distances


def hellinger_distance(original: Any, published: Any, mask: Any = None) -> RowMeasure:
    """Hellinger's distance per row, ``sqrt(Σ_c ½ (√pert(c) − √orig(c))²)``, averaged over the
    rows (004 §5.2).

    Args:
        original, published: arrays of shape (rows, cells) of counts (≥ 0).
        mask: the cells of each row to take (default every cell).

    >>> hellinger_distance([[4, 1]], [[1, 1]]).mean
    0.7071067811865476
    """
    o, p, m = _pair(original, published, mask)
    d = np.where(m, 0.5 * (np.sqrt(np.maximum(p, 0)) - np.sqrt(np.maximum(o, 0))) ** 2, 0.0)
    per_row = np.sqrt(d.sum(axis=1))
    per_row[~m.any(axis=1)] = np.nan
    return RowMeasure.of(per_row)


def relative_absolute_distance(original: Any, published: Any, mask: Any = None) -> RowMeasure:
    """Relative absolute distance per row, ``Σ_c |pert(c) − orig(c)| / orig(c)`` over the cells
    with ``orig(c) > 0`` (004 §5.2; 002 §4.2 "across the non-zero cells of the original table"),
    averaged over the rows with such a cell.

    >>> relative_absolute_distance([[2, 4, 0]], [[3, 2, 5]]).mean
    1.0
    """
    o, p, m = _pair(original, published, mask)
    use = m & (o > 0)
    per_row = np.where(use, np.abs(p - o) / np.where(use, o, 1.0), 0.0).sum(axis=1)
    per_row[~use.any(axis=1)] = np.nan
    return RowMeasure.of(per_row)


def average_absolute_distance(original: Any, published: Any, mask: Any = None) -> RowMeasure:
    """Average absolute distance per cell of each row, ``Σ_c |pert(c) − orig(c)| / n_k`` with
    ``n_k`` the row's number of cells, averaged over the rows (004 §5.2).

    >>> average_absolute_distance([[2, 4, 0], [1, 1, 1]], [[3, 2, 5], [1, 1, 1]]).mean
    1.3333333333333333
    """
    o, p, m = _pair(original, published, mask)
    n_k = m.sum(axis=1)
    total = np.where(m, np.abs(p - o), 0.0).sum(axis=1)
    per_row = np.where(n_k > 0, total / np.maximum(n_k, 1), np.nan)
    return RowMeasure.of(per_row)


def variance_ratio(original: Any, published: Any, mask: Any = None) -> RowMeasure:
    """The variance of each row's cell counts after protection over the variance before,
    ``V(pert_k) / V(orig_k)`` with ``V`` the sample variance (divisor ``n_k − 1``), averaged over
    the rows whose original variance is not 0 (004 §5.2, Table 9).

    >>> variance_ratio([[1, 3]], [[0, 4]]).mean
    4.0
    """
    o, p, m = _pair(original, published, mask)
    n_k = m.sum(axis=1)

    def var(x: np.ndarray) -> np.ndarray:
        mean = np.where(m, x, 0.0).sum(axis=1) / np.maximum(n_k, 1)
        return np.where(m, (x - mean[:, None]) ** 2, 0.0).sum(axis=1) / np.maximum(n_k - 1, 1)

    vo, vp = var(o), var(p)
    ok = (n_k >= 2) & (vo > 0)
    per_row = np.where(ok, vp / np.where(ok, vo, 1.0), np.nan)
    return RowMeasure.of(per_row)


def decile_change(original: Any, published: Any) -> RowMeasure:
    """The percentage of cells that move to another decile of their category (004 §5.2, Table 10).

    Each row of the arrays is one category of the table (a table column) and holds its cells
    (e.g. one per area). Within a category the original counts are sorted by size (ties in cell
    order) and cut into 10 equal groups; the published counts are sorted by size and, for ties,
    by the original order, and cut the same way. ``RC_k = 100 · #{c : decile changed} / n_k``,
    averaged over the categories.

    >>> decile_change([list(range(10))], [[1, 0, 2, 3, 4, 5, 6, 7, 8, 9]]).mean
    20.0
    """
    o, p, _ = _pair(original, published)
    n = o.shape[1]
    if n == 0:
        return RowMeasure.of(np.full(o.shape[0], np.nan))
    cells = np.arange(n)
    per_row = np.empty(o.shape[0])
    for k in range(o.shape[0]):
        order_o = np.lexsort((cells, o[k]))
        rank_o = np.empty(n, dtype=np.int64)
        rank_o[order_o] = cells
        order_p = np.lexsort((rank_o, p[k]))
        rank_p = np.empty(n, dtype=np.int64)
        rank_p[order_p] = cells
        dec_o = (10 * rank_o) // n
        dec_p = (10 * rank_p) // n
        per_row[k] = 100.0 * np.count_nonzero(dec_o != dec_p) / n
    return RowMeasure.of(per_row)


# ------------------------------------------------------------------------------- statistics


def spearman(original: Any, published: Any, mask: Any = None) -> float:
    """Spearman's rank correlation between the original and the published counts of the cells
    (000 §5.8): the Pearson correlation of their ranks (ties get their average rank). NaN when
    either side is constant.

    >>> round(spearman([1, 2, 3, 4], [1, 3, 2, 4]), 12)
    0.8
    """
    from scipy.stats import rankdata

    o, p, m = _pair(original, published, mask)
    x, y = o[m], p[m]
    if x.size < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    rx, ry = rankdata(x), rankdata(y)
    return float(np.corrcoef(rx, ry)[0, 1])


def chi_square(table: Any) -> dict[str, Any]:
    """Pearson's χ² test of independence of a two-way table and Cramér's V (000 §5.8).

    Expected counts from the table's own row and column sums; rows and columns without counts
    are left out; negative counts count as 0. ``V = sqrt(χ² / (N · (min(r, c) − 1)))``.

    >>> chi_square([[10, 0], [0, 10]])["cramers_v"]
    1.0
    """
    t = np.maximum(np.asarray(table, dtype=float), 0.0)
    if t.ndim != 2:
        raise InputError(f"a χ² test needs a two-way table; got {t.ndim} dimensions")
    t = t[t.sum(axis=1) > 0][:, t.sum(axis=0) > 0]
    r, c = t.shape
    n = float(t.sum())
    if r < 2 or c < 2 or n <= 0:
        return {"chi2": None, "dof": 0, "cramers_v": None}
    expected = np.outer(t.sum(axis=1), t.sum(axis=0)) / n
    chi2 = float(((t - expected) ** 2 / expected).sum())
    v = math.sqrt(chi2 / (n * (min(r, c) - 1)))
    return {"chi2": chi2, "dof": (r - 1) * (c - 1), "cramers_v": v}


def signed_rank_test(original: Any, published: Any, mask: Any = None) -> dict[str, Any]:
    """Wilcoxon's signed-rank test of ``published − original`` over the cells: has the location
    of the distribution moved (000 §5.8)? Zero differences are dropped (Wilcoxon's own
    treatment); without a non-zero difference nothing moved and the p-value is 1.

    >>> signed_rank_test([1, 2, 3], [1, 2, 3])["p_value"]
    1.0
    """
    from scipy.stats import wilcoxon

    o, p, m = _pair(original, published, mask)
    d = (p - o)[m]
    d = d[d != 0]
    if d.size == 0:
        return {"statistic": None, "p_value": 1.0, "nonzero": 0}
    res = wilcoxon(d, zero_method="wilcox", alternative="two-sided")
    return {"statistic": float(res.statistic), "p_value": float(res.pvalue), "nonzero": int(d.size)}


def binomial_test(original: Any, published: Any, distribution: Callable[[int], Mapping[int, float]],
                  *, max_count: int = 100) -> dict[str, Any]:
    """Exact binomial tests of a realisation of a random perturbation against its stated
    probabilities (000 §5.8: "an exact Binomial Hypothesis Test can be used to check if the
    realization of a random stochastic perturbation scheme, such as random rounding, follows
    the expected probabilities").

    Each cell of original count ``n`` (``1 <= n <= max_count``) goes up (published > n) with the
    probability ``q(n)`` the method states. Cells with the same ``q`` are one binomial sample (for
    random rounding to base ``b``: one per residue ``r``, ``q = r/b``); each sample gets the exact
    two-sided test of its number of ups. A published value the method gives probability 0 is
    counted as impossible. ``p_min_adjusted`` is the smallest p-value times the number of tests
    (Bonferroni): below 0.05, the realisation does not follow the method's probabilities.

    Args:
        original, published: the counts of the cells the method perturbed on their own.
        distribution: ``n -> {published: probability}`` (a method's ``published_distribution``).
        max_count: cells above this count are left out (the tests are about small cells).

    >>> def rr3(n):  # random rounding to base 3
    ...     r = n % 3
    ...     return {n: 1.0} if r == 0 else {n - r + 3: r / 3, n - r: 1 - r / 3}
    >>> binomial_test([1, 1, 1, 2, 2, 2], [3, 0, 0, 3, 3, 0], rr3)["p_min_adjusted"]
    1.0
    """
    from scipy.stats import binomtest

    o, p, _ = _pair(original, published)
    o, p = o.ravel(), p.ravel()
    sel = (o >= 1) & (o <= max_count)
    o, p = o[sel].astype(np.int64), p[sel]
    groups: dict[float, list[int]] = {}
    impossible = 0
    for n in np.unique(o):
        dist = distribution(int(n))
        cells = o == n
        support = np.array(sorted(dist), dtype=float)
        probs = np.array([dist[int(v)] for v in support])
        seen = p[cells]
        possible = np.isin(seen, support[probs > 0])
        impossible += int(np.count_nonzero(~possible))
        q = float(probs[support > n].sum())
        if 1e-12 < q < 1 - 1e-12:
            up = int(np.count_nonzero(seen > n))
            entry = groups.setdefault(round(q, 12), [0, 0])
            entry[0] += up
            entry[1] += int(cells.sum())
    tests = []
    for q, (up, cells) in sorted(groups.items()):
        res = binomtest(up, cells, q, alternative="two-sided")
        tests.append({"p_up": q, "cells": cells, "up": up, "p_value": float(res.pvalue)})
    p_min = min((t["p_value"] for t in tests), default=1.0)
    return {
        "tests": tests,
        "impossible": impossible,
        "p_min": p_min,
        "p_min_adjusted": min(1.0, p_min * max(len(tests), 1)),
        "consistent": impossible == 0 and min(1.0, p_min * max(len(tests), 1)) >= 0.05,
    }


def anova_r2(counts: Any, scores: Sequence[float]) -> float:
    """The between-group share of the variance of a target variable, ``R² = SSB / SST``, from a
    table of counts (000 §5.8: one-way ANOVA of the target's mean across groups; the measure is
    how protection moves R², i.e. whether the group means became more homogeneous or spread apart).

    Args:
        counts: shape (groups, target categories): persons per group and target category
            (negative counts count as 0).
        scores: the target's value for each category (e.g. the lower bound of an age band).

    >>> anova_r2([[1, 0], [0, 1]], [0.0, 1.0])
    1.0
    """
    c = np.maximum(np.asarray(counts, dtype=float), 0.0)
    s = np.asarray(scores, dtype=float)
    if c.ndim != 2 or c.shape[1] != s.size:
        raise InputError(f"ANOVA needs counts of shape (groups, {s.size}); got {c.shape}")
    n = c.sum()
    if n <= 0:
        return math.nan
    grand = float((c * s).sum() / n)
    sst = float((c * (s - grand) ** 2).sum())
    if sst <= 0:
        return math.nan
    n_g = c.sum(axis=1)
    ok = n_g > 0
    means = (c[ok] * s).sum(axis=1) / n_g[ok]
    ssb = float((n_g[ok] * (means - grand) ** 2).sum())
    return ssb / sst


# ------------------------------------------------------------------------------- tables


def _scores(codes: Sequence[str]) -> tuple[np.ndarray, str]:
    """Numeric values of a variable's leaf codes: the leading number of each code when every
    code has one (``00-04`` → 0, ``100+`` → 100), else the code's position."""
    nums = [re.match(r"\s*(-?\d+(?:\.\d+)?)", c) for c in codes]
    if all(nums):
        return np.array([float(m.group(1)) for m in nums if m]), "leading number of each code"
    return np.arange(len(codes), dtype=float), "position of each code"


@dataclass(frozen=True)
class Comparison:
    """An original table and a published version of it on the same grid, as dense arrays.

    Attributes:
        dimensions: the table's dimensions.
        original: the original counts over the grid, shape ``table.shape``.
        published: the published counts over the grid (a suppressed cell as 0).
        suppressed: the number of suppressed (missing) published cells.
        row_axis: the dimension whose codes are the rows of the per-row measures (a geography).
    """

    dimensions: tuple[Any, ...]
    original: np.ndarray
    published: np.ndarray
    suppressed: int
    row_axis: int

    @classmethod
    def of(cls, original: Any, published: Any, *, rows: str | None = None) -> Comparison:
        """From an original :class:`~tabsafe.model.table.Table` and a published one (a Table, a
        :class:`~tabsafe.model.result.Release` or a Protection) on the same dimensions; ``rows``
        names the row variable (default: the first variable)."""
        from tabsafe.model.result import Protection, Release

        if isinstance(published, Protection):
            published = published.release
        if isinstance(published, Release):
            published = published.table
        if [d.variable for d in original.dimensions] != [d.variable for d in published.dimensions] or any(
                a.hierarchy.order != b.hierarchy.order for a, b in zip(original.dimensions, published.dimensions)):
            raise InputError("the original and the published table are not on the same grid")
        o = np.asarray(original.grid("count"), dtype=float).reshape(original.shape)
        p = np.asarray(published.grid("count"), dtype=float).reshape(published.shape)
        missing = np.isnan(p)
        p = np.where(missing, 0.0, p)
        row_axis = original.axis(rows) if rows else 0
        for arr in (o, p):
            arr.setflags(write=False)
        return cls(tuple(original.dimensions), o, p, int(missing.sum()), row_axis)

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(d.variable for d in self.dimensions)

    @property
    def row_variable(self) -> str:
        return self.variables[self.row_axis]

    def _leaves(self, axis: int) -> np.ndarray:
        h = self.dimensions[axis].hierarchy
        return np.array([h.position[c] for c in h.leaves], dtype=np.int64)

    def _total(self, axis: int) -> int:
        h = self.dimensions[axis].hierarchy
        return h.position[h.total]

    def _rows_first(self, arr: np.ndarray) -> np.ndarray:
        return np.moveaxis(arr, self.row_axis, 0)

    def inner(self) -> tuple[np.ndarray, np.ndarray]:
        """The inner cells as (rows, cells): a row per leaf code of the row variable, its cells
        the combinations of leaf codes of the others."""
        idx = np.ix_(*[self._leaves(a) for a in range(len(self.dimensions))])
        o = self._rows_first(self.original[idx])
        p = self._rows_first(self.published[idx])
        return o.reshape(o.shape[0], -1), p.reshape(p.shape[0], -1)

    def inner_cells(self) -> tuple[np.ndarray, np.ndarray]:
        """The inner cells, flat in table order (the mixed-radix number of the leaf codes'
        places, the last variable varying fastest)."""
        idx = np.ix_(*[self._leaves(a) for a in range(len(self.dimensions))])
        return self.original[idx].ravel(), self.published[idx].ravel()

    def margins(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Margins and subtotals as (rows, cells, mask): a row per code of the row variable
        (aggregates included), its cells those with at least one aggregate code."""
        inner = np.ones(self.original.shape, dtype=bool)
        for axis in range(len(self.dimensions)):
            is_leaf = np.zeros(self.original.shape[axis], dtype=bool)
            is_leaf[self._leaves(axis)] = True
            shape = [1] * self.original.ndim
            shape[axis] = -1
            inner &= is_leaf.reshape(shape)
        o = self._rows_first(self.original)
        p = self._rows_first(self.published)
        m = self._rows_first(~inner)
        n_rows = o.shape[0]
        return o.reshape(n_rows, -1), p.reshape(n_rows, -1), m.reshape(n_rows, -1)

    def marginal(self, keep: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """The marginal table of the variables ``keep`` (axes): their leaf codes, every other
        variable at its total — the published margin cells, not sums of inner cells. Shape: one
        axis per kept variable, in table order."""
        index = [self._leaves(a) if a in keep else np.array([self._total(a)]) for a in range(len(self.dimensions))]
        idx = np.ix_(*index)
        shape = [len(index[a]) for a in sorted(keep)]
        return self.original[idx].reshape(shape), self.published[idx].reshape(shape)

    def marginal_tables(self) -> list[tuple[tuple[int, ...], str]]:
        """Every marginal table between the grand total and the inner cells: each proper,
        non-empty subset of the variables (004 Table 8: 'sex by age group over all areas')."""
        d = len(self.dimensions)
        out = []
        for size in range(d - 1, 0, -1):
            for keep in itertools.combinations(range(d), size):
                over = [self.variables[a] for a in range(d) if a not in keep]
                out.append((keep, " × ".join(self.variables[a] for a in keep) + f" (over all {', '.join(over)})"))
        return out

    def anova_counts(self, target: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
        """Inner-cell counts summed to (row variable leaves, target leaves), original and
        published, with the target's scores."""
        t_axis = self.variables.index(target)
        if t_axis == self.row_axis:
            raise InputError(f"the ANOVA target {target!r} is the row variable; choose another variable")
        idx = np.ix_(*[self._leaves(a) for a in range(len(self.dimensions))])

        def fold(arr: np.ndarray) -> np.ndarray:
            sub = np.maximum(arr[idx], 0.0)
            sub = np.moveaxis(sub, (self.row_axis, t_axis), (0, 1))
            return sub.reshape(sub.shape[0], sub.shape[1], -1).sum(axis=2)

        scores, how = _scores(self.dimensions[t_axis].hierarchy.leaves)
        return fold(self.original), fold(self.published), scores, how

    def default_target(self) -> str | None:
        """The ANOVA target when none is named: the first variable other than the rows with at
        least three leaf codes that all start with a number (an age band), else the first other
        variable with at least three leaf codes."""
        others = [a for a in range(len(self.dimensions)) if a != self.row_axis
                  and len(self.dimensions[a].hierarchy.leaves) >= 3]
        for a in others:
            if _scores(self.dimensions[a].hierarchy.leaves)[1].startswith("leading"):
                return self.variables[a]
        return self.variables[others[0]] if others else None


def utility_measures(cmp: Comparison, *, anova_target: str | None = None,
                     distribution: Callable[[int], Mapping[int, float]] | None = None,
                     max_binomial_count: int = 100) -> dict[str, Any]:
    """Every information-loss measure of a comparison, as plain data (the evaluation report's
    tables, 004 Tables 6–10 and 000 §5.8):

    * ``inner`` — HD, RAD, AAD, variance ratio per row of the inner cells (mean and SE), decile
      change across the table's categories, Spearman;
    * ``margins`` — HD, RAD, AAD per row of the margin and subtotal cells, Spearman;
    * ``marginal_tables`` — RAD (summed over the cells), the mean relative difference of a cell
      and AAD of each marginal table (004 Table 8);
    * ``chi_square`` — χ² and Cramér's V before and after: rows × categories of the inner cells,
      and each two-way marginal table;
    * ``signed_rank`` — over the inner cells; ``binomial`` — when the method's cell distribution
      is given (inner cells); ``anova`` — R² of the target's mean across rows, before and after.
    """
    o, p = cmp.inner()
    out: dict[str, Any] = {"rows": cmp.row_variable, "suppressed_cells": cmp.suppressed}
    out["inner"] = {
        "hellinger": hellinger_distance(o, p).to_json(),
        "rad": relative_absolute_distance(o, p).to_json(),
        "aad": average_absolute_distance(o, p).to_json(),
        "variance_ratio": variance_ratio(o, p).to_json(),
        "decile_change": decile_change(o.T, p.T).to_json(),
        "spearman": _num(spearman(o, p)),
        "cells": int(o.size),
    }
    mo, mp, mm = cmp.margins()
    out["margins"] = {
        "hellinger": hellinger_distance(mo, mp, mm).to_json(),
        "rad": relative_absolute_distance(mo, mp, mm).to_json(),
        "aad": average_absolute_distance(mo, mp, mm).to_json(),
        "spearman": _num(spearman(mo, mp, mm)),
        "cells": int(mm.sum()),
    }
    tables = []
    for keep, label in cmp.marginal_tables():
        a, b = cmp.marginal(keep)
        a, b = a.ravel(), b.ravel()
        nonzero = a > 0
        tables.append({
            "table": label,
            "variables": [cmp.variables[k] for k in keep],
            "cells": int(a.size),
            "rad": _num(relative_absolute_distance(a, b).mean),
            "mean_relative_difference": _num(float(np.mean(np.abs(b - a)[nonzero] / a[nonzero]))
                                             if nonzero.any() else math.nan),
            "aad": _num(average_absolute_distance(a, b).mean),
        })
    out["marginal_tables"] = tables
    chi = [{"table": f"{cmp.row_variable} × categories (inner cells)",
            "before": chi_square(o), "after": chi_square(p)}]
    for keep, label in cmp.marginal_tables():
        if len(keep) == 2:
            a, b = cmp.marginal(keep)
            chi.append({"table": label, "before": chi_square(a), "after": chi_square(b)})
    out["chi_square"] = chi
    out["signed_rank"] = signed_rank_test(o, p)
    if distribution is not None:
        out["binomial"] = binomial_test(o, p, distribution, max_count=max_binomial_count)
    target = anova_target or cmp.default_target()
    if target is not None:
        co, cp, scores, how = cmp.anova_counts(target)
        out["anova"] = {"target": target, "groups": cmp.row_variable, "scores": how,
                        "r2_before": _num(anova_r2(co, scores)), "r2_after": _num(anova_r2(cp, scores))}
    out.update(structure_measures(cmp))
    return out


def structure_measures(cmp: Comparison) -> dict[str, Any]:
    """The table-structure measures of :mod:`tabsafe.evaluate.table_measures` before and after:
    the log-linear model's fit (000 §5.8), the median entropy of the subgroups of the row
    variable (002 §4.1), the variance of the cell size by column and table (000 §5.8, 004 §5.2)."""
    from tabsafe.evaluate.table_measures import loglinear_fit, median_subgroup_entropy, variance_of_cell_size

    idx = np.ix_(*[cmp._leaves(a) for a in range(len(cmp.dimensions))])
    o_all, p_all = cmp.original[idx], cmp.published[idx]
    o, p = cmp.inner()
    def clean(x: Any) -> Any:  # NaN is not JSON: None, as _num does
        return {k: clean(v) for k, v in x.items()} if isinstance(x, dict) else _num(x) if isinstance(x, float) else x

    out: dict[str, Any] = {"cell_size_variance": clean(variance_of_cell_size(o, p))}
    out["subgroup_entropy"] = {"groups": cmp.row_variable,
                               "before": _num(median_subgroup_entropy(o_all, [cmp.row_axis])),
                               "after": _num(median_subgroup_entropy(p_all, [cmp.row_axis]))}
    if len(cmp.dimensions) >= 2:
        def fit(arr: np.ndarray) -> dict[str, Any]:
            f = loglinear_fit(arr)
            return {"chi2": _num(f["chi2"]), "g2": _num(f["g2"]), "df": f["df"], "p_value": _num(f["p_value"])}

        model = "independence" if len(cmp.dimensions) == 2 else "every two-way interaction, no higher"
        out["loglinear"] = {"model": model, "before": fit(o_all), "after": fit(p_all)}
    return out
