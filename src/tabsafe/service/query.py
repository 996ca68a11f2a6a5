"""A user-defined table, as the service understands it, and its resolution against the catalogue.

A :class:`Query` names up to a few spanning variables (each at a level of its hierarchy, or
recoded into groups, or restricted to some categories), an optional user-defined area (a union
of geography building blocks: any code of the geography's hierarchy), an optional sub-population
filter in tabsafe's filter language (:mod:`tabsafe.model.filter`) and what to count: persons, or
the sum or mean of a numeric variable (METHODS.md §11; seed 001 §1 for areas from building
blocks, seed 002 §5 for the table builder).

:func:`resolve` checks a query against the catalogue and returns its :class:`Resolved` form: the
canonical query (the cache key: the same table asked in two spellings is one query), per variable
the categories shown and how each leaf code falls into them, the runs of records of the area and
the parsed filter.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tabsafe.errors import InputError, TooLargeError
from tabsafe.model import filter as _filter
from tabsafe.model.hierarchy import TOTAL, Hierarchy
from tabsafe.service.prepared import Prepared, Variable

MEASURES = ("count", "sum", "mean")


@dataclass(frozen=True)
class Dim:
    """One spanning variable of a query.

    Attributes:
        variable: the variable.
        level: the hierarchy level shown (1 = top; default the deepest).
        categories: only these categories of the level (records in others are left out; the
            total is then the total of these).
        groups: a recode instead of a level: ``(label, codes)`` pairs; each group is the union
            of the codes' records (codes of any level). Records in no group are left out.
        subtotals: also show the levels between the total and ``level``.
    """

    variable: str
    level: int | None = None
    categories: tuple[str, ...] | None = None
    groups: tuple[tuple[str, tuple[str, ...]], ...] | None = None
    subtotals: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"variable": self.variable}
        if self.groups is not None:
            out["groups"] = [{"label": g, "codes": list(c)} for g, c in self.groups]
        else:
            out["level"] = self.level
            if self.categories is not None:
                out["categories"] = list(self.categories)
            if self.subtotals:
                out["subtotals"] = True
        return out


@dataclass(frozen=True)
class Query:
    """A table a user asks for (module docstring)."""

    dimensions: tuple[Dim, ...]
    area: tuple[str, ...] | None = None
    where: str | None = None
    measure: str = "count"
    variable: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dimensions": [d.to_json() for d in self.dimensions]}
        if self.area is not None:
            out["area"] = list(self.area)
        if self.where is not None:
            out["where"] = self.where
        out["measure"] = self.measure
        if self.variable is not None:
            out["variable"] = self.variable
        return out

    def key(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Query:
        dims = []
        for d in data.get("dimensions") or ():
            groups = d.get("groups")
            dims.append(Dim(
                variable=d["variable"], level=d.get("level"),
                categories=tuple(d["categories"]) if d.get("categories") is not None else None,
                groups=tuple((g["label"], tuple(g["codes"])) for g in groups) if groups is not None else None,
                subtotals=bool(d.get("subtotals", False)),
            ))
        area = data.get("area")
        return cls(dimensions=tuple(dims), area=tuple(area) if area is not None else None,
                   where=data.get("where"), measure=data.get("measure", "count"), variable=data.get("variable"))


@dataclass(frozen=True, eq=False)
class ResolvedDim:
    """A dimension ready to tabulate: the categories shown (a hierarchy whose leaves are the
    *base* categories) and each leaf code's base category (-1: left out)."""

    spec: Dim
    variable: Variable
    display: Hierarchy
    base: tuple[str, ...]
    lut: np.ndarray
    #: for each base category, the display positions it adds to (itself, shown ancestors, total)
    targets: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, eq=False)
class Resolved:
    query: Query
    dims: tuple[ResolvedDim, ...]
    ranges: tuple[tuple[int, int], ...]
    area_label: str | None
    mask: Callable[[Any], np.ndarray] | None
    numeric: str | None
    grid_cells: int = field(default=0)
    where: _filter.Filter | None = None


