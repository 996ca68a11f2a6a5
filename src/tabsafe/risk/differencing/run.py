"""The differencing audit run: counts from the tabulation engine, then the box search of
:mod:`tabsafe.risk.differencing.boxes` (:func:`audit`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tabsafe.engines import DEFAULT_ENGINE
from tabsafe.errors import InputError, param
from tabsafe.risk.differencing.boxes import (
    SLIVER_COLUMNS,
    AuditResult,
    _base_name,
    _covered,
    _describe,
    _domains,
    _overlaps,
    _strict_subsets,
    _table_counts,
    _table_dims,
)
from tabsafe.risk.differencing.spec import DifferencingSpec

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

    t_small = spec.threshold if threshold is None else threshold
    if isinstance(t_small, bool) or not isinstance(t_small, int) or t_small < 1:
        raise InputError(f"{param('threshold')} must be an integer >= 1, got {t_small!r}")
    orders = spec.max_order if max_order is None else max_order
    if isinstance(orders, bool) or not isinstance(orders, int) or orders < 1:
        raise InputError(f"{param('max_order')} must be an integer >= 1, got {orders!r}")

    # base variables: those the tables' variables and filters are built from
    base_vars: list[str] = []
    for t in spec.tables:
        for v in list(t.by) + list(t.where.variables if t.where is not None else ()):
            b = _base_name(spec.derived, v)
            if b not in base_vars:
                base_vars.append(b)
    groups = grouped_counts(get_engine(engine), spec.data, base_vars)
    sets = _domains(spec, groups.variables, groups.codes, groups.kinds)
    nvar = len(base_vars)
    col = {v: i for i, v in enumerate(base_vars)}
    code_idx = groups.positions
    weights = groups.counts

    # published cells: one box (row of set ids) per cell, with its count
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
        labels = [t.name if not dims else f"{t.name}[" + ", ".join(f"{v}={d.codes[grid[k][r]]}" for k, (v, d) in
                                            enumerate(zip(t.by, dims, strict=True))) + "]" for r in range(size)] \
            if size <= 200_000 else [f"{t.name}[cell {r}]" for r in range(size)]
        label_parts.append(labels)
        table_of.append(np.full(size, ti))
    boxes = np.vstack(boxes_parts) if nvar else np.zeros((n_cells, 0), np.int64)
    cell_counts = np.concatenate(count_parts)
    cell_labels = [x for part in label_parts for x in part]
    cell_tables = np.concatenate(table_of)

    # empty boxes (a code outside the filter) are no cells
    nonempty = np.ones(len(boxes), dtype=bool)
    for v, j in col.items():
        sizes = np.array([m.sum() for m in sets[v].masks])
        nonempty &= sizes[boxes[:, j]] > 0
    uniq, first = np.unique(boxes[nonempty], axis=0, return_index=True)
    src = np.flatnonzero(nonempty)[first]
    pool_counts = cell_counts[src]
    n_published = len(uniq)
    pool = uniq
    prov_tables: list[tuple[int, ...]] = [(int(cell_tables[i]),) for i in src]
    prov_label: list[str] = [cell_labels[i] for i in src]
    order = np.zeros(n_published, np.int64)
    known = {r.tobytes(): i for i, r in enumerate(pool)}

    rows: list[dict[str, Any]] = []
    pairs_examined = 0
    redundant = 0
    for rnd in range(orders):
        new_rows: list[np.ndarray] = []
        new_meta: list[tuple[int, int, int, int, int]] = []  # (outer, inner, var, set of A, set of B)
        for v, j in col.items():
            s = sets[v]
            overlaps, sizes = _overlaps(s)
            subs = _strict_subsets(overlaps, sizes)
            if subs.empty:
                continue
            others = np.delete(pool, j, axis=1)
            if others.shape[1]:
                _, sig = np.unique(others, axis=0, return_inverse=True)
                sig = sig.ravel()
            else:
                sig = np.zeros(len(pool), np.int64)
            cells = pd.DataFrame({"box": np.arange(len(pool)), "sig": sig, "s": pool[:, j], "ord": order})
            a = cells.rename(columns={"box": "a", "s": "sa", "ord": "oa"}).merge(subs, on="sa")
            ab = a.merge(cells.rename(columns={"box": "b", "s": "sb", "ord": "ob"}), on=["sig", "sb"])
            ab = ab[np.maximum(ab["oa"], ab["ob"]) == rnd]
            if ab.empty:
                continue
            pairs_examined += len(ab)
            if rnd == orders - 1:
                # last order: nothing chains on, so only the slivers worth reporting are kept
                n_diff = pool_counts[ab["b"].to_numpy()] - pool_counts[ab["a"].to_numpy()]
                ab = ab[n_diff < t_small]
                if ab.empty:
                    continue
            # the sliver's set of v: B_v \ A_v, once per distinct pair of sets; interned only if new
            sa_rows, sb_rows = ab["sa"].to_numpy(), ab["sb"].to_numpy()
            upi, uniq = pd.factorize(sa_rows * len(s.masks) + sb_rows)
            u_sa, u_sb = uniq // len(s.masks), uniq % len(s.masks)
            a_rows = ab["a"].to_numpy()
            covered = _covered(s, overlaps, sizes, sig[a_rows], upi, u_sa, u_sb, sig, pool[:, j])
            redundant += int(covered.sum())
            d_ids: dict[int, int] = {}
            for k in np.flatnonzero(~covered):
                u = int(upi[k])
                if u not in d_ids:
                    d_ids[u] = s.intern(s.masks[u_sb[u]] & ~s.masks[u_sa[u]])
                box = pool[a_rows[k]].copy()
                box[j] = d_ids[u]
                key = box.tobytes()
                if key in known:
                    continue
                known[key] = -1  # claimed; replaced below with its pool index
                new_rows.append(box)
                new_meta.append((int(ab["b"].iat[k]), int(a_rows[k]), j, int(sa_rows[k]), int(sb_rows[k])))
        if not new_rows:
            break
        start = len(pool)
        pool = np.vstack([pool, np.vstack(new_rows)])
        add_counts = []
        for i, (b, a_, j, sa, sb) in enumerate(new_meta):
            known[pool[start + i].tobytes()] = start + i
            n = int(pool_counts[b] - pool_counts[a_])
            add_counts.append(n)
            var = base_vars[j]
            desc = _describe(pool[start + i], base_vars, sets, j=j, sa=sa, sb=sb)
            prov_tables.append(tuple(sorted(set(prov_tables[b]) | set(prov_tables[a_]))))
            prov_label.append(f"({desc})")
            rows.append({
                "order": rnd + 1, "count": n, "small": 0 < n < t_small, "zero": n == 0, "variable": var,
                "sliver": desc,
                "tables": "; ".join(spec.tables[x].name for x in prov_tables[-1]),
                "outer": prov_label[b], "inner": prov_label[a_],
                "outer_count": int(pool_counts[b]), "inner_count": int(pool_counts[a_]),
                "box": {v: [s_.domain[i] for i in np.flatnonzero(s_.masks[int(pool[start + i][k])])]
                        for k, (v, s_) in enumerate(sets.items()) if pool[start + i][k] != s_.full},
            })
        pool_counts = np.concatenate([pool_counts, np.asarray(add_counts, np.int64)])
        order = np.concatenate([order, np.full(len(new_rows), rnd + 1, np.int64)])

    frame = pd.DataFrame(rows, columns=list(SLIVER_COLUMNS))
    if not frame.empty:
        frame = frame.sort_values(["small", "order", "count"], ascending=[False, True, True], kind="stable")
        frame = frame.reset_index(drop=True)
    frame = frame.astype({"order": np.int64, "count": np.int64, "small": bool, "zero": bool,
                          "outer_count": np.int64, "inner_count": np.int64})
    summary = {
        "tables": len(spec.tables), "cells": n_cells, "distinct_boxes": n_published,
        "pairs_examined": pairs_examined, "slivers": len(frame), "small": int(frame["small"].sum()),
        "zero": int(frame["zero"].sum()), "redundant": redundant,
    }
    return AuditResult(slivers=frame, summary=summary, threshold=t_small)
