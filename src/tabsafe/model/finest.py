"""A release protected from its finest cells (issue #31): every cell of every table is the sum of
the same perturbed cells, so a cell the tables share has one value and every table is additive.

The cell perturbation family (barnardisation, 000 §5.3; the ABS cell perturbation, 001 §4 and
§8; the stochastic perturbation, 002 §3.2.2; small cell adjustment, 000 §5.5) perturbs a table's
inner cells and adds them up for its margins. Table by table, a margin two tables share is the sum
of two different sets of perturbed cells and comes out twice, differently: an intruder averages
the copies. Perturbing each release cell once instead would break additivity. What keeps both is
to perturb the *finest cells of the release* once and add them up for every table.

The finest cells are the cells of the cross-classification of every variable of the release at
its finest codes (per concept of :mod:`tabsafe.model.release_cells`, its atoms): the "cover table" of
tau-ARGUS' linked tables. Every cell of every table is a sum of them (a table's filter, when it
is a box of the release's variables, selects some). What is possible depends on the tables:

* **nested tables** — one table spans every concept at its finest codes without a filter
  (area × age × sex beside area × age): its inner cells are the finest cells; the method
  perturbs them as it would that table alone, and the other tables are its sums. Every
  published cell of that table has the method's distribution (``published_distribution``).
* **different finest levels** — area × age × sex, area × age × citizenship, area × sex ×
  citizenship: no table holds the finest cells (area × age × sex × citizenship), and the
  published tables do not determine them. They are tabulated from the data (``protect
  --release`` does it, only when a method asks; :func:`tabsafe.release.protect_release`'s
  ``finest``), perturbed once, never published, and every table's cells are their sums. A
  published inner cell is then the sum of the perturbed finest cells under it: its noise is the
  method's on each of them — for the ABS perturbation of cells up to ``x`` records exactly the
  method's distribution (its deviations are per record), for barnardisation one ±1 per non-empty
  finest cell. The report says so.

Tables whose filter is not a box of the release's variables (``activity = EMP`` in a release
that does not span activity) count a population of their own that the finest cells do not
split: such a release is refused with one line (protect those tables as a release of their own).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from tabsafe.errors import InputError
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.table import Table

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.method import TableMethod
    from tabsafe.model.result import Protection, Report
    from tabsafe.model.release_cells import Concept, ReleaseCells

__all__ = ["MAX_COVER_CELLS", "aggregate", "cover_matrix", "cover_spec", "finest_table", "protect_finest",
           "protections_of"]


def _atom_variable(concept: Concept, cells: ReleaseCells) -> str:
    """The variable of ``concept`` whose codes are its atoms (some table's hierarchy of it has
    exactly the atoms as leaves)."""
    atoms = set(concept.atoms)
    for t in cells.tables:
        for d in t.dimensions:
            if d.variable in concept.variables and set(d.hierarchy.leaves) == atoms:
                return d.variable
    raise InputError(f"variable {concept.name!r}: no table of the release has its finest codes as leaves, so its "
                     "finest cells cannot be tabulated (give a hierarchy whose leaves are the finest codes)")


def cover_spec(cells: ReleaseCells) -> tuple[tuple[str, ...], dict[str, Hierarchy]]:
    """The variables and (flat) hierarchies of the finest cells: one variable per concept, its
    atoms as codes."""
    by, hierarchies = [], {}
    for c in cells.concepts:
        v = _atom_variable(c, cells)
        by.append(v)
        hierarchies[v] = Hierarchy.flat(c.atoms, source=f"the finest codes of {c.name!r}")
    return tuple(by), hierarchies


def _nested(cells: ReleaseCells) -> Table | None:
    """A table of the release whose inner cells are the finest cells, if one is."""
    for i, t in enumerate(cells.tables):
        if cells.boxes and (cells.boxes[i] or cells.opaque[i]):
            continue
        try:
            _atoms_of(t, cells)
        except InputError:
            continue
        return t
    return None


def finest_table(cells: ReleaseCells) -> Table:
    """The finest cells of the release (module docstring): a nested table's, the ones given, or
    tabulated by the function given; one line when none is available."""
    opaque = [n for n, text in zip(cells.names, cells.opaque) if text]
    if opaque:
        raise InputError(f"table {opaque[0]!r} has a filter that is not a box of the release's variables "
                         f"({cells.opaque[cells.names.index(opaque[0])]}): its cells are not sums of the release's "
                         "finest cells; protect it as a release of its own")
    nested = _nested(cells)
    if nested is not None:
        return nested
    given = cells.finest() if callable(cells.finest) else cells.finest
    if given is None:
        by, _ = cover_spec(cells)
        raise InputError("the tables of the release have different finest levels: this method perturbs the cells "
                         f"of {' × '.join(by)} once and adds them up for every table; give them (the microdata, "
                         "or finest= to protect_release)")
    if not isinstance(given, Table):
        raise TypeError(f"the finest cells must be a Table; got {type(given).__name__}")
    _atoms_of(given, cells)
    return given


def _atoms_of(table: Table, cells: ReleaseCells) -> list[tuple[int, np.ndarray]]:
    """Per concept (in ``cells.concepts`` order), the axis of ``table`` that spans it and, per
    code position of that axis, its atom (-1 for the total and subtotals); an error when the
    table is not a cross-classification of every concept at its finest codes."""
    out = []
    axes_used: set[int] = set()
    for c in cells.concepts:
        axes = [ax for ax, d in enumerate(table.dimensions) if d.variable in c.variables]
        if len(axes) != 1:
            raise InputError(f"the finest cells need one variable of {c.name!r}; they have {len(axes)}")
        ax = axes[0]
        h = table.dimensions[ax].hierarchy
        index = {a: k for k, a in enumerate(c.atoms)}
        if set(h.leaves) != set(index):
            raise InputError(f"the finest cells' codes of {table.dimensions[ax].variable!r} are not the release's "
                             "finest codes")
        atom = np.array([index.get(code, -1) if h.is_leaf(code) else -1 for code in h.order], dtype=np.int64)
        out.append((ax, atom))
        axes_used.add(ax)
    if len(axes_used) != len(table.dimensions):
        extra = [d.variable for ax, d in enumerate(table.dimensions) if ax not in axes_used]
        raise InputError(f"the finest cells span {', '.join(extra)}, which no table of the release spans")
    return out


def aggregate(cells: ReleaseCells, cover: Table, column: str = "count") -> np.ndarray:
    """Per release cell, the sum of ``column`` over the inner cells of ``cover`` (the finest
    cells) it covers: every table's cells from the same finest cells, margins and subtotals of
    every hierarchy included (000 §5.3: "table totals are added up from the perturbed internal
    cells")."""
    from tabsafe.model.margins import rollup

    atoms = _atoms_of(cover, cells)
    leaf = np.asarray(cover.leaf_mask)
    values = np.asarray(cover.column(column))[leaf]
    atom_ids = [a[cover.positions(ax)[leaf].astype(np.int64)] for ax, a in atoms]
    out = np.zeros(cells.n_cells, dtype=np.int64 if values.dtype.kind in "iub" else np.float64)
    for i, t in enumerate(cells.tables):
        keep = np.ones(values.size, dtype=bool)
        box = cells.boxes[i] if cells.boxes else {}
        ids = np.zeros(values.size, dtype=np.int64)
        for k, c in enumerate(cells.concepts):
            if c.name in box:
                inside = np.zeros(len(c.atoms), dtype=bool)
                inside[list(c.sets[box[c.name]])] = True
                keep &= inside[atom_ids[k]]
        for ax, d in enumerate(t.dimensions):
            c = next(k for k, con in enumerate(cells.concepts) if d.variable in con.variables)
            h = d.hierarchy
            leaf_pos = np.full(len(cells.concepts[c].atoms), -1, dtype=np.int64)
            for code in h.leaves:
                leaf_pos[list(cells.concepts[c].sets[cells.concepts[c].code_set[code]])] = h.position[code]
            ids += leaf_pos[atom_ids[c]] * int(t.strides[ax])
        grid_ids, sums = rollup(t.dimensions, ids[keep], values[keep])
        full = np.zeros(t.n_cells, dtype=out.dtype)
        full[grid_ids] = sums  # the release's tables are dense: a grid id is a row
        out[cells.cells[i]] = full
    return out


def protections_of(cells: ReleaseCells, values: np.ndarray, report: Report,
                   extra: dict[str, np.ndarray] | None = None) -> tuple[Protection, ...]:
    """One protection per table from one published value per release cell (``extra``: more
    published columns, one value per release cell)."""
    from tabsafe.model.table import thaw
    from tabsafe.model.result import Protection, Release

    out = []
    for dense, rows in zip(cells.tables, cells.cells):
        meta = thaw(dense.meta)
        columns = {"count": values[rows], **{k: v[rows] for k, v in (extra or {}).items()}}
        release = Table(dense.dimensions, dense.ids, columns, meta)
        ev = {"count": dense.counts, "original": dense.counts}
        out.append(Protection(release=Release(release), evaluation=Table(dense.dimensions, dense.ids, ev, meta),
                              report=report))
    return tuple(out)


def protect_finest(method: TableMethod, cells: ReleaseCells, *,
                   seed: int | None = None) -> tuple[tuple[Protection, ...], Report]:
    """Protect a release with a method of the cell perturbation family (module docstring): the
    method protects the finest cells as one table; every release cell is the sum of their
    published values."""
    from tabsafe.model.result import Report

    cover = finest_table(cells)
    inner = method.protect(cover, seed=seed)
    published = inner.release.table
    values = aggregate(cells, published)
    nested = any(cover is t for t in cells.tables)
    by = " × ".join(d.variable for d in cover.dimensions)
    how = (f"every table is a sum of the inner cells of {cells.names[[t is cover for t in cells.tables].index(True)]!r}"
           if nested else f"every table's cells are sums of the finest cells ({by}), perturbed once and never "
                          "published: a published inner cell carries the noise of each finest cell under it")
    figures = {**dict(inner.report.figures), "tables": len(cells.tables), "cells": cells.n_cells,
               "shared_cells": int((cells.shared() > 1).sum()),
               "finest_cells": int(np.count_nonzero(np.asarray(cover.leaf_mask) & (np.asarray(cover.counts) != 0)))}
    notes = (*inner.report.notes, f"{how}: a cell the tables share has one value, and every table is additive")
    report = Report(method=method.name, params=method.params(), seed=inner.report.seed, figures=figures,
                    private=dict(inner.report.private), notes=tuple(dict.fromkeys(notes)))
    return protections_of(cells, values, report), report



#: The most finest cells :func:`cover_matrix` builds (the whole grid of the finest codes).
MAX_COVER_CELLS = 2_000_000


def cover_matrix(cells: ReleaseCells) -> sp.csr_matrix:
    """Which finest cells each release cell adds up: ``M[c, j] = 1`` when finest cell ``j`` (the
    whole grid of every concept's atoms, in C order of ``cells.concepts``) lies in release cell
    ``c``. Any non-negative integers ``x`` on the finest cells give ``M·x``, an additive release
    whose shared cells agree (issue #31: what additivity over a release searches)."""
    import itertools

    from tabsafe.model.margins import ancestors

    opaque = [n for n, text in zip(cells.names, cells.opaque) if text]
    if opaque:
        raise InputError(f"table {opaque[0]!r} has a filter that is not a box of the release's variables: its "
                         "cells are not sums of the release's finest cells; restore it as a release of its own")
    sizes = [len(c.atoms) for c in cells.concepts]
    n = int(np.prod(sizes, dtype=np.int64))
    if n > MAX_COVER_CELLS:
        raise InputError(f"the finest cells of the release ({' × '.join(map(str, sizes))} = {n:,}) are more than "
                         f"{MAX_COVER_CELLS:,}: restore additivity table by table")
    atom = np.array(list(itertools.product(*(range(s) for s in sizes))), dtype=np.int64).reshape(n, len(sizes))
    rows, cols = [], []
    for i, t in enumerate(cells.tables):
        box = cells.boxes[i] if cells.boxes else {}
        keep = np.ones(n, dtype=bool)
        ids = np.zeros(n, dtype=np.int64)
        for k, c in enumerate(cells.concepts):
            if c.name in box:
                inside = np.zeros(len(c.atoms), dtype=bool)
                inside[list(c.sets[box[c.name]])] = True
                keep &= inside[atom[:, k]]
        for ax, d in enumerate(t.dimensions):
            k = next(j for j, con in enumerate(cells.concepts) if d.variable in con.variables)
            c = cells.concepts[k]
            leaf_pos = np.full(len(c.atoms), -1, dtype=np.int64)
            for code in d.hierarchy.leaves:
                leaf_pos[list(c.sets[c.code_set[code]])] = d.hierarchy.position[code]
            ids += leaf_pos[atom[:, k]] * int(t.strides[ax])
        src = np.flatnonzero(keep)
        up, of = ancestors(t.dimensions, ids[src])
        rows.append(cells.cells[i][np.concatenate([ids[src], up])])
        cols.append(np.concatenate([src, src[of]]))
    r, c = np.concatenate(rows), np.concatenate(cols)
    M = sp.csr_matrix((np.ones(r.size), (r, c)), shape=(cells.n_cells, n))
    M.data[:] = 1.0  # a cell two tables share lists each finest cell twice: once
    return M
