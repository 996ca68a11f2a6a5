"""The microdata prepared once for the service: an in-memory columnar code matrix.

``tabsafe serve --prepare`` (or the first start) turns the records into one small array per
variable — each record's code as its position in the variable's codelist (``uint8``/``uint16``)
— plus the record keys split into two exactly summable float parts and the numeric variables in
fixed point, all sorted by the geography's building blocks, so that a user-defined area is a few
contiguous runs of records. The arrays are ``.npy`` files opened memory-mapped: every server
process shares one copy through the page cache. A table is then a ``numpy.bincount`` over the
selected runs (:mod:`tabsafe.service.builder`): a 3-variable table over 1.5 million persons takes
milliseconds, with cell keys exactly as :mod:`tabsafe.engines.planner` computes them
(METHODS.md §2: ``frac(Σ rk)`` from fixed-point integers).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from tabsafe.errors import InputError
from tabsafe.model.hierarchy import Hierarchy

FORMAT = 3  # 2: whole units rounded half away from zero, as the engines do; 3: values keep NaN
#: record keys and fixed-point magnitudes are split at 2**26 so that float64 bincounts stay exact
#: (every partial sum below 2**53 for up to 2**27 records)
SPLIT = 26
MAX_RECORDS = 2**27


@dataclass(frozen=True)
class Variable:
    """A categorical variable of the catalogue: its hierarchy, level names and labels."""

    name: str
    hierarchy: Hierarchy
    levels: tuple[str, ...]
    labels: Mapping[str, str]
    recode_level: int

    @cached_property
    def leaf_index(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.hierarchy.leaves)}

    @cached_property
    def leaves_below(self) -> dict[str, np.ndarray]:
        """Every code (leaf, subtotal, total) → the leaf positions under it."""
        h = self.hierarchy
        out: dict[str, list[int]] = {c: [] for c in h.order}
        for i, leaf in enumerate(h.leaves):
            for a in h.ancestors(leaf):
                out[a].append(i)
        return {c: np.array(v, dtype=np.int64) for c, v in out.items()}

    @cached_property
    def _levels(self) -> dict[int, tuple[str, ...]]:
        h = self.hierarchy
        return {lv: tuple(c for c in h.order[1:] if h.depth(c) == lv or (h.is_leaf(c) and h.depth(c) < lv))
                for lv in range(1, h.max_depth + 1)}

    def at_level(self, level: int) -> tuple[str, ...]:
        """The categories of a level: codes of that depth, and leaves above it (unbalanced)."""
        return self._levels[level]

    @cached_property
    def _units(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        out = {}
        for level, cats in self._levels.items():
            lut = np.full(len(self.hierarchy.leaves), -1, dtype=np.int64)
            for i, c in enumerate(cats):
                lut[self.leaves_below[c]] = i
            out[level] = (lut, np.array([self.leaves_below[c][0] for c in cats], dtype=np.int64))
        return out

    def units(self, level: int) -> tuple[np.ndarray, np.ndarray]:
        """Each leaf code's category at ``level``, and one leaf code of each category."""
        return self._units[level]

    @cached_property
    def numeric_codes(self) -> np.ndarray:
        """Each leaf's code as a number (NaN when it is not one): ordering tests in filters."""
        out = np.full(len(self.hierarchy.leaves), np.nan)
        for i, c in enumerate(self.hierarchy.leaves):
            try:
                out[i] = float(c)
            except ValueError:
                pass
        return out

    def label(self, code: str) -> str:
        return self.labels.get(code, code)


@dataclass(frozen=True)
class Numeric:
    name: str
    flex_point: float
    label: str
    digits: int


