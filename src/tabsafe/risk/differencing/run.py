"""The differencing audit run: counts from the tabulation engine, then the box search of
:mod:`tabsafe.risk.differencing.boxes` (:func:`audit`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tabsafe.engines import DEFAULT_ENGINE
from tabsafe.errors import InputError, param
from tabsafe.risk.differencing.boxes import (
    SLIVER_COLUMNS,
    AuditResult,
    CodeSets,
    _base_name,
    _covered,
    _describe,
    _Dim,
    _domains,
    _overlaps,
    _strict_subsets,
    _table_counts,
    _table_dims,
)
from tabsafe.risk.differencing.spec import DifferencingSpec, TableDef

#: Refuse releases with more published cells than this (all tables together).
MAX_CELLS = 20_000_000


def audit(spec: DifferencingSpec, *, threshold: int | None = None, max_order: int | None = None,
          engine: Any = DEFAULT_ENGINE) -> AuditResult:
    """Find every new sliver the release determines by differencing nested cells (and chains).

    Source: seed 000 §5.2 (geographical, linking and sub-population/recoding differencing,
    Tables 5.4–5.13), seed 001 §1 (user-defined geographies from building blocks). See the
    module docstring for the box model, what "new" means, which filters and which differences
    are searched.

    Args:
        spec: the release.
        threshold: overrides ``spec.threshold`` (small = ``0 < n < threshold``).
        max_order: overrides ``spec.max_order`` (longest chain of differences; 1 = pairs only).
        engine: the engine that reads the counts (a name, or an engine object), as for
            :func:`tabsafe.tabulate`.
    """
    from tabsafe.engines.planner import grouped_counts
    from tabsafe.engines import get_engine

    t_small = _at_least_one("threshold", spec.threshold if threshold is None else threshold)
    orders = _at_least_one("max_order", spec.max_order if max_order is None else max_order)
    base_vars = _base_variables(spec)
    groups = grouped_counts(get_engine(engine), spec.data, base_vars)
    sets = _domains(spec, groups.variables, groups.codes, groups.kinds)
    cells = _published_cells(spec, sets, base_vars, groups.positions, groups.counts)
    pool = _distinct_boxes(cells, sets, base_vars)
    n_published = len(pool.boxes)
    rows: list[dict[str, Any]] = []
    pairs_examined = redundant = 0
    for rnd in range(orders):
        found = _Found()
        for j, v in enumerate(base_vars):
            pairs_examined += _new_slivers(pool, sets[v], j, rnd, last=rnd == orders - 1, t_small=t_small,
                                           found=found)
        redundant += found.redundant
        if not found.boxes:
            break
        rows += _add_to_pool(pool, found, rnd, base_vars, sets, spec, t_small)
    frame = _sliver_frame(rows)
    summary = {
        "tables": len(spec.tables), "cells": cells.n_cells, "distinct_boxes": n_published,
        "pairs_examined": pairs_examined, "slivers": len(frame), "small": int(frame["small"].sum()),
        "zero": int(frame["zero"].sum()), "redundant": redundant,
    }
    return AuditResult(slivers=frame, summary=summary, threshold=t_small)


def _at_least_one(name: str, value: Any) -> int:
    """``value`` if it is an integer >= 1 (not a bool), else one :class:`InputError` line naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{param(name)} must be an integer >= 1, got {value!r}")
    return value


def _base_variables(spec: DifferencingSpec) -> list[str]:
    """The base variables the tables' variables and filters are built from, in first-use order."""
    base_vars: list[str] = []
    for t in spec.tables:
        for v in list(t.by) + list(t.where.variables if t.where is not None else ()):
            b = _base_name(spec.derived, v)
            if b not in base_vars:
                base_vars.append(b)
    return base_vars


@dataclass(frozen=True)
class _Cells:
    """Every published cell of the release as a box (one row of set ids per cell, columns in
    base-variable order), with its count, its label and the index of its table."""

    boxes: np.ndarray
    counts: np.ndarray
    labels: list[str]
    tables: np.ndarray
    n_cells: int


