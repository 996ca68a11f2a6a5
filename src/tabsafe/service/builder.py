"""The table builder: a query in, a protected table (or a refusal with a table that passes) out.

For each query (:mod:`tabsafe.service.query`) the builder

1. resolves it against the catalogue and checks the structural release rules (seed 002 §5:
   dimensions, cells, nested recodes) before any record is read;
2. counts the selected records of the prepared code matrix (:mod:`tabsafe.service.prepared`)
   into the table's inner categories with ``numpy.bincount`` — counts, exact cell keys (fixed-point
   sums, METHODS.md §2) and fixed-point magnitude sums — then adds up every margin and subtotal;
3. protects the whole table, margins included, with the configured method chain
   (:class:`tabsafe.pipeline.Chain`; the cell key method by default: the same records give the
   same noise in every table, so the same query always gets the same answer and averaging
   repeated queries gains nothing, METHODS.md §11);
4. checks the release rules on numbers on the *protected* values (population, population of the
   user-defined area, mean cell size, share of small cells), so a refusal tells nothing the
   table would not; and
5. when a rule refuses the table, searches the nearest table that passes — coarser categories up
   the hierarchy, a larger area, fewer variables, no filter — by uniform-cost search, and offers
   it as a ready-to-send query.

Only a :class:`~tabsafe.model.result.Release` can be turned into a response
(:func:`release_payload` refuses anything else), so no original value can reach a user.
"""

from __future__ import annotations

import hashlib
import heapq
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from tabsafe.errors import InputError, TabsafeError
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.result import Release
from tabsafe.model.table import Dimension, Table
from tabsafe.pipeline import Chain, step_seeds
from tabsafe.registry import get_method
from tabsafe.service.prepared import SPLIT, Prepared
from tabsafe.service.query import Dim, Query, Resolved, resolve

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
LEAF_CACHE_CELLS = 12_000_000


@dataclass(frozen=True)
class Check:
    """One release rule applied to a table: its limit, the (protected) value, and by how much it
    fails (0 when it passes)."""

    rule: str
    limit: float | int | bool
    value: float | int | bool
    passed: bool
    by: float | int = 0
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        out = {"rule": self.rule, "limit": self.limit, "value": self.value, "passed": self.passed}
        if not self.passed:
            out["by"] = self.by
            out["message"] = self.message
        return out


@dataclass(frozen=True)
class Outcome:
    """What a query gets: the protected table (``payload``) or the rules it breaks."""

    query: Query
    checks: tuple[Check, ...]
    payload: dict[str, Any] | None = None
    cells: int = 0

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.passed)


@dataclass(frozen=True)
class Suggestion:
    query: Query
    changes: tuple[str, ...]
    outcome: Outcome


@dataclass(frozen=True)
class Refusal:
    outcome: Outcome
    suggestion: Suggestion | None
    tried: int = 0


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


def release_payload(release: Release, resolved: Resolved) -> dict[str, Any]:
    """The JSON body of a protected table, made from its :class:`Release` alone.

    Every cell of the grid is listed (a cell without records is a published 0), codes in each
    variable's display order, the last variable varying fastest.
    """
    if not isinstance(release, Release):
        raise TypeError(f"only a Release can be serialised, not a {type(release).__name__}")
    table = release.table.densify()
    shape = table.shape
    ids = np.arange(table.n_cells)
    pos = np.unravel_index(ids, shape) if shape else ()
    codes = [np.array(d.hierarchy.order, dtype=object)[p] for d, p in zip(table.dimensions, pos)]
    columns = list(table.variables) + list(table.value_columns)
    values = []
    for c in table.value_columns:
        arr = table.column(c)
        if arr.dtype.kind == "f":
            missing = np.isnan(arr)
            # counts as whole numbers, other values to two decimals; a missing value as null
            out = (np.rint(np.nan_to_num(arr)).astype(np.int64) if c == "count" else np.round(arr, 2)).tolist()
            if missing.any():
                for i in np.flatnonzero(missing).tolist():
                    out[i] = None
            values.append(out)
        else:
            values.append(arr.tolist())
    rows = list(zip(*[c.tolist() for c in codes], *values))  # tuples: JSON arrays, CSV rows
    dims = []
    for d, rd in zip(table.dimensions, resolved.dims):
        var = rd.variable
        dims.append({
            "variable": d.variable,
            "codes": list(d.hierarchy.order),
            "labels": {c: var.label(c) for c in d.hierarchy.order if var.label(c) != c},
            "parents": {c: p for c, p in d.hierarchy.parents.items() if p != d.hierarchy.total},
        })
    return {"dimensions": dims, "columns": columns, "rows": rows}