class Prepared:
    """The prepared records, memory-mapped (module docstring)."""

    def __init__(self, path: Path) -> None:
        manifest_file = path / "manifest.json"
        try:
            manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        except OSError:
            raise InputError("no prepared data here: run `tabsafe serve --prepare`", where=str(path)) from None
        if manifest.get("format") != FORMAT:
            raise InputError("prepared data of another format: run `tabsafe serve --prepare` again", where=str(path))
        self.path = path
        self.manifest = manifest
        self.n = int(manifest["records"])
        self.key_scale = int(manifest["key"]["scale"])
        self.key_meta = dict(manifest["key"]["meta"])
        self.geography: str | None = manifest["geography"]
        self.variables: dict[str, Variable] = {}
        for name, v in manifest["variables"].items():
            h = Hierarchy(parents=v["parents"], order=tuple(v["order"]), source=f"variable {name!r}")
            self.variables[name] = Variable(name, h, tuple(v["levels"]), v["labels"], int(v["recode_level"]))
        self.numeric = {k: Numeric(k, float(v["flex_point"]), v["label"], int(v["digits"]))
                        for k, v in manifest["numeric"].items()}
        load = lambda f: np.load(path / f, mmap_mode="r")
        self.codes = {name: load(f"codes_{name}.npy") for name in self.variables}
        self.key_lo, self.key_hi = load("key_lo.npy"), load("key_hi.npy")
        self.key_cum = load("key_cum.npy")
        self.values = {name: load(f"value_{name}.npy") for name in self.numeric}
        self.fixed = {name: (load(f"fixed_lo_{name}.npy"), load(f"fixed_hi_{name}.npy")) for name in self.numeric}
        self.blocks = load("blocks.npy") if self.geography else None

    @property
    def fingerprint(self) -> str:
        return str(self.manifest["source"]["sha256"])


# ---------------------------------------------------------------------------------------------
# preparing


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _catalogue(settings: Any, columns: list[str]) -> tuple[dict[str, Variable], str | None]:
    """Variables from the data set's ``meta.yaml`` (codelists, labels, hierarchy files) and the
    settings (level names, labels, recode levels)."""
    from tabsafe.io import load_yaml

    meta_path = settings.data / "meta.yaml"
    try:
        meta = load_yaml(meta_path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise InputError(f"cannot read the data set's metadata: {exc.strerror}", where=str(meta_path)) from None
    variables = meta.get("variables") if isinstance(meta, Mapping) else None
    if not isinstance(variables, Mapping) or not variables:
        raise InputError("metadata needs a 'variables' mapping", where=str(meta_path))
    files = meta.get("hierarchies") or {}
    out: dict[str, Variable] = {}
    for name, spec in variables.items():
        name = str(name)
        if name not in columns:
            raise InputError(f"variable {name!r} of meta.yaml is not a column of the records", where=str(meta_path))
        codes = spec.get("codes") if isinstance(spec, Mapping) else spec
        if not isinstance(codes, list):
            raise InputError(f"variable {name!r} needs a list of codes", where=str(meta_path))
        flat = Hierarchy.flat(codes, source=f"meta.yaml:{name}")
        h = flat
        if name in files:
            h = Hierarchy.from_file(settings.data / str(files[name]))
            h.check_codelist(flat.leaves, variable=name)
            if set(h.leaves) != set(flat.leaves):
                missing = sorted(set(flat.leaves) - set(h.leaves))[:3]
                raise InputError(f"hierarchy of {name!r} lacks codes of its codelist: {missing}", where=str(meta_path))
        labels = {str(k): str(v) for k, v in ((spec.get("labels") or {}) if isinstance(spec, Mapping) else {}).items()}
        labels.update(settings.labels.get(name, {}))
        depth = h.max_depth
        names = list(settings.levels.get(name, []))
        if names and len(names) != depth:
            raise InputError(f"setting 'levels.{name}' names {len(names)} levels; the hierarchy has {depth}")
        levels = tuple(names or ([name] if depth == 1 else [f"level {i}" for i in range(1, depth + 1)]))
        recode = int(settings.recode_level.get(name, depth))
        if not 1 <= recode <= depth:
            raise InputError(f"setting 'recode_level.{name}' must be in 1..{depth}; got {recode}")
        out[name] = Variable(name, h, levels, labels, recode)
    geography = settings.geography
    if geography is None:
        deep = [v for v in out.values() if v.hierarchy.max_depth > 1]
        geo_named = sorted((v for v in deep if v.name in {"small_area", "geography", "area"}),
                           key=lambda v: -v.hierarchy.max_depth)
        geography = (geo_named or [None])[0].name if geo_named else None  # type: ignore[union-attr]
    elif geography not in out:
        raise InputError(f"setting 'geography': {geography!r} is not a variable of the data set")
    return out, geography


def chain_key(settings: Any) -> Any:
    """The record key the chain's methods need (the cell key method's digits or modulus), else
    the default :class:`~tabsafe.model.spec.KeySpec`."""
    from tabsafe.model.spec import KeySpec
    from tabsafe.registry import get_method

    key_spec = None
    for step in settings.chain:
        method = get_method(step.method).from_params(step.params)
        key_spec = key_spec or method.needs().key
    return key_spec or KeySpec()


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Whole numbers, halves away from zero: as the engines' SQL ``round`` turns record keys and
    magnitudes into whole units (planner), so a prepared cell and an engine's agree even on ties
    (``numpy.rint`` rounds halves to even)."""
    return (np.sign(x) * np.floor(np.abs(x) + 0.5)).astype(np.int64)


def prepare(settings: Any) -> Path:
    """Prepare the records named by ``settings`` (module docstring); returns the folder.

    Written to a temporary folder and moved into place whole, so a server never sees half a
    preparation.
    """
    src = settings.records_path
    table = _read_records(src)
    variables, geography = _catalogue(settings, table.column_names)
    key_spec = chain_key(settings)
    k = _record_key_units(table, key_spec, src)
    codes = _leaf_positions(table, variables, src)
    numeric, values, observed = _numeric_columns(table, dict(settings.numeric), variables, key_spec.column, src)
    order = np.argsort(codes[geography], kind="stable") if geography else np.arange(table.num_rows)
    out_dir = settings.prepared_path
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        _save_arrays(tmp, order, codes, k, values, observed, numeric)
        if geography:
            g = codes[geography][order]
            n_leaves = len(variables[geography].hierarchy.leaves)
            np.save(tmp / "blocks.npy", np.searchsorted(g, np.arange(n_leaves + 1), side="left").astype(np.int64))
        manifest = {
            "format": FORMAT,
            "source": {"path": str(src), "sha256": _sha256(src)},
            "records": table.num_rows,
            "key": {"scale": key_spec.scale, "meta": {"column": key_spec.column, "digits": key_spec.digits,
                                                      "modulus": key_spec.modulus}},
            "geography": geography,
            "variables": {
                name: {"parents": dict(v.hierarchy.parents), "order": list(v.hierarchy.order),
                       "levels": list(v.levels), "labels": dict(v.labels), "recode_level": v.recode_level}
                for name, v in variables.items()
            },
            "numeric": numeric,
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        _replace_folder(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def _read_records(src: Path) -> Any:
    """The records file as an Arrow table: one :class:`InputError` line when it is missing,
    unreadable, empty or above :data:`MAX_RECORDS` rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not src.is_file():
        raise InputError("no such file", where=str(src))
    try:
        table = pq.read_table(src)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"cannot read the records: {str(exc).splitlines()[0]}", where=str(src)) from None
    n = table.num_rows
    if n == 0:
        raise InputError("the records are empty", where=str(src))
    if n > MAX_RECORDS:
        raise InputError(f"at most {MAX_RECORDS:,} records can be served; got {n:,}", where=str(src))
    return table