def _level_of(var: Variable, level: int | None) -> int:
    depth = var.hierarchy.max_depth
    if level is None:
        return depth
    if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= depth:
        names = ", ".join(f"{i} ({n})" for i, n in enumerate(var.levels, start=1))
        raise InputError(f"variable {var.name!r} has levels {names}; got level {level!r}")
    return level


def _code(var: Variable, code: Any, what: str) -> str:
    text = str(code)
    if text not in var.hierarchy.position:
        raise InputError(f"{what}: {text!r} is not a code of {var.name!r}")
    return text


def _resolve_dim(dim: Dim, var: Variable, limits: Any, inside: np.ndarray | None = None) -> ResolvedDim:
    h = var.hierarchy
    n_leaves = len(h.leaves)
    lut = np.full(n_leaves, -1, dtype=np.int64)
    if dim.groups is not None:
        if dim.level is not None or dim.categories is not None or dim.subtotals:
            raise InputError(f"variable {var.name!r}: give groups, or a level with categories, not both")
        if not dim.groups:
            raise InputError(f"variable {var.name!r}: an empty list of groups")
        if len(dim.groups) > limits.max_groups:
            raise TooLargeError(f"variable {var.name!r}: at most {limits.max_groups} groups; got {len(dim.groups)}")
        labels: list[str] = []
        canonical = []
        for gi, (label, codes) in enumerate(dim.groups):
            label = " ".join(str(label).split())
            if not label or label == TOTAL or label in labels:
                raise InputError(f"variable {var.name!r}: group label {label!r} is empty, repeated or {TOTAL!r}")
            if not codes:
                raise InputError(f"variable {var.name!r}: group {label!r} has no codes")
            codes_c = tuple(sorted({_code(var, c, f"group {label!r}") for c in codes}, key=h.position.__getitem__))
            for c in codes_c:
                leaves = var.leaves_below[c]
                taken = (lut[leaves] >= 0) & (lut[leaves] != gi)
                if taken.any():
                    other = labels[int(lut[leaves][taken][0])]
                    raise InputError(f"variable {var.name!r}: groups {other!r} and {label!r} overlap (code {c!r})")
                lut[leaves] = gi
            labels.append(label)
            canonical.append((label, codes_c))
        base = tuple(labels)
        display = Hierarchy.flat(base, source=f"groups of {var.name!r}")
        spec = Dim(var.name, groups=tuple(canonical))
        targets = tuple((display.position[b], 0) for b in base)
        return ResolvedDim(spec, var, display, base, lut, targets)

    level = _level_of(var, dim.level)
    cats = var.at_level(level)
    if dim.categories is not None:
        if not dim.categories:
            raise InputError(f"variable {var.name!r}: an empty list of categories")
        wanted = {_code(var, c, "categories") for c in dim.categories}
        wrong = [c for c in wanted if c not in cats]
        if wrong:
            raise InputError(f"variable {var.name!r}: {wrong[0]!r} is not a category of level {level} "
                             f"({var.levels[level - 1]})")
        cats = tuple(c for c in cats if c in wanted)
    if inside is not None:
        # the geography of a user-defined area shows the area's blocks only
        cats = tuple(c for c in cats if inside[var.leaves_below[c]].any())
        if not cats:
            raise InputError(f"variable {var.name!r}: no category of level {level} lies in the area")
    for i, c in enumerate(cats):
        lut[var.leaves_below[c]] = i
    shown: dict[str, str] = {}  # code -> parent in the display
    for c in cats:
        chain = [a for a in h.ancestors(c)[1:] if a != h.total] if dim.subtotals else []
        parent = h.total
        for a in reversed(chain):
            shown.setdefault(a, parent)
            parent = a
        shown[c] = parent
    # in the hierarchy's order: the shown codes sorted, not every code of the hierarchy scanned
    # (a user-defined area shows a few dozen of the geography's thousands of codes)
    ordered = {c: shown[c] for c in sorted(shown, key=h.position.__getitem__)}
    display = Hierarchy.from_parents(ordered, total=h.total, source=f"variable {var.name!r}")
    targets = tuple(tuple(display.position[a] for a in display.ancestors(c)) for c in cats)
    full = dim.categories is not None and len(cats) == len(var.at_level(level))
    spec = Dim(var.name, level=level, categories=None if (dim.categories is None or full or inside is not None) else cats,
               subtotals=bool(dim.subtotals) and level > 1)
    return ResolvedDim(spec, var, display, tuple(cats), lut, targets)