def _published_cells(spec: DifferencingSpec, sets: Mapping[str, CodeSets], base_vars: Sequence[str],
                     code_idx: np.ndarray, weights: np.ndarray) -> _Cells:
    """Each table's cells as boxes with their counts from the grouped data (seed 000 §5.2: a cell
    admits its code's base codes within the table's filter); refuses more than :data:`MAX_CELLS`."""
    col = {v: i for i, v in enumerate(base_vars)}
    boxes_parts: list[np.ndarray] = []
    count_parts: list[np.ndarray] = []
    label_parts: list[list[str]] = []
    table_of: list[np.ndarray] = []
    n_cells = 0
    for ti, t in enumerate(spec.tables):
        dims, filters = _table_dims(spec, t, sets)
        shape = [len(d.codes) for d in dims]
        size = int(np.prod(shape)) if shape else 1
        n_cells += size
        if n_cells > MAX_CELLS:
            raise InputError(f"the release has more than {MAX_CELLS:,} cells", where=spec.source)
        row = np.array([sets[v].full for v in base_vars], dtype=np.int64)
        for b, m in filters.items():
            row[col[b]] = sets[b].intern(m)
        box = np.tile(row, (size, 1))
        grid = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), np.int64)
        for k, d in enumerate(dims):
            box[:, col[d.base]] = np.asarray(d.set_ids, np.int64)[grid[k]]
        boxes_parts.append(box)
        count_parts.append(_table_counts(dims, filters, sets, col, code_idx, weights, shape))
        label_parts.append(_cell_labels(t, dims, grid, size))
        table_of.append(np.full(size, ti))
    boxes = np.vstack(boxes_parts) if base_vars else np.zeros((n_cells, 0), np.int64)
    return _Cells(boxes=boxes, counts=np.concatenate(count_parts),
                  labels=[x for part in label_parts for x in part], tables=np.concatenate(table_of),
                  n_cells=n_cells)


def _cell_labels(t: TableDef, dims: Sequence[_Dim], grid: np.ndarray, size: int) -> list[str]:
    """Each cell of table ``t`` named by its codes (``name[v=c, …]``); by its position only past
    200,000 cells (the names would cost more than the audit)."""
    if size > 200_000:
        return [f"{t.name}[cell {r}]" for r in range(size)]
    if not dims:
        return [t.name] * size
    return [f"{t.name}[" + ", ".join(f"{v}={d.codes[grid[k][r]]}" for k, (v, d) in
                                     enumerate(zip(t.by, dims, strict=True))) + "]" for r in range(size)]


@dataclass
class _Pool:
    """The known boxes of the search, growing round by round: the distinct published boxes
    first, then each new sliver. Per box: its count, the round that made it (0: published), the
    tables it comes from and its label; ``known`` maps a box's bytes to its row (-1: claimed in
    the current round)."""

    boxes: np.ndarray
    counts: np.ndarray
    order: np.ndarray
    tables: list[tuple[int, ...]]
    labels: list[str]
    known: dict[bytes, int]


def _distinct_boxes(cells: _Cells, sets: Mapping[str, CodeSets], base_vars: Sequence[str]) -> _Pool:
    """The pool to start from: the distinct non-empty published boxes (a box with a code set
    outside the filter is no cell), each with the first cell that publishes it."""
    boxes = cells.boxes
    nonempty = np.ones(len(boxes), dtype=bool)
    for j, v in enumerate(base_vars):
        sizes = np.array([m.sum() for m in sets[v].masks])
        nonempty &= sizes[boxes[:, j]] > 0
    uniq, first = np.unique(boxes[nonempty], axis=0, return_index=True)
    src = np.flatnonzero(nonempty)[first]
    return _Pool(boxes=uniq, counts=cells.counts[src], order=np.zeros(len(uniq), np.int64),
                 tables=[(int(cells.tables[i]),) for i in src], labels=[cells.labels[i] for i in src],
                 known={r.tobytes(): i for i, r in enumerate(uniq)})


@dataclass
class _Found:
    """The new slivers of one round: their boxes and, per box, (outer, inner, variable column,
    set of the inner, set of the outer); ``redundant`` counts differences covered by known boxes."""

    boxes: list[np.ndarray] = field(default_factory=list)
    meta: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    redundant: int = 0


def _pairs(pool: _Pool, s: CodeSets, j: int, rnd: int) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame,
                                                                  np.ndarray] | None:
    """Nested pairs (inner ``a`` ⊊ outer ``b``) of pool boxes differing only in variable column
    ``j``, at least one of them made in round ``rnd``: joined on the sets of the other variables
    (``sig``) and the strict-subset relation of the sets of ``s`` (no double loop). None when
    there are none; else the pairs, the signatures and the overlaps and sizes of ``s``'s sets."""
    overlaps, sizes = _overlaps(s)
    subs = _strict_subsets(overlaps, sizes)
    if subs.empty:
        return None
    others = np.delete(pool.boxes, j, axis=1)
    if others.shape[1]:
        _, sig = np.unique(others, axis=0, return_inverse=True)
        sig = sig.ravel()
    else:
        sig = np.zeros(len(pool.boxes), np.int64)
    cells = pd.DataFrame({"box": np.arange(len(pool.boxes)), "sig": sig, "s": pool.boxes[:, j], "ord": pool.order})
    a = cells.rename(columns={"box": "a", "s": "sa", "ord": "oa"}).merge(subs, on="sa")
    ab = a.merge(cells.rename(columns={"box": "b", "s": "sb", "ord": "ob"}), on=["sig", "sb"])
    ab = ab[np.maximum(ab["oa"], ab["ob"]) == rnd]
    if ab.empty:
        return None
    return ab, sig, overlaps, sizes