def _record_key_units(table: Any, key_spec: Any, src: Path) -> np.ndarray:
    """Each record's key in whole units of the key's scale (an integer key as given), as the
    engines' SQL rounds them (planner; METHODS.md §2); refuses missing keys and keys out of range."""
    if key_spec.column not in table.column_names:
        raise InputError(f"the records have no record-key column {key_spec.column!r}", where=str(src))
    rk = table.column(key_spec.column).to_numpy(zero_copy_only=False).astype(float)
    if not np.all(np.isfinite(rk)):
        raise InputError(f"record key column {key_spec.column!r} has missing values", where=str(src))
    scale = key_spec.scale
    k = round_half_away(rk * (1 if key_spec.modulus else scale))
    if k.min() < 0 or k.max() >= scale:
        raise InputError(f"record key column {key_spec.column!r} has values outside its range", where=str(src))
    return k


def _leaf_positions(table: Any, variables: Mapping[str, Variable], src: Path) -> dict[str, np.ndarray]:
    """Each variable's records as positions in its codelist's leaves, in the smallest unsigned
    type that holds them; refuses missing values and codes outside the codelist."""
    import pyarrow as pa
    import pyarrow.compute as pc

    codes: dict[str, np.ndarray] = {}
    for name, var in variables.items():
        col = table.column(name).cast(pa.string())
        if col.null_count:
            raise InputError(f"variable {name!r} has {col.null_count:,} missing values", where=str(src))
        leaves = pa.array(list(var.hierarchy.leaves), pa.string())
        idx = pc.index_in(col, value_set=leaves)
        if idx.null_count:
            bad = pc.filter(col, pc.is_null(idx)).unique().to_pylist()[:3]
            raise InputError(f"variable {name!r} has values outside its codelist: {bad}", where=str(src))
        pos = idx.to_numpy()
        dtype = np.uint8 if len(leaves) <= 256 else np.uint16 if len(leaves) <= 65536 else np.uint32
        codes[name] = np.asarray(pos).astype(dtype)
    return codes