#: resolved dimensions kept per data set (a dimension outside an area depends on nothing else)
_RESOLVED: weakref.WeakKeyDictionary[Any, dict[tuple[Dim, int], ResolvedDim]] = weakref.WeakKeyDictionary()
_RESOLVED_MAX = 4096


def _resolved_dim(dim: Dim, data: Prepared, limits: Any) -> ResolvedDim:
    """:func:`_resolve_dim` of a dimension outside any area, kept: most queries share their
    dimensions, and building a display hierarchy is a good part of answering one."""
    kept = _RESOLVED.setdefault(data, {})
    key = (dim, limits.max_groups)
    try:
        out = kept.get(key)
    except TypeError:  # codes that are not hashable: the resolution says what is wrong with them
        return _resolve_dim(dim, data.variables[dim.variable], limits)
    if out is None:
        out = _resolve_dim(dim, data.variables[dim.variable], limits)
        out.lut.flags.writeable = False  # shared by every query that has this dimension
        if len(kept) >= _RESOLVED_MAX:
            kept.clear()
        kept[key] = out
    return out


def _area(data: Prepared, area: Sequence[str] | None, limits: Any
          ) -> tuple[tuple[tuple[int, int], ...], tuple[str, ...] | None, np.ndarray | None]:
    """The runs of records of a user-defined area (records are sorted by building block)."""
    if area is None:
        return ((0, data.n),), None, None
    if data.geography is None:
        raise InputError("this data set has no geography: areas cannot be defined")
    if not area:
        raise InputError("an empty area: name at least one building block")
    if len(area) > limits.max_area_blocks:
        raise TooLargeError(f"an area has at most {limits.max_area_blocks:,} building blocks; got {len(area):,}")
    var = data.variables[data.geography]
    h = var.hierarchy
    codes = {_code(var, c, "area") for c in area}
    if h.total in codes:
        raise InputError(f"the area {h.total!r} is the whole population: leave the area out instead")
    # a block inside another block of the area adds nothing: keep the outermost
    kept = tuple(sorted((c for c in codes if not any(a in codes for a in h.ancestors(c)[1:])),
                        key=h.position.__getitem__))
    leaves = np.unique(np.concatenate([var.leaves_below[c] for c in kept]))
    inside = np.zeros(len(h.leaves), dtype=bool)
    inside[leaves] = True
    if data.blocks is None:
        # records not prepared (an engine counts them, tabsafe.service.planned): no runs
        return (), kept, inside
    starts, stops = data.blocks[leaves], data.blocks[leaves + 1]
    runs: list[list[int]] = []
    for s, e in zip(starts.tolist(), stops.tolist()):
        if e <= s:
            continue
        if runs and runs[-1][1] == s:
            runs[-1][1] = e
        else:
            runs.append([s, e])
    return tuple((s, e) for s, e in runs), kept, inside


def _leaf_codes(var: Variable, values: Sequence[_filter.Value]) -> tuple[str, ...]:
    """The leaf codes the values name: a code of any level of the hierarchy names the leaves
    below it; an unquoted number names the code it equals (7 and 7.0 name "7"); anything
    else is an error naming the value (the catalogue's codes are known)."""
    out: list[str] = []
    for v in values:
        text = v.text
        if text not in var.hierarchy.position and not v.quoted and v.number is not None:
            x = v.number
            text = str(int(x)) if x.is_integer() else text
        if text not in var.hierarchy.position:
            raise InputError(f"filter: {v.text!r} is not a code of {var.name!r}")
        out.extend(var.hierarchy.leaves[i] for i in var.leaves_below[text].tolist())
    return tuple(dict.fromkeys(out))


