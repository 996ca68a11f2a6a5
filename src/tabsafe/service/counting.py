"""Counting a query's table from the prepared records: counts, exact cell keys and fixed-point
magnitude sums per cell, margins and subtotals added up (:mod:`tabsafe.service.prepared`).

The records selected by a query are counted into its inner categories with ``numpy.bincount``;
whole-population tables are sums over kept cubes (counted once per data set, memory-mapped,
shared by every server process), and so are the contributions the magnitude rules read (the two
largest and the exact total per cell, :mod:`tabsafe.service.magnitudes`). :class:`Counting` is the part of the builder that reads records;
it publishes nothing.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.table import Dimension, Table
from tabsafe.service.magnitudes import abs_fixed, contributions, in_units, to_display, top2_over, unit_contributions
from tabsafe.service.prepared import SPLIT
from tabsafe.service.query import Resolved

#: above this many runs of records, an area is gathered into one index array first
MAX_RUNS = 24
#: the largest cube of leaf codes kept for whole-population tables, and all of them together
LEAF_CUBE_CELLS = 1_500_000
#: variables with at most this many codes are always counted by leaf code (one kept cube serves
#: every level); larger ones (a geography of thousands of blocks) by the level shown
SMALL_CODELIST = 256
#: the grouped records (:meth:`Builder._micro`) keep each variable at its finest level of at most
#: this many categories
MICRO_UNITS = 128
#: changes whenever kept cubes are laid out or counted differently (old ones are then ignored)
CUBE_FORMAT = 1


class _LRU:
    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self.total = 0
        self.lock = threading.Lock()

    def get(self, key: str) -> Any:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key][0]
        return None

    def put(self, key: str, value: Any, cells: int = 1) -> None:
        """Keep ``value``; the least recently used go when more than ``size`` cells are kept."""
        if self.size <= 0:
            return
        with self.lock:
            if key in self.items:
                self.total -= self.items[key][1]
            self.items[key] = (value, cells)
            self.total += cells
            self.items.move_to_end(key)
            while self.total > self.size and len(self.items) > 1:
                _, (_, gone) = self.items.popitem(last=False)
                self.total -= gone



def _exact(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """The int64 sums from their two exactly summed float parts (hi * 2**SPLIT + lo)."""
    return np.rint(hi).astype(np.int64) * (1 << SPLIT) + np.rint(lo).astype(np.int64)



class Counting:
    """The counting half of :class:`~tabsafe.service.builder.Builder` (module docstring); needs
    ``self.data`` (prepared records) and ``self._leaf_cubes`` (an :class:`_LRU`)."""

    data: Any
    _leaf_cubes: _LRU
    _micro_cache: Any
    _micro_lock: threading.Lock

    def _selections(self, r: Resolved) -> Iterator[Any]:
        if len(r.ranges) <= MAX_RUNS:
            for s, e in r.ranges:
                yield slice(s, e)
        else:
            yield np.concatenate([np.arange(s, e) for s, e in r.ranges])

    def _count(self, r: Resolved, codes: list[np.ndarray], luts: list[np.ndarray], sizes: list[int],
               whole: bool = False) -> dict[str, np.ndarray]:
        """Counts, exact key sums and exact fixed-point sums of the selected records in the cube of
        ``sizes`` units; ``luts[i]`` maps variable ``i``'s leaf codes to units (-1: left out)."""
        data = self.data
        n = int(np.prod(sizes))
        strides = [int(np.prod(sizes[i + 1:])) for i in range(len(sizes))]
        scaled = [np.where(lut >= 0, lut * s, n).astype(np.intp) for lut, s in zip(luts, strides)]
        width = n + 1  # the last bin collects the records left out
        count = np.zeros(width, dtype=np.int64)
        klo, khi, mlo, mhi = (np.zeros(width) for _ in range(4))
        fixed = data.fixed.get(r.numeric) if r.numeric else None
        selections = [slice(0, data.n)] if whole else self._selections(r)
        for sel in selections:
            idx = scaled[0][codes[0][sel]]
            for lut, c in zip(scaled[1:], codes[1:]):
                idx += lut[c[sel]]
            if r.mask is not None and not whole:
                idx[~r.mask(sel)] = n
            if len(scaled) > 1:
                np.minimum(idx, n, out=idx)
            count += np.bincount(idx, minlength=width)
            klo += np.bincount(idx, weights=data.key_lo[sel], minlength=width)
            khi += np.bincount(idx, weights=data.key_hi[sel], minlength=width)
            if fixed is not None:
                mlo += np.bincount(idx, weights=fixed[0][sel], minlength=width)
                mhi += np.bincount(idx, weights=fixed[1][sel], minlength=width)
        shape = tuple(sizes)
        cubes = {"count": count[:n].reshape(shape), "key": _exact(khi[:n], klo[:n]).reshape(shape)}
        if fixed is not None:
            cubes["fixed"] = _exact(mhi[:n], mlo[:n]).reshape(shape)
        return cubes

    def _cube_of(self, r: Resolved, spec: tuple[tuple[str, int], ...]) -> dict[str, np.ndarray] | None:
        """The whole population's cube over the categories of the given (variable, level) pairs,
        sorted by variable, cached; None when it would be too large to keep."""
        variables = [self.data.variables[n] for n, _ in spec]
        sizes = [len(v.at_level(level)) for v, (_, level) in zip(variables, spec)]
        cells = int(np.prod(sizes))
        if cells > LEAF_CUBE_CELLS:
            return None

        def build() -> dict[str, np.ndarray]:
            cube = self._count_micro(spec, r.numeric, sizes)
            if cube is None:
                luts = [v.units(level)[0] for v, (_, level) in zip(variables, spec)]
                cube = self._count(r, [self.data.codes[n] for n, _ in spec], luts, sizes, whole=True)
            return cube

        return self._kept(f"{spec}|{r.numeric}", cells, build)

    def _kept(self, key: str, cells: int, build: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """The kept cube under ``key``: from memory, else from disk, else built and stored; then
        kept in memory, weighing ``cells``."""
        cube = self._leaf_cubes.get(key)
        if cube is None:
            cube = self._stored_cube(key)
        if cube is None:
            cube = build()
            self._store_cube(key, cube)
        self._leaf_cubes.put(key, cube, cells=cells)
        return cube

    def _micro(self) -> tuple[dict[str, int], dict[str, np.ndarray]]:
        """The records grouped by every variable at its finest level of at most ``MICRO_UNITS``
        categories (a geography by region, everything else by code): each distinct combination
        once, with its count, key sums and magnitude sums. A cube of those variables is then
        counted from ~10^5 combinations instead of every record. Built once, kept on disk."""
        with self._micro_lock:
            if self._micro_cache is not None:
                return self._micro_cache
            data = self.data
            levels: dict[str, int] = {}
            for name, var in data.variables.items():
                fits = [lv for lv in range(var.hierarchy.max_depth, 0, -1) if len(var.at_level(lv)) <= MICRO_UNITS]
                if fits:
                    levels[name] = fits[0]
            key = f"micro|{sorted(levels.items())}|{sorted(data.numeric)}|contributions"
            stored = self._stored_cube(key)
            if stored is None:
                names = sorted(levels)
                sizes = [len(data.variables[n].at_level(levels[n])) for n in names]
                code = np.zeros(data.n, dtype=np.int64)
                for n, size in zip(names, sizes):
                    code *= size
                    code += data.variables[n].units(levels[n])[0][data.codes[n]]
                uniq, inverse = np.unique(code, return_inverse=True)
                stored = {}
                rest = uniq.copy()
                for n, size in reversed(list(zip(names, sizes))):
                    stored[f"code_{n}"] = (rest % size).astype(np.int32)
                    rest //= size
                stored["count"] = np.bincount(inverse, minlength=uniq.size).astype(np.float64)
                stored["key_lo"] = np.bincount(inverse, weights=data.key_lo, minlength=uniq.size)
                stored["key_hi"] = np.bincount(inverse, weights=data.key_hi, minlength=uniq.size)
                for n, (lo, hi) in data.fixed.items():
                    stored[f"lo_{n}"] = np.bincount(inverse, weights=lo, minlength=uniq.size)
                    stored[f"hi_{n}"] = np.bincount(inverse, weights=hi, minlength=uniq.size)
                    # each group's two largest contributions and their total (magnitude rules)
                    parts = unit_contributions(inverse, abs_fixed(data, n, slice(0, data.n)), uniq.size)
                    stored.update({f"{k}_{n}": v for k, v in parts.items()})
                self._store_cube(key, stored)
            self._micro_cache = (levels, stored)
            return self._micro_cache

    def _micro_index(self, spec: tuple[tuple[str, int], ...], sizes: list[int]
                     ) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
        """Each group of records (:meth:`_micro`) → its cell of the cube of ``spec``, when every
        variable of ``spec`` is there at its level or a finer one; else None."""
        levels, micro = self._micro()
        if any(name not in levels or levels[name] < level for name, level in spec):
            return None
        idx = np.zeros(micro["count"].size, dtype=np.intp)
        for (name, level), size in zip(spec, sizes):
            var = self.data.variables[name]
            # each grouped category → its category at the level asked for
            up = var.units(level)[0][var.units(levels[name])[1]]
            idx *= size
            idx += up[micro[f"code_{name}"]]
        return idx, micro

    def _count_micro(self, spec: tuple[tuple[str, int], ...], numeric: str | None,
                     sizes: list[int]) -> dict[str, np.ndarray] | None:
        """A whole-population cube from the grouped records (:meth:`_micro`), when every
        variable of ``spec`` is there at its level or a finer one; else None."""
        found = self._micro_index(spec, sizes)
        if found is None:
            return None
        idx, micro = found
        n = int(np.prod(sizes))

        def total(weights: np.ndarray) -> np.ndarray:
            return np.bincount(idx, weights=weights, minlength=n)

        shape = tuple(sizes)
        cube = {"count": np.rint(total(micro["count"])).astype(np.int64).reshape(shape),
                "key": _exact(total(micro["key_hi"]), total(micro["key_lo"])).reshape(shape)}
        if numeric is not None:
            cube["fixed"] = _exact(total(micro[f"hi_{numeric}"]), total(micro[f"lo_{numeric}"])).reshape(shape)
        return cube

    def _cube_dir(self, key: str) -> Any:
        return self.data.path / "cubes" / hashlib.sha256(f"{CUBE_FORMAT}|{key}".encode()).hexdigest()[:32]

    def _stored_cube(self, key: str) -> dict[str, np.ndarray] | None:
        """A cube another server process (or an earlier run) counted, memory-mapped: counted
        once per data set, shared through the page cache. It lives with the prepared records
        (it holds original counts, as they do)."""
        folder = self._cube_dir(key)
        if not (folder / "count.npy").is_file():
            return None
        try:
            return {f.stem: np.load(f, mmap_mode="r") for f in folder.glob("*.npy")}
        except (OSError, ValueError):
            return None

    def _store_cube(self, key: str, cube: dict[str, np.ndarray]) -> None:
        import os
        import shutil
        import tempfile

        folder = self._cube_dir(key)
        try:
            folder.parent.mkdir(exist_ok=True)
            tmp = tempfile.mkdtemp(prefix=".cube.", dir=folder.parent)
            for name, arr in cube.items():
                np.save(os.path.join(tmp, f"{name}.npy"), arr)
            try:
                os.replace(tmp, folder)
            except OSError:  # another process stored it first: same numbers
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError:
            pass  # a cube that cannot be kept on disk is counted again next time

    def _kept_levels(self, r: Resolved) -> tuple[list[str], dict[str, int]] | None:
        """The variables a kept cube of the query must have, each at its level (its filter's
        variables at their leaf codes), and the filter's variables; None when the query needs a
        pass over the records (an area, a filter on a numeric variable). A variable of a long
        codelist shown at a level is counted by that level's categories, any other by its leaf
        codes."""
        if r.area_label is not None:
            return None
        fvars = list(r.where.variables) if r.where is not None else []
        if any(v not in self.data.variables for v in fvars):
            return None
        levels = {}
        for d in r.dims:
            name = d.variable.name
            deepest = d.variable.hierarchy.max_depth
            fine = d.spec.groups is not None or name in fvars or len(d.variable.hierarchy.leaves) <= SMALL_CODELIST
            levels[name] = deepest if fine else int(d.spec.level or deepest)
        for v in fvars:
            levels.setdefault(v, self.data.variables[v].hierarchy.max_depth)
        return fvars, levels

    def _filter_cube(self, r: Resolved, fvars: list[str], names: tuple[str, ...]) -> np.ndarray:
        """The query's filter evaluated once per combination of its variables' leaf codes, shaped
        to broadcast over a cube of ``names`` (1 on the axes of other variables)."""
        from types import SimpleNamespace

        from tabsafe.service.query import compile_filter

        sizes = [len(self.data.variables[v].hierarchy.leaves) for v in fvars]
        combos = np.indices(sizes).reshape(len(sizes), -1)
        fake = SimpleNamespace(variables=self.data.variables, values={},
                               codes={v: combos[i] for i, v in enumerate(fvars)})
        mask = compile_filter(fake, r.where)(slice(None)).reshape(sizes)  # type: ignore[arg-type]
        mask = np.transpose(mask, np.argsort([names.index(v) for v in fvars]))
        shape = [len(self.data.variables[n].hierarchy.leaves) if n in fvars else 1 for n in names]
        return mask.reshape(shape)

    def _kept_units(self, r: Resolved, levels: dict[str, int]) -> list[list[tuple[int, ...]]]:
        """Per dimension, for each category of its level in the kept cube, the display cells it
        adds to."""
        units = []
        for d in r.dims:
            first_leaf = d.variable.units(levels[d.variable.name])[1]
            units.append([d.targets[b] if b >= 0 else () for b in d.lut[first_leaf].tolist()])
        return units

    def _leaf_cube(self, r: Resolved) -> tuple[dict[str, np.ndarray], list[list[tuple[int, ...]]]] | None:
        """The query's cube from a cached whole-population cube (:meth:`_kept_levels`), and what
        each unit of it adds to: every table of the same variables — other subsets, subtotals,
        recodes, filters on categorical variables — is then a sum over a kept cube, without
        reading a record. None when the query needs a pass over the records."""
        plan = self._kept_levels(r)
        if plan is None:
            return None
        fvars, levels = plan
        names = tuple(sorted(levels))
        cube = self._cube_of(r, tuple((n, levels[n]) for n in names))
        if cube is None:
            return None
        dims = [d.variable.name for d in r.dims]
        if r.where is not None:
            mask = self._filter_cube(r, fvars, names)
            extra = tuple(i for i, n in enumerate(names) if n not in dims)
            cube = {k: (v * mask).sum(axis=extra) if extra else v * mask for k, v in cube.items()}
            names = tuple(n for n in names if n in dims)
        order = [names.index(n) for n in dims]
        return {k: np.transpose(v, order) for k, v in cube.items()}, self._kept_units(r, levels)

    def _contribution_cube(self, spec: tuple[tuple[str, int], ...], numeric: str) -> dict[str, np.ndarray] | None:
        """The whole population's contributions (:func:`~tabsafe.service.magnitudes.unit_contributions`:
        two largest and exact total, fixed point) per category of the given (variable, level)
        pairs; counted once from the records, kept like the count cubes."""
        variables = [self.data.variables[n] for n, _ in spec]
        sizes = [len(v.at_level(level)) for v, (_, level) in zip(variables, spec)]
        cells = int(np.prod(sizes))
        if cells > LEAF_CUBE_CELLS:
            return None

        def build() -> dict[str, np.ndarray]:
            found = self._micro_index(spec, sizes)
            if found is not None:
                # from the groups' own two largest and totals: the two largest of a cell are
                # among its groups' two largest
                idx, micro = found
                parts = unit_contributions(np.concatenate([idx, idx]), np.concatenate(
                    [micro[f"top1_{numeric}"], micro[f"top2_{numeric}"]]), cells)
                totals = micro[f"total_{numeric}"]
                parts["total"] = _exact(np.bincount(idx, weights=totals >> SPLIT, minlength=cells),
                                        np.bincount(idx, weights=totals & ((1 << SPLIT) - 1), minlength=cells))
            else:
                idx = np.zeros(self.data.n, dtype=np.intp)
                for v, (name, level), size in zip(variables, spec, sizes):
                    idx *= size
                    idx += v.units(level)[0][self.data.codes[name]]
                parts = unit_contributions(idx, abs_fixed(self.data, numeric, slice(0, self.data.n)), cells)
            built = {k: v.reshape(sizes) for k, v in parts.items()}
            built["count"] = built.pop("total")  # stored under the name a kept cube is recognised by
            return built

        cube = self._kept(f"contributions|{spec}|{numeric}", 3 * cells, build)
        return {"top1": cube["top1"], "top2": cube["top2"], "total": cube["count"]}

    def contributions(self, r: Resolved) -> dict[str, np.ndarray]:
        """The largest contributions and totals per display cell (:mod:`tabsafe.service.magnitudes`):
        for a query a kept cube answers (:meth:`_kept_levels`), from a kept cube of
        contributions — the two largest of a union of cells are among the cells' two largest, and
        totals are exact integers — else from the query's records."""
        plan = self._kept_levels(r)
        cube = None
        if plan is not None:
            fvars, levels = plan
            names = tuple(sorted(levels))
            cube = self._contribution_cube(tuple((n, levels[n]) for n in names), r.numeric)  # type: ignore[arg-type]
        if cube is None:
            return contributions(self.data, r)
        dims = [d.variable.name for d in r.dims]
        if r.where is not None:
            mask = self._filter_cube(r, fvars, names)
            cube = {k: v * mask for k, v in cube.items()}  # a record left out contributes 0
        cube = top2_over(cube, tuple(i for i, n in enumerate(names) if n not in dims))
        kept = [n for n in names if n in dims]
        cube = {k: np.transpose(v, [kept.index(n) for n in dims]) for k, v in cube.items()}
        for axis, (d, targets) in enumerate(zip(r.dims, self._kept_units(r, levels))):
            cube = to_display(cube, axis, targets, len(d.display))
        return in_units(self.data, r.numeric, {k: v.ravel() for k, v in cube.items()})  # type: ignore[arg-type]

    def tabulate(self, r: Resolved) -> Table:
        """The table of a resolved query: counts, cell keys and sums of every cell with records,
        margins and subtotals included."""
        data = self.data
        kept = self._leaf_cube(r)
        if kept is not None:
            cubes, units = kept
        else:
            cubes = self._count(r, [data.codes[d.variable.name] for d in r.dims], [d.lut for d in r.dims],
                                [len(d.base) for d in r.dims])
            units = [list(d.targets) for d in r.dims]
        return self.table_from_cubes(r, cubes, units)

    def table_from_cubes(self, r: Resolved, cubes: dict[str, np.ndarray],
                         units: list[list[tuple[int, ...]]]) -> Table:
        """The table of ``r`` from its cubes over units (``count``, ``key``: key sums, ``fixed``:
        fixed-point magnitude sums), each unit added to the display cells it lists: margins and
        subtotals. Cells without records (and without a magnitude) are left out."""
        data = self.data
        for axis, (d, targets) in enumerate(zip(r.dims, units)):
            rows = [t for ts in targets for t in ts]
            cols = [b for b, ts in enumerate(targets) for _ in ts]
            if len(d.display) * len(targets) <= 250_000:
                # small: a dense 0/1 matrix (exact integer products, no sparse set-up cost)
                m = np.zeros((len(d.display), len(targets)), dtype=np.int64)
                m[rows, cols] = 1
            else:
                import scipy.sparse as sp

                m = sp.csr_matrix((np.ones(len(rows), dtype=np.int64), (rows, cols)),
                                  shape=(len(d.display), len(targets)))
            for name, cube in cubes.items():
                moved = np.moveaxis(cube, axis, 0)
                out = np.asarray(m @ moved.reshape(moved.shape[0], -1))
                cubes[name] = np.moveaxis(out.reshape((m.shape[0], *moved.shape[1:])), 0, axis)
        fixed = r.numeric is not None
        values: dict[str, np.ndarray] = {"count": cubes["count"].ravel()}
        scale = data.key_scale
        values["ckey_int"] = np.mod(cubes["key"].ravel(), scale)
        values["ckey"] = values["ckey_int"] / scale
        if fixed:
            values[f"sum_{r.numeric}"] = cubes["fixed"].ravel() / 10 ** data.numeric[r.numeric].digits  # type: ignore[index]
        dims = [Dimension(d.variable.name, d.display) for d in r.dims]
        table = Table.from_grid(dims, values, {"key": data.key_meta, "source": "service"})
        keep = table.counts != 0
        if fixed:
            keep |= values[f"sum_{r.numeric}"] != 0
        return table.take(keep)

    def area_table(self, r: Resolved) -> Table | None:
        """A one-cell table of the user-defined area's whole population (no filter), to check the
        area's own minimum population on its protected count."""
        if r.area_label is None:
            return None
        data = self.data
        n = sum(e - s for s, e in r.ranges)
        key = sum(int(data.key_cum[e]) - int(data.key_cum[s]) for s, e in r.ranges)
        dim = Dimension("area", Hierarchy.flat(["area"], source="area"))
        ckey_int = np.array([key % data.key_scale] * 2, dtype=np.int64)
        values = {"count": np.array([n, n], dtype=np.int64), "ckey_int": ckey_int, "ckey": ckey_int / data.key_scale}
        table = Table.from_grid([dim], values, {"key": data.key_meta, "source": "service"})
        return table.take(table.counts != 0)

__all__ = ["Counting", "_LRU"]