class Builder:
    """Answers queries over prepared data with the configured protection (module docstring)."""

    #: answers are computed on the server's event loop (a few milliseconds of numpy each); a
    #: builder that waits on an engine says False and is run in a thread
    inline = True

    def __init__(self, settings: Any, data: Prepared) -> None:
        self.settings = settings
        self.data = data
        self.rules = settings.rules
        self.limits = settings.limits
        self._chains: dict[str | None, Chain] = {}
        self._chain_lock = threading.Lock()
        self._cache = _LRU(settings.limits.cache_entries)
        self._leaf_cubes = _LRU(LEAF_CACHE_CELLS)
        self._micro_cache: tuple[dict[str, int], dict[str, np.ndarray]] | None = None
        self._micro_lock = threading.Lock()
        self.chain(None)  # build (and validate) the configured chain at start

    # ------------------------------------------------------------------ protection
    def chain(self, numeric: str | None) -> Chain:
        """The configured chain; for sums and means each step that perturbs a magnitude gets the
        numeric variable and its flex point."""
        with self._chain_lock:
            if numeric in self._chains:
                return self._chains[numeric]
            methods = []
            for step in self.settings.chain:
                cls = get_method(step.method)
                params = dict(step.params)
                if numeric is not None and "magnitude" in {p.name for p in cls.parameters()}:
                    params.update(magnitude=numeric, flex_point=self.data.numeric[numeric].flex_point)
                methods.append(cls.from_params(params))
            chain = Chain(tuple(methods))
            if chain.microdata_steps:
                raise InputError("the service protects tables: microdata methods cannot be in its chain")
            if not chain.capabilities().consistent:
                # a value drawn per table or per query is averaged away by asking the same cells
                # in many tables (seed 002 §5); only a cell-level function of the records holds
                wrong = [m.name for m in chain.table_steps if not m.capabilities().consistent]
                raise InputError(
                    f"the table builder serves only methods consistent across tables (the same cell, the same "
                    f"value in every table), so that averaging many answers cannot remove the noise; "
                    f"{', '.join(repr(n) for n in wrong)} with these parameters is not (e.g. use ckm)")
            key = chain.needs().key
            if key is not None and key.scale != self.data.key_scale:
                raise InputError("the chain's record keys differ from the prepared ones: prepare the data again")
            self._chains[numeric] = chain
            return chain

    def _seeds(self, chain: Chain, query: Query) -> list[int | None]:
        if not chain.random:
            return [None] * len(chain.table_steps)
        # the same query gets the same seed, also after a restart: same query, same numbers
        digest = hashlib.sha256(f"{self.settings.seed}:{query.key()}".encode()).digest()
        return step_seeds(int.from_bytes(digest[:8], "big") >> 1, len(chain.table_steps))

    # ------------------------------------------------------------------ counting
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
        if int(np.prod(sizes)) > LEAF_CUBE_CELLS:
            return None
        key = f"{spec}|{r.numeric}"
        cube = self._leaf_cubes.get(key)
        if cube is None:
            cube = self._stored_cube(key)
        if cube is None:
            cube = self._count_micro(spec, r.numeric, sizes)
            if cube is None:
                luts = [v.units(level)[0] for v, (_, level) in zip(variables, spec)]
                cube = self._count(r, [self.data.codes[n] for n, _ in spec], luts, sizes, whole=True)
            self._store_cube(key, cube)
        self._leaf_cubes.put(key, cube, cells=int(np.prod(sizes)))
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
            key = f"micro|{sorted(levels.items())}|{sorted(data.numeric)}"
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
                self._store_cube(key, stored)
            self._micro_cache = (levels, stored)
            return self._micro_cache

    def _count_micro(self, spec: tuple[tuple[str, int], ...], numeric: str | None,
                     sizes: list[int]) -> dict[str, np.ndarray] | None:
        """A whole-population cube from the grouped records (:meth:`_micro`), when every
        variable of ``spec`` is there at its level or a finer one; else None."""
        levels, micro = self._micro()
        if any(name not in levels or levels[name] < level for name, level in spec):
            return None
        n = int(np.prod(sizes))
        idx = np.zeros(micro["count"].size, dtype=np.intp)
        for (name, level), size in zip(spec, sizes):
            var = self.data.variables[name]
            # each grouped category → its category at the level asked for
            up = var.units(level)[0][var.units(levels[name])[1]]
            idx *= size
            idx += up[micro[f"code_{name}"]]
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

    def _leaf_cube(self, r: Resolved) -> tuple[dict[str, np.ndarray], list[list[tuple[int, ...]]]] | None:
        """The query's cube from a cached whole-population cube, and what each unit of it adds
        to. A variable of a long codelist shown at a level is counted by that level's
        categories, any other by its leaf codes; every table of the same variables — other subsets,
        subtotals, recodes, filters on categorical variables — is then a sum over a kept cube,
        without reading a record. None when the query needs a pass over the records (an area, a
        numeric filter, a cube too large to keep)."""
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
        names = tuple(sorted(levels))
        cube = self._cube_of(r, tuple((n, levels[n]) for n in names))
        if cube is None:
            return None
        dims = [d.variable.name for d in r.dims]
        if r.where is not None:
            from types import SimpleNamespace

            from tabsafe.service.query import compile_filter

            # the filter evaluated once per combination of its variables' leaf codes
            sizes = [len(self.data.variables[v].hierarchy.leaves) for v in fvars]
            combos = np.indices(sizes).reshape(len(sizes), -1)
            fake = SimpleNamespace(variables=self.data.variables, values={},
                                   codes={v: combos[i] for i, v in enumerate(fvars)})
            mask = compile_filter(fake, r.where)(slice(None)).reshape(sizes)  # type: ignore[arg-type]
            mask = np.transpose(mask, np.argsort([names.index(v) for v in fvars]))
            shape = [len(self.data.variables[n].hierarchy.leaves) if n in fvars else 1 for n in names]
            mask = mask.reshape(shape)
            extra = tuple(i for i, n in enumerate(names) if n not in dims)
            cube = {k: (v * mask).sum(axis=extra) if extra else v * mask for k, v in cube.items()}
            names = tuple(n for n in names if n in dims)
        order = [names.index(n) for n in dims]
        units = []
        for d in r.dims:
            first_leaf = d.variable.units(levels[d.variable.name])[1]
            units.append([d.targets[b] if b >= 0 else () for b in d.lut[first_leaf].tolist()])
        return {k: np.transpose(v, order) for k, v in cube.items()}, units

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

    # ------------------------------------------------------------------ rules
    def structural_checks(self, r: Resolved) -> list[Check]:
        rules = self.rules
        out: list[Check] = []
        if rules.max_dimensions is not None:
            n = len(r.dims)
            out.append(Check("max_dimensions", rules.max_dimensions, n, n <= rules.max_dimensions,
                             n - rules.max_dimensions,
                             f"the table has {n} variables, {n - rules.max_dimensions} more than the "
                             f"maximum of {rules.max_dimensions}"))
        if rules.max_cells is not None:
            n = r.grid_cells
            out.append(Check("max_cells", rules.max_cells, n, n <= rules.max_cells, n - rules.max_cells,
                             f"the table has {n:,} cells (margins included), {n - rules.max_cells:,} more than "
                             f"the maximum of {rules.max_cells:,}"))
        if rules.nested_recodes:
            bad = []
            for d in r.dims:
                if d.spec.groups is None:
                    continue
                h, level = d.variable.hierarchy, d.variable.recode_level
                bad += [f"{d.variable.name}:{c}" for _, codes in d.spec.groups for c in codes if h.depth(c) > level]
            out.append(Check("nested_recodes", True, not bad, not bad, len(bad),
                             f"groups may only join whole categories of the published level; "
                             f"{len(bad)} code(s) are finer: {', '.join(bad[:3])}"))
        return out

    def data_checks(self, r: Resolved, release: Table, area: Table | None) -> list[Check]:
        rules = self.rules
        out: list[Check] = []
        dense = release.densify()
        counts = dense.counts.astype(float)
        population = round(float(dense.value("count")))
        inner = counts[dense.leaf_mask]
        n_inner = max(int(inner.size), 1)
        if rules.min_population is not None:
            lim = rules.min_population
            out.append(Check("min_population", lim, population, population >= lim, lim - population,
                             f"the table's population is {population:,} (protected), {lim - population:,} below "
                             f"the minimum of {lim:,}"))
        if rules.min_area_population is not None and area is not None:
            lim = rules.min_area_population
            pop = int(area.value("count")) if area.n_stored else 0
            out.append(Check("min_area_population", lim, pop, pop >= lim, lim - pop,
                             f"the area's population is {pop:,} (protected), {lim - pop:,} below the minimum "
                             f"of {lim:,}"))
        if rules.min_mean_cell_size is not None:
            lim = rules.min_mean_cell_size
            mean = round(population / n_inner, 2)
            out.append(Check("min_mean_cell_size", lim, mean, mean >= lim, round(lim - mean, 2),
                             f"the table has {population / n_inner:.2f} persons per inner cell (protected), "
                             f"{lim - mean:.2f} below the minimum of {lim:g}"))
        if rules.max_small_cell_share is not None:
            lim = rules.max_small_cell_share
            small = int(np.count_nonzero((inner > 0) & (inner < rules.small_cell)))
            share = round(small / n_inner, 4)
            out.append(Check("max_small_cell_share", lim, share, share <= lim, round(share - lim, 4),
                             f"{share:.1%} of the inner cells are small (1..{rules.small_cell - 1}, protected), "
                             f"{share - lim:.1%} above the maximum of {lim:.0%}"))
        return out

    # ------------------------------------------------------------------ answering
    def warm(self) -> int:
        """Make ready before the first query: group the records (:meth:`_micro`, kept on disk)
        and answer one query of each kind (whole population, an area, a filter, a mean), so that
        code loaded on first use and kept cubes are in place. Without it a server's first queries
        take many times longer than the rest, and under load that wait queues every query behind
        them. Answers are deterministic, so the queries answered here change nothing. Returns how
        many warm-up queries were answered."""
        data = self.data
        self._micro()
        plain = sorted((v for v in data.variables if v != data.geography),
                       key=lambda v: len(data.variables[v].hierarchy.order))[:3]
        dims = [{"variable": v} for v in plain]
        kinds: list[dict[str, Any]] = [{"dimensions": dims}]
        if data.geography is not None:
            geo = data.variables[data.geography].hierarchy
            kinds.append({"dimensions": [{"variable": data.geography, "level": 1}, *dims[:2]]})
            kinds.append({"dimensions": dims, "area": [geo.leaves[0]]})
        for name in list(data.numeric)[:1]:
            kinds.append({"dimensions": dims, "where": f"{name} >= 0"})
            kinds.append({"dimensions": dims, "measure": "mean", "variable": name})
        answered = 0
        for raw in kinds:
            try:
                self.answer(Query.from_json(raw))
            except TabsafeError:  # a data set whose rules refuse a warm-up query: nothing to warm there
                continue
            answered += 1
        return answered

    def evaluate(self, query: Query) -> tuple[Outcome, Resolved]:
        """The outcome of one query, no suggestion search (cached by canonical query)."""
        r = resolve(query, self.data, self.limits)
        key = r.query.key()
        hit = self._cache.get(key)
        if hit is not None:
            return hit, r
        checks = self.structural_checks(r)
        if not all(c.passed for c in checks):
            outcome = Outcome(r.query, tuple(checks))
        else:
            chain = self.chain(r.numeric)
            protection = chain.protect(self.tabulate(r), seeds=self._seeds(chain, r.query))
            area = self.area_table(r)
            area_release = None
            if area is not None:
                area_chain = self.chain(None)
                area_release = area_chain.protect(area, seeds=self._seeds(area_chain, r.query)).release.table
            checks += self.data_checks(r, protection.release.table, area_release)
            payload = release_payload(protection.release, r) if all(c.passed for c in checks) else None
            if payload is not None:
                payload["notes"] = list(dict.fromkeys(protection.report.notes))
                payload["methods"] = [m.name for m in chain.methods]
            outcome = Outcome(r.query, tuple(checks), payload, r.grid_cells)
        self._cache.put(key, outcome)
        return outcome, r

    def answer(self, query: Query) -> Outcome | Refusal:
        """The protected table, or a refusal with the nearest table that passes."""
        outcome, _ = self.evaluate(query)
        if outcome.passed:
            return outcome
        suggestion, tried = self.suggest(outcome.query)
        return Refusal(outcome, suggestion, tried)

    def suggest(self, query: Query) -> tuple[Suggestion | None, int]:
        """The cheapest changes (uniform-cost search over :func:`moves`) whose table passes every
        rule; at most ``limits.suggestion_tries`` candidate tables are built."""
        frontier: list[tuple[int, int, Query, tuple[str, ...]]] = []
        seen = {query.key()}
        seq = 0
        for cost, text, q in moves(query, self.data):
            if q.key() not in seen:
                seen.add(q.key())
                heapq.heappush(frontier, (cost, seq := seq + 1, q, (text,)))
        tried = 0
        while frontier and tried < self.limits.suggestion_tries:
            cost, _, q, changes = heapq.heappop(frontier)
            tried += 1
            try:
                outcome, _ = self.evaluate(q)
            except TabsafeError:
                # a query that does not resolve (an unknown code, too many cells) may still lead
                # to one that does: keep searching from it
                outcome, base = None, q
            else:
                if outcome.passed:
                    return Suggestion(outcome.query, changes, outcome), tried
                base = outcome.query
            for c, text, q2 in moves(base, self.data):
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


__all__ = ["Builder", "Check", "Outcome", "Refusal", "Suggestion", "moves", "release_payload"]