def on_leaves(var: Variable, test: _filter.Test) -> _filter.Test:
    """A test of a categorical variable with its codes as the leaf codes they name
    (:func:`_leaf_codes`): the filter the records' leaf codes are tested by. Orderings stay:
    they compare the leaf codes that are numbers (:mod:`tabsafe.model.filter`, "Meaning")."""
    if isinstance(test, _filter.Compare) and test.op not in {"=", "!="}:
        return test
    values = test.values if isinstance(test, _filter.In) else (test.value,)
    negate = test.negate if isinstance(test, _filter.In) else test.op == "!="
    codes = _leaf_codes(var, values)
    return _filter.In(test.variable, tuple(_filter.Value(c, quoted=True) for c in codes), negate=negate)


@dataclass(frozen=True, eq=False)
class _Lut:
    """A part of a filter that depends on one categorical variable only: per leaf code, whether
    it is true. Parts on the same variable combine into one table before any record is read."""

    variable: str
    lut: np.ndarray


_Part = Any  # _Lut, or a function of a selection of records -> boolean mask


def _lookup(lut: np.ndarray, codes: np.ndarray) -> Callable[[Any], np.ndarray]:
    """``lut[codes[sel]]`` as a function of a selection; a table true on one run of codes (an
    ordering such as ``age_year >= 40``) is compared instead, with no gather per record."""
    true = np.flatnonzero(lut)
    if true.size and int(true[-1]) - int(true[0]) + 1 == true.size:
        lo, hi = int(true[0]), int(true[-1])
        if lo == 0:
            return lambda sel: codes[sel] <= hi
        if hi == lut.size - 1:
            return lambda sel: codes[sel] >= lo

        def between(sel: Any) -> np.ndarray:
            c = codes[sel]
            return (c >= lo) & (c <= hi)
        return between
    return lambda sel: np.take(lut, codes[sel])


def compile_filter(data: Prepared, node: _filter.Filter) -> Callable[[Any], np.ndarray]:
    """The filter as a function of a selection of records (a slice or an index array) → boolean
    mask of the records where it is true, compiled by :func:`tabsafe.model.filter.fold` (the
    one meaning): a test of a categorical variable is evaluated once per leaf code of its
    codelist (no strings are made per record), a numeric variable's test on the records' values
    (NaN: missing, so unknown)."""

    def leaf(test: _filter.Test, negated: bool) -> _Part:
        name = test.variable
        if name in data.variables:
            var = data.variables[name]
            p = _filter.predicate(on_leaves(var, test), "text")
            return _Lut(name, _filter.truth_mask(p, np.asarray(var.hierarchy.leaves, dtype=object), negated))
        if name in data.values:
            p = _filter.predicate(test, "number")
            vals = data.values[name]
            return lambda sel: _filter.truth_mask(p, vals[sel], negated)
        known = ", ".join(list(data.variables) + list(data.values))
        raise InputError(f"filter: unknown variable {name!r}; known: {known}")

    def function(part: _Part) -> Callable[[Any], np.ndarray]:
        if isinstance(part, _Lut):
            return _lookup(part.lut, data.codes[part.variable])
        return part  # type: ignore[no-any-return]

    def combine(both: bool) -> Callable[[list[_Part]], _Part]:
        op = np.logical_and if both else np.logical_or

        def run(parts: list[_Part]) -> _Part:
            luts: dict[str, np.ndarray] = {}
            rest = []
            for p in parts:
                if isinstance(p, _Lut):
                    luts[p.variable] = op(luts[p.variable], p.lut) if p.variable in luts else p.lut
                else:
                    rest.append(p)
            if not rest and len(luts) == 1:
                (name, lut), = luts.items()
                return _Lut(name, lut)
            fns = [function(_Lut(n, lut)) for n, lut in luts.items()] + rest

            def mask(sel: Any) -> np.ndarray:
                out = fns[0](sel)
                for f in fns[1:]:
                    out = op(out, f(sel))
                return out
            return mask
        return run

    return function(_filter.fold(node, leaf, combine(True), combine(False)))


