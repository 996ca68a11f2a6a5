"""The nearest table that passes: a refused query's one-step changes (coarser categories, a larger
area, a variable fewer, no filter), searched by uniform cost (seed 002 §5: the rules say what to
change, the service offers the change as a ready-to-send query)."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from tabsafe.errors import TabsafeError
from tabsafe.service.prepared import Prepared
from tabsafe.service.query import Dim, Query
from tabsafe.service.rules import Suggestion


def suggest(builder: Any, query: Query, accept: Callable[[Query], bool] | None = None,
            tries: int | None = None) -> tuple[Suggestion | None, int]:
    """The cheapest changes (uniform-cost search over :func:`moves`) whose table passes every
    rule (and that ``accept`` takes: the differencing record); at most ``limits.suggestion_tries``
    candidate tables are built."""
    frontier: list[tuple[int, int, Query, tuple[str, ...]]] = []
    seen = {query.key()}
    seq = 0
    for cost, text, q in moves(query, builder.data):
        if q.key() not in seen:
            seen.add(q.key())
            heapq.heappush(frontier, (cost, seq := seq + 1, q, (text,)))
    tried = 0
    budget = builder.limits.suggestion_tries if tries is None else min(tries, builder.limits.suggestion_tries)
    while frontier and tried < budget:
        cost, _, q, changes = heapq.heappop(frontier)
        tried += 1
        try:
            outcome, _ = builder.evaluate(q)
        except TabsafeError:
            # a query that does not resolve (an unknown code, too many cells) may still lead
            # to one that does: keep searching from it
            outcome, base = None, q
        else:
            if outcome.passed:
                return Suggestion(outcome.query, changes, outcome), tried
            base = outcome.query
        for c, text, q2 in moves(base, builder.data):
            k = q2.key()
            if k not in seen:
                seen.add(k)
                heapq.heappush(frontier, (cost + c, seq := seq + 1, q2, (*changes, text)))
    return None, tried


def moves(query: Query, data: Prepared) -> list[tuple[int, str, Query]]:
    """The one-step changes towards a table that passes, with their costs: a coarser level of one
    variable (1), a larger area (1), one variable fewer (2), no filter (3)."""
    out: list[tuple[int, str, Query]] = []
    dims = list(query.dimensions)
    for i, d in enumerate(dims):
        var = data.variables.get(d.variable)
        if var is None:
            continue
        if d.groups is None and (d.level is None or not isinstance(d.level, int) or d.level < 1):
            d = Dim(d.variable, level=var.hierarchy.max_depth, categories=d.categories, subtotals=d.subtotals)
        new: Dim | None = None
        text = ""
        if d.groups is not None:
            top = max(1, var.recode_level - 1)
            new, text = Dim(d.variable, level=top), f"{d.variable} at level {top} ({var.levels[top - 1]}) instead of groups"
        elif d.level is not None and d.level > 1:
            lv = min(d.level, var.hierarchy.max_depth) - 1
            cats = None
            h = var.hierarchy
            if d.categories is not None and all(c in h.position for c in d.categories):
                up = [next(a for a in h.ancestors(c) if h.depth(a) <= lv) for c in d.categories]
                cats = tuple(dict.fromkeys(up))
            new = Dim(d.variable, level=lv, categories=cats, subtotals=d.subtotals and lv > 1)
            text = f"{d.variable} at level {lv} ({var.levels[lv - 1]})"
        elif d.categories is not None:
            new, text = Dim(d.variable, level=d.level), f"every category of {d.variable}"
        if new is not None:
            out.append((1, text, Query(tuple(dims[:i] + [new] + dims[i + 1:]), query.area, query.where,
                                       query.measure, query.variable)))
    if query.area is not None and data.geography is not None:
        h = data.variables[data.geography].hierarchy
        parents = tuple(dict.fromkeys(h.parents[c] for c in query.area if c in h.parents))
        if h.total in parents or not parents:
            out.append((2, "the whole population instead of the area",
                        Query(query.dimensions, None, query.where, query.measure, query.variable)))
        else:
            out.append((1, f"a larger area: {', '.join(parents[:5])}{' …' if len(parents) > 5 else ''}",
                        Query(query.dimensions, parents, query.where, query.measure, query.variable)))
    if len(dims) > 1:
        for i, d in enumerate(dims):
            out.append((2, f"without {d.variable}", Query(tuple(dims[:i] + dims[i + 1:]), query.area, query.where,
                                                          query.measure, query.variable)))
    if query.where is not None:
        out.append((3, "without the filter", Query(query.dimensions, query.area, None, query.measure, query.variable)))
    return out


__all__ = ["moves", "suggest"]
