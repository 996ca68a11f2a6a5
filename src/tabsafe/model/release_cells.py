"""The cells of a release: the union of its tables' cells and relations, shared cells once.

Two cells of different tables are the same cell when they count the same population. A cell is
a box: per *concept* (a variable, or a group of variables whose codes name the same populations,
``same_codes``) the set of finest codes it covers, intersected with the table's filter where the
filter is such a box (``var in (codes)``, ``var = code``, ``and``); a filter of any other form
makes the table's cells a population of their own, shared only with tables of the same filter.

The finest codes of a concept (its *atoms*) are the codes that are a leaf in every hierarchy the
release gives its variables; every other code stands for the atoms below it. Two hierarchies
of one variable may group the same leaves differently (alternative, non-nested hierarchies: area
by region and area by urban/rural); a code that is an aggregate in two hierarchies must stand
for the same atoms in both, and every hierarchy must cover every atom.

The relations of a release are every table's additive relations (every hierarchy level, along
every variable) on these cells; an intruder who sees all the tables knows all of them, and a
shared cell is one unknown. (An intruder may also reason about a non-negative table of all the
release's variables at once — tau-ARGUS' "cover table"; that knowledge goes beyond the union of
the relations for three or more tables whose variables form a cycle, and is not modelled here:
see :mod:`tabsafe.protect.suppression.linked`.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp

from tabsafe.errors import InputError
from tabsafe.model.filter import And, Compare, Filter, In, coerce
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.table import Table, cell_name

__all__ = ["Concept", "ReleaseCells"]


@dataclass(frozen=True, eq=False)
class Concept:
    """The populations the codes of one concept stand for (module docstring).

    Attributes:
        name: the concept (its first variable).
        variables: the variables whose codes it gives meaning to.
        atoms: the finest codes.
        sets: per set id, the atoms (indices) it covers; id 0 is the whole population.
        code_set: per code (any hierarchy, totals included), its set id.
    """

    name: str
    variables: tuple[str, ...]
    atoms: tuple[str, ...]
    sets: list[frozenset[int]]
    code_set: dict[str, int]
    _ids: dict[frozenset[int], int]

    @classmethod
    def build(cls, name: str, variables: Sequence[str], hierarchies: Sequence[Hierarchy]) -> Concept:
        inner: dict[str, list[tuple[Hierarchy, tuple[str, ...]]]] = {}
        codes: list[str] = []
        seen: set[str] = set()
        totals = {h.total for h in hierarchies}
        for h in hierarchies:
            for code in h.order:
                if code == h.total:
                    continue
                if code in totals:
                    raise InputError(f"variable {name!r}: code {code!r} is a total in one hierarchy and not in another")
                if code not in seen:
                    seen.add(code)
                    codes.append(code)
                if not h.is_leaf(code):
                    inner.setdefault(code, []).append((h, h.children(code)))
        atoms = tuple(c for c in codes if c not in inner)
        index = {a: i for i, a in enumerate(atoms)}
        memo: dict[str, frozenset[int]] = {}

        def cover(code: str) -> frozenset[int]:
            if code in memo:
                return memo[code]
            if code in index:
                out = frozenset([index[code]])
            else:
                versions = [frozenset().union(*(cover(k) for k in kids)) for _, kids in inner[code]]
                if any(v != versions[0] for v in versions[1:]):
                    raise InputError(f"variable {name!r}: code {code!r} groups other codes in "
                                     f"{inner[code][0][0].source} than in another hierarchy")
                out = versions[0]
            memo[code] = out
            return out

        universe = frozenset(range(len(atoms)))
        sets: list[frozenset[int]] = [universe]
        ids: dict[frozenset[int], int] = {universe: 0}
        code_set: dict[str, int] = {}
        for h in hierarchies:
            top = frozenset().union(*(cover(k) for k in h.children(h.total)))
            if top != universe:
                missing = atoms[min(universe - top)]
                raise InputError(f"variable {name!r}: hierarchy {h.source} does not cover code {missing!r}, which "
                                 "another hierarchy of the release has")
            code_set[h.total] = 0
        for code in codes:
            s = cover(code)
            if s not in ids:
                ids[s] = len(sets)
                sets.append(s)
            code_set[code] = ids[s]
        return cls(name, tuple(variables), atoms, sets, code_set, ids)

    def intern(self, atoms: frozenset[int]) -> int:
        """The id of a set of atoms (made if new)."""
        if atoms not in self._ids:
            self._ids[atoms] = len(self.sets)
            self.sets.append(atoms)
        return self._ids[atoms]

    def intersect(self, a: np.ndarray, b: int) -> np.ndarray:
        """Set ids ``a`` intersected with set ``b``."""
        if b == 0:
            return a
        uniq, inv = np.unique(a, return_inverse=True)
        out = np.array([self.intern(self.sets[u] & self.sets[b]) for u in uniq.tolist()], dtype=np.int64)
        return out[inv]


def _restriction(where: Filter | None, concepts: Mapping[str, Concept]) -> tuple[dict[str, int], str]:
    """A filter as a box (per concept, the set it keeps) when it is one; else the filter's text as
    an opaque population of its own."""
    if where is None:
        return {}, ""
    parts = where.parts if isinstance(where, And) else (where,)
    box: dict[str, int] = {}
    for part in parts:
        if isinstance(part, In):
            var, values, negate = part.variable, [v.text for v in part.values], part.negate
        elif isinstance(part, Compare) and part.op in {"=", "!="}:
            var, values, negate = part.variable, [part.value.text], part.op == "!="
        else:
            return {}, where.to_text()
        concept = concepts.get(var)
        if concept is None or any(v not in concept.code_set for v in values):
            return {}, where.to_text()
        chosen = frozenset().union(*(concept.sets[concept.code_set[v]] for v in values))
        if negate:
            chosen = concept.sets[0] - chosen
        previous = concept.sets[box[concept.name]] if concept.name in box else concept.sets[0]
        box[concept.name] = concept.intern(previous & chosen)
    return box, ""


@dataclass(frozen=True, eq=False)
class ReleaseCells:
    """The cells of a release (module docstring).

    Attributes:
        names: the tables' names.
        tables: the tables, dense (every grid cell stored).
        cells: per table, the release cell of each of its grid cells.
        n_cells: how many distinct cells the release has.
        relations: sparse ``A`` over the release cells, one row per distinct relation (+1 the
            aggregate, −1 each child).
        concepts: the concepts the cells are boxes of.
        boxes: per table, the set each concept is restricted to by the table's filter (concept
            name → set id; empty without a filter).
        opaque: per table, the text of a filter that is not a box ("" otherwise).
        finest: the cross-classification of every variable of the release, or a function that
            tabulates it when first asked (:mod:`tabsafe.model.finest`); None when not given.
    """

    names: tuple[str, ...]
    tables: tuple[Table, ...]
    cells: tuple[np.ndarray, ...]
    n_cells: int
    relations: sp.csr_matrix
    concepts: tuple[Concept, ...]
    boxes: tuple[dict[str, int], ...] = ()
    opaque: tuple[str, ...] = ()
    finest: Any = None

    @classmethod
    def build(cls, tables: Sequence[Table], *, names: Sequence[str] | None = None,
              wheres: Sequence[Filter | str | None] | None = None,
              same_codes: Sequence[Sequence[str]] = ()) -> ReleaseCells:
        """The union of ``tables`` (each with its filter) as one set of cells."""
        dense = tuple(t.densify() for t in tables)
        names = tuple(names) if names is not None else tuple(f"table {i + 1}" for i in range(len(dense)))
        wheres = tuple(coerce(w) for w in wheres) if wheres is not None else (None,) * len(dense)
        if not dense or len(names) != len(dense) or len(wheres) != len(dense):
            raise InputError("a release needs its tables, one name and one filter each")
        group_of: dict[str, str] = {}
        for g in same_codes:
            for v in g:
                group_of[v] = g[0]
        hierarchies: dict[str, list[Hierarchy]] = {}
        members: dict[str, list[str]] = {}
        for t in dense:
            for d in t.dimensions:
                c = group_of.get(d.variable, d.variable)
                hs = hierarchies.setdefault(c, [])
                if all(d.hierarchy != h for h in hs):
                    hs.append(d.hierarchy)
                if d.variable not in members.setdefault(c, []):
                    members[c].append(d.variable)
        concepts = {c: Concept.build(c, members[c], hs) for c, hs in hierarchies.items()}
        by_variable = {v: concepts[c] for c in concepts for v in members[c]}
        order = sorted(concepts)
        opaque: dict[str, int] = {"": 0}
        keys = []
        boxes, texts = [], []
        for t, where in zip(dense, wheres):
            box, text = _restriction(where, by_variable)
            boxes.append(box)
            texts.append(text)
            cols = {c: np.zeros(t.n_cells, dtype=np.int64) for c in order}
            for axis, d in enumerate(t.dimensions):
                concept = by_variable[d.variable]
                per_code = np.array([concept.code_set[code] for code in d.hierarchy.order], dtype=np.int64)
                ids = per_code[t.positions(axis).astype(np.int64)]
                prev = cols[concept.name]
                if prev.any():  # two variables of one concept in a table: the cell is both
                    ids = np.array([concept.intern(concept.sets[a] & concept.sets[b])
                                    for a, b in zip(prev.tolist(), ids.tolist())], dtype=np.int64)
                cols[concept.name] = ids
            for c, s in box.items():
                cols[c] = concepts[c].intersect(cols[c], s)
            tag = opaque.setdefault(text, len(opaque))
            keys.append(np.column_stack([*(cols[c] for c in order), np.full(t.n_cells, tag, dtype=np.int64)]))
        _, inverse = np.unique(np.concatenate(keys), axis=0, return_inverse=True)
        inverse = inverse.ravel()
        n_cells = int(inverse.max()) + 1 if inverse.size else 0
        offsets = np.cumsum([0] + [t.n_cells for t in dense])
        cells = tuple(inverse[offsets[i]:offsets[i + 1]] for i in range(len(dense)))
        return cls(names, dense, cells, n_cells, _relations(dense, cells, n_cells), tuple(concepts[c] for c in order),
                   tuple(boxes), tuple(texts))

    def subset(self, tables: Sequence[int]) -> tuple[ReleaseCells, np.ndarray]:
        """The release of the tables numbered ``tables`` alone, and for each of its cells the cell
        of this release it is (their relations are those tables' relations only)."""
        held = np.unique(np.concatenate([self.cells[i] for i in tables]))
        renumber = np.full(self.n_cells, -1, dtype=np.int64)
        renumber[held] = np.arange(held.size)
        dense = tuple(self.tables[i] for i in tables)
        cells = tuple(renumber[self.cells[i]] for i in tables)
        pick = (lambda xs: tuple(xs[i] for i in tables) if xs else xs)
        sub = ReleaseCells(tuple(self.names[i] for i in tables), dense, cells, int(held.size),
                           _relations(dense, cells, int(held.size)), self.concepts, pick(self.boxes),
                           pick(self.opaque))
        return sub, held

    # ------------------------------------------------------------------ per cell
    def combine(self, column: str = "count") -> np.ndarray:
        """One value per release cell from the tables' ``column``; a cell the tables give different
        values is an error (they are not of one data set, or ``same_codes`` is wrong)."""
        out = np.full(self.n_cells, np.nan)
        for name, t, rows in zip(self.names, self.tables, self.cells):
            vals = np.asarray(t.column(column), dtype=np.float64)
            known = ~np.isnan(out[rows]) & ~np.isnan(vals)
            clash = known & (out[rows] != vals)
            if clash.any():
                g = int(np.flatnonzero(clash)[0])
                raise InputError(f"table {name!r}: cell {self.grid_name(self.names.index(name), g)} has {column} "
                                 f"{vals[g]:g} and another table {out[rows[g]]:g} for the same population")
            fill = np.isnan(out[rows])
            out[rows[fill]] = vals[fill]
        return out

    @cached_property
    def leaf(self) -> np.ndarray:
        """Release cells that are inner cells of some table."""
        out = np.zeros(self.n_cells, dtype=bool)
        for t, rows in zip(self.tables, self.cells):
            out[rows[np.asarray(t.leaf_mask)]] = True
        return out

    @cached_property
    def first(self) -> tuple[np.ndarray, np.ndarray]:
        """Per release cell, the first table that has it and its grid id there."""
        table = np.full(self.n_cells, -1, dtype=np.int64)
        grid = np.zeros(self.n_cells, dtype=np.int64)
        for i in reversed(range(len(self.tables))):
            table[self.cells[i]] = i
            grid[self.cells[i]] = np.arange(self.cells[i].size)
        return table, grid

    def grid_name(self, table: int, cell: int) -> str:
        return cell_name(self.tables[table], cell)

    def name(self, cell: int) -> str:
        """``area_age_sex (area=A1, age=Total, sex=2)``: the first table holding the cell."""
        t, g = self.first
        i = int(t[cell])
        return f"{self.names[i]} {self.grid_name(i, int(g[cell]))}"

    def shared(self) -> np.ndarray:
        """How many tables hold each release cell."""
        out = np.zeros(self.n_cells, dtype=np.int64)
        for rows in self.cells:
            out[np.unique(rows)] += 1
        return out


def _relations(tables: Sequence[Table], cells: Sequence[np.ndarray], n_cells: int) -> sp.csr_matrix:
    """Every table's relations on the release cells, each distinct relation once."""
    blocks = []
    for t, rows in zip(tables, cells):
        A = sp.coo_matrix(t.additivity())
        blocks.append(sp.csr_matrix((A.data, (A.row, rows[A.col])), shape=(A.shape[0], n_cells)))
    if not blocks:
        return sp.csr_matrix((0, n_cells))
    A = sp.csr_matrix(sp.vstack(blocks, format="csr"))
    A.sum_duplicates()
    A.eliminate_zeros()
    A = A[np.diff(A.indptr) > 0]
    if A.shape[0] == 0:
        return sp.csr_matrix((0, n_cells))
    # the same relation from two tables (a shared margin's) once: rows told apart by two
    # random projections and their size
    rng = np.random.default_rng(0)
    w1, w2 = rng.random(n_cells), rng.random(n_cells)
    h1, h2 = A @ w1, A @ w2
    sign = np.sign(A.data[A.indptr[:-1]])  # a relation and its negation are one
    key = np.column_stack([np.round(h1 * sign, 9), np.round(h2 * sign, 9), np.diff(A.indptr)])
    _, keep = np.unique(key, axis=0, return_index=True)
    return sp.csr_matrix(A[np.sort(keep)])