#: compiled filters kept per data set, by their text (many queries share a filter, and the
#: defence resolves each answered query again)
_FILTERS: weakref.WeakKeyDictionary[Any, dict[str, tuple[_filter.Filter, Callable[[Any], np.ndarray], str]]] = (
    weakref.WeakKeyDictionary())


def _compiled(data: Prepared, text: str) -> tuple[_filter.Filter, Callable[[Any], np.ndarray], str]:
    """A filter parsed, compiled (:func:`compile_filter`) and in canonical text, kept."""
    kept = _FILTERS.setdefault(data, {})
    hit = kept.get(text)
    if hit is not None:
        return hit
    try:
        node = _filter.parse(text)
    except RecursionError:  # pragma: no cover - the depth limit comes first
        raise InputError("filter: brackets nest too deeply") from None
    out = (node, compile_filter(data, node), node.to_text())
    if len(kept) >= _RESOLVED_MAX:
        kept.clear()
    kept[text] = out
    return out


def _depth(text: str) -> int:
    """The deepest nesting of brackets in a filter (outside quoted strings): the parser recurses
    once per level, so the depth is limited before it runs."""
    depth = deepest = 0
    quote = None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth = max(0, depth - 1)
    return deepest


def resolve(query: Query, data: Prepared, limits: Any) -> Resolved:
    """Check a query against the catalogue (module docstring); every error names what is wrong."""
    if not query.dimensions:
        raise InputError("a table needs at least one variable in 'dimensions'")
    names = [d.variable for d in query.dimensions]
    for name in names:
        if name not in data.variables:
            known = ", ".join(data.variables)
            raise InputError(f"unknown variable {name!r}; the catalogue has: {known}")
    if len(set(names)) != len(names):
        dup = next(v for i, v in enumerate(names) if v in names[:i])
        raise InputError(f"variable {dup!r} is given twice in 'dimensions'")
    ranges, area, inside = _area(data, query.area, limits)
    dims = tuple(_resolve_dim(d, data.variables[d.variable], limits, inside) if inside is not None
                 and d.variable == data.geography else _resolved_dim(d, data, limits) for d in query.dimensions)
    grid = 1
    for d in dims:
        grid *= len(d.display)
    if grid > limits.max_grid_cells:
        raise TooLargeError(f"the table would have {grid:,} cells, more than the service computes "
                            f"({limits.max_grid_cells:,})")
    mask = None
    where = None
    node = None
    if query.where is not None:
        if len(query.where) > limits.max_filter_length:
            raise TooLargeError(f"a filter has at most {limits.max_filter_length:,} characters")
        depth = _depth(query.where)
        if depth > limits.max_filter_depth:
            raise InputError(f"filter: brackets nest at most {limits.max_filter_depth} deep; got {depth}")
        node, mask, where = _compiled(data, query.where)
    if query.measure not in MEASURES:
        raise InputError(f"'measure' must be one of {', '.join(MEASURES)}; got {query.measure!r}")
    numeric = None
    if query.measure == "count":
        if query.variable is not None:
            raise InputError("'variable' is for measure 'sum' or 'mean', not 'count'")
    else:
        if query.variable not in data.numeric:
            known = ", ".join(data.numeric) or "none"
            raise InputError(f"measure {query.measure!r} needs a numeric 'variable'; numeric variables: {known}")
        numeric = query.variable
    canonical = Query(dimensions=tuple(d.spec for d in dims), area=area, where=where, measure=query.measure,
                      variable=numeric)
    label = None
    if area is not None:
        label = area[0] if len(area) == 1 else f"{area[0]} + {len(area) - 1} more"
    return Resolved(canonical, dims, ranges, label, mask, numeric, grid, node)