def _new_slivers(pool: _Pool, s: CodeSets, j: int, rnd: int, *, last: bool, t_small: int, found: _Found) -> int:
    """Add to ``found`` the new slivers ``B \\ A`` of round ``rnd`` in variable column ``j`` (seed
    000 §5.2): not a known box, not covered by known boxes inside it; interns the slivers' sets in
    ``s`` and claims their boxes in ``pool.known``. Returns the number of pairs examined."""
    paired = _pairs(pool, s, j, rnd)
    if paired is None:
        return 0
    ab, sig, overlaps, sizes = paired
    examined = len(ab)
    if last:
        # last order: nothing chains on, so only the slivers worth reporting are kept
        n_diff = pool.counts[ab["b"].to_numpy()] - pool.counts[ab["a"].to_numpy()]
        ab = ab[n_diff < t_small]
        if ab.empty:
            return examined
    # the sliver's set of v: B_v \ A_v, once per distinct pair of sets; interned only if new
    sa_rows, sb_rows = ab["sa"].to_numpy(), ab["sb"].to_numpy()
    upi, uniq = pd.factorize(sa_rows * len(s.masks) + sb_rows)
    u_sa, u_sb = uniq // len(s.masks), uniq % len(s.masks)
    a_rows = ab["a"].to_numpy()
    covered = _covered(s, overlaps, sizes, sig[a_rows], upi, u_sa, u_sb, sig, pool.boxes[:, j])
    found.redundant += int(covered.sum())
    d_ids: dict[int, int] = {}
    for k in np.flatnonzero(~covered):
        u = int(upi[k])
        if u not in d_ids:
            d_ids[u] = s.intern(s.masks[u_sb[u]] & ~s.masks[u_sa[u]])
        box = pool.boxes[a_rows[k]].copy()
        box[j] = d_ids[u]
        key = box.tobytes()
        if key in pool.known:
            continue
        pool.known[key] = -1  # claimed; replaced with its pool index by _add_to_pool
        found.boxes.append(box)
        found.meta.append((int(ab["b"].iat[k]), int(a_rows[k]), j, int(sa_rows[k]), int(sb_rows[k])))
    return examined


def _add_to_pool(pool: _Pool, found: _Found, rnd: int, base_vars: Sequence[str], sets: Mapping[str, CodeSets],
                 spec: DifferencingSpec, t_small: int) -> list[dict[str, Any]]:
    """Append the round's new slivers to the pool (count ``n(B) − n(A)``, order ``rnd + 1``) and
    return their report rows (columns :data:`SLIVER_COLUMNS`)."""
    start = len(pool.boxes)
    pool.boxes = np.vstack([pool.boxes, np.vstack(found.boxes)])
    add_counts = []
    rows = []
    for i, (b, a_, j, sa, sb) in enumerate(found.meta):
        box = pool.boxes[start + i]
        pool.known[box.tobytes()] = start + i
        n = int(pool.counts[b] - pool.counts[a_])
        add_counts.append(n)
        desc = _describe(box, base_vars, sets, j=j, sa=sa, sb=sb)
        pool.tables.append(tuple(sorted(set(pool.tables[b]) | set(pool.tables[a_]))))
        pool.labels.append(f"({desc})")
        rows.append({
            "order": rnd + 1, "count": n, "small": 0 < n < t_small, "zero": n == 0, "variable": base_vars[j],
            "sliver": desc,
            "tables": "; ".join(spec.tables[x].name for x in pool.tables[-1]),
            "outer": pool.labels[b], "inner": pool.labels[a_],
            "outer_count": int(pool.counts[b]), "inner_count": int(pool.counts[a_]),
            "box": {v: [s_.domain[c] for c in np.flatnonzero(s_.masks[int(box[k])])]
                    for k, (v, s_) in enumerate(sets.items()) if box[k] != s_.full},
        })
    pool.counts = np.concatenate([pool.counts, np.asarray(add_counts, np.int64)])
    pool.order = np.concatenate([pool.order, np.full(len(found.boxes), rnd + 1, np.int64)])
    return rows


def _sliver_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The slivers as :attr:`AuditResult.slivers`: small ones first, then by order and count."""
    frame = pd.DataFrame(rows, columns=list(SLIVER_COLUMNS))
    if not frame.empty:
        frame = frame.sort_values(["small", "order", "count"], ascending=[False, True, True], kind="stable")
        frame = frame.reset_index(drop=True)
    return frame.astype({"order": np.int64, "count": np.int64, "small": bool, "zero": bool,
                         "outer_count": np.int64, "inner_count": np.int64})