def _numeric_columns(table: Any, numeric_cfg: Mapping[str, Any], variables: Mapping[str, Variable],
                     key_column: str, src: Path) -> tuple[dict[str, dict[str, Any]], dict[str, np.ndarray],
                                                          dict[str, np.ndarray]]:
    """The numeric variables (the configured ones, else every numeric column that is no variable,
    key or id): per name its description (flex point, label, digits), its values with missing as
    0 (for sums) and as observed (NaN for filters, as the engines' SQL sees them)."""
    import pyarrow as pa

    numeric: dict[str, dict[str, Any]] = {}
    values: dict[str, np.ndarray] = {}
    observed: dict[str, np.ndarray] = {}
    candidates = list(numeric_cfg) or [
        c for c in table.column_names
        if c not in variables and c != key_column and not c.endswith("_id") and c != "id"
        and (pa.types.is_floating(table.column(c).type) or pa.types.is_integer(table.column(c).type))
    ]
    for name in candidates:
        if name not in table.column_names:
            raise InputError(f"setting 'numeric': {name!r} is not a column of the records", where=str(src))
        raw = table.column(name).to_numpy(zero_copy_only=False).astype(float)
        # sums count a missing value as 0; filters see it missing (NaN), as the engines' SQL does
        observed[name] = raw
        x = np.where(np.isnan(raw), 0.0, raw)
        if name in numeric_cfg:
            fp, label = numeric_cfg[name].flex_point, numeric_cfg[name].label or name
        else:
            # a round number near the typical value: no statistic of the records is published
            nz = np.abs(x[x != 0])
            fp = float(10 ** math.floor(math.log10(float(np.median(nz))))) if nz.size else 1.0
            label = name
        numeric[name] = {"flex_point": fp, "label": label, "digits": 2}
        values[name] = x
    return numeric, values, observed


def _save_arrays(folder: Path, order: np.ndarray, codes: Mapping[str, np.ndarray], k: np.ndarray,
                 values: Mapping[str, np.ndarray], observed: Mapping[str, np.ndarray],
                 numeric: Mapping[str, Mapping[str, Any]]) -> None:
    """The record arrays in ``order`` as ``.npy`` files: codes, the keys split at :data:`SPLIT`
    bits (and their running sum), each numeric variable as observed and in fixed point split
    likewise, so float64 bincounts stay exact."""
    for name, c in codes.items():
        np.save(folder / f"codes_{name}.npy", c[order])
    ks = k[order]
    np.save(folder / "key_lo.npy", (ks & ((1 << SPLIT) - 1)).astype(np.float64))
    np.save(folder / "key_hi.npy", (ks >> SPLIT).astype(np.float64))
    np.save(folder / "key_cum.npy", np.concatenate([[0], np.cumsum(ks)]).astype(np.int64))
    for name, x in values.items():
        xs = x[order]
        fixed = round_half_away(xs * 10 ** numeric[name]["digits"])
        hi = np.floor_divide(fixed, 1 << SPLIT)
        np.save(folder / f"value_{name}.npy", observed[name][order])
        np.save(folder / f"fixed_lo_{name}.npy", (fixed - hi * (1 << SPLIT)).astype(np.float64))
        np.save(folder / f"fixed_hi_{name}.npy", hi.astype(np.float64))


def _replace_folder(tmp: Path, out_dir: Path) -> None:
    """Move the finished folder ``tmp`` to ``out_dir``, replacing an earlier preparation whole."""
    if out_dir.exists():
        old = out_dir.with_name(out_dir.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(out_dir, old)
        os.replace(tmp, out_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, out_dir)


def open_prepared(settings: Any, *, prepare_if_missing: bool = True) -> Prepared:
    """The prepared data of ``settings``, preparing them on first start; refuses data whose
    records changed since they were prepared (answers would change: prepare again on purpose)."""
    path = settings.prepared_path
    if not (path / "manifest.json").is_file():
        if not prepare_if_missing:
            raise InputError("no prepared data: run `tabsafe serve --prepare`", where=str(path))
        prepare(settings)
    data = Prepared(path)
    src = settings.records_path
    if src.is_file() and data.manifest["source"]["sha256"] != _sha256(src):
        raise InputError("the records changed since they were prepared; run `tabsafe serve --prepare` to serve "
                         "the new records (answers will change)", where=str(src))
    return data
