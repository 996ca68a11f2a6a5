"""The differencing audit's pure functions: published cells as boxes of sets of base codes, the
filters as boxes (compiled by :func:`tabsafe.model.filter.fold`), and the search for slivers
(:mod:`tabsafe.risk.differencing`, "Method"). No file is read and no engine runs here."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from tabsafe.errors import InputError
from tabsafe.model import filter as flt
from tabsafe.model.hierarchy import TOTAL
from tabsafe.risk.differencing.spec import CodeRange, Derived, DifferencingSpec, Item, TableDef

# --------------------------------------------------------------------------- the result


@dataclass(frozen=True)
class AuditResult:
    """What the audit found.

    Attributes:
        slivers: one row per new sliver (columns in :data:`SLIVER_COLUMNS`), small ones first;
            ``box`` maps each restricted base variable to the base codes the sliver admits.
        summary: tables, cells, distinct boxes, pairs examined, slivers, small, zero, redundant.
        threshold: the threshold used (small = ``0 < count < threshold``).
    """

    slivers: pd.DataFrame
    summary: Mapping[str, int]
    threshold: int

    @property
    def small(self) -> pd.DataFrame:
        """The disclosive slivers: ``0 < count < threshold``."""
        return self.slivers[self.slivers["small"]].reset_index(drop=True)

    @property
    def zeros(self) -> pd.DataFrame:
        """Zero slivers (a group of the population has none of a category)."""
        return self.slivers[self.slivers["zero"]].reset_index(drop=True)


#: Columns of :attr:`AuditResult.slivers`.
SLIVER_COLUMNS = ("order", "count", "small", "zero", "variable", "sliver", "tables", "outer", "inner",
                  "outer_count", "inner_count", "box")


# --------------------------------------------------------------------------- sets and boxes


def _numeric(code: str) -> float | None:
    """A code as a number, as the filters read a text that is one (:func:`tabsafe.model.filter.text_number`)."""
    return flt.text_number(code)


class CodeSets:
    """The distinct sets of base codes of one base variable (bit masks), interned to ids.

    ``domain`` is the variable's codelist in the engine's order; ``kind`` is its column's kind
    (``"integer"``/``"number"``: codes are numbers and named codes match by value).
    """

    def __init__(self, variable: str, domain: Sequence[str], kind: str = "text") -> None:
        self.variable = variable
        self.domain = list(domain)
        self.kind = kind
        self.index = {c: i for i, c in enumerate(self.domain)}
        numbers = [_numeric(c) for c in self.domain]
        self.numbers = np.array([np.nan if x is None else x for x in numbers], dtype=np.float64)
        self.texts = np.array(self.domain, dtype=object)
        self.numeric = kind in {"integer", "number"}
        self.masks: list[np.ndarray] = []
        self.ids: dict[bytes, int] = {}
        self.labels: dict[int, str] = {}
        self.full = self.intern(np.ones(len(self.domain), dtype=bool))

    def intern(self, mask: np.ndarray, label: str | None = None) -> int:
        key = np.packbits(mask).tobytes()
        sid = self.ids.get(key)
        if sid is None:
            sid = len(self.masks)
            self.ids[key] = sid
            self.masks.append(mask)
        if label is not None and sid not in self.labels:
            self.labels[sid] = label
        return sid

    def code_mask(self, code: str) -> np.ndarray | None:
        """The codes equal to ``code``: by text, or by value on a numeric column (15 = 15.0)."""
        i = self.index.get(code)
        if i is not None:
            mask = np.zeros(len(self.domain), dtype=bool)
            mask[i] = True
            return mask
        x = _numeric(code) if self.numeric else None
        if x is None:
            return None
        mask = self.numbers == x
        return mask if mask.any() else None

    def mask_of(self, items: Sequence[Item], where: str) -> np.ndarray:
        mask = np.zeros(len(self.domain), dtype=bool)
        for item in items:
            if isinstance(item, CodeRange):
                mask |= (self.numbers >= item.low) & (self.numbers <= item.high)
            else:
                hit = self.code_mask(item)
                if hit is None:
                    raise InputError(f"{where}: {item!r} is not a code of {self.variable!r}")
                mask |= hit
        return mask

    def matrix(self) -> sp.csr_matrix:
        dense = np.vstack(self.masks)
        return sp.csr_matrix(dense.astype(np.int32))

    def describe(self, sid: int) -> str:
        label = self.labels.get(sid)
        if label is not None:
            return label
        members = np.flatnonzero(self.masks[sid])
        if len(members) == 0:
            return f"{self.variable} in {{}}"
        # runs of consecutive domain positions print as a..b
        parts: list[str] = []
        start = prev = members[0]
        for m in list(members[1:]) + [None]:
            if m is not None and m == prev + 1:
                prev = m
                continue
            a, b = self.domain[start], self.domain[prev]
            parts.append(a if start == prev else (f"{a}..{b}" if prev > start + 1 else f"{a}, {b}"))
            if m is not None:
                start = prev = m
        if len(members) == 1:
            return f"{self.variable}={parts[0]}"
        return f"{self.variable} in {{{', '.join(parts)}}}"


@dataclass
class _Dim:
    base: str
    codes: list[str]
    set_ids: list[int]


def _domains(spec: DifferencingSpec, variables: Sequence[str], codes: Sequence[Sequence[str]],
             kinds: Sequence[str]) -> dict[str, CodeSets]:
    """Each base variable's codes as the engine orders them: its declared codelist (``meta:``),
    else the codes in the data by :func:`~tabsafe.engines.planner.natural_key`.

    Codes named in recodes, filters and hierarchies must be among them, so a typo is an error;
    declare a codelist to name codes that have no records.
    """
    out: dict[str, CodeSets] = {}
    for v, domain, kind in zip(variables, codes, kinds, strict=True):
        out[v] = CodeSets(v, domain, kind)
        # recode names describe sets better than lists of base codes, so they label first
        for d in spec.derived.values():
            if d.base == v:
                for code, items in d.codes:
                    out[v].intern(out[v].mask_of(items, f"{spec.source}: derived {d.name!r} code {code!r}"),
                                  label=f"{d.name}={code}")
        for c in out[v].domain:
            out[v].intern(out[v].mask_of([c], spec.source), label=f"{v}={c}")
    return out


def _base_name(derived: Mapping[str, Derived], var: str) -> str:
    return derived[var].base if var in derived else var


def _base_of(derived: Mapping[str, Derived], var: str, sets: Mapping[str, CodeSets], where: str) -> str:
    if var in derived:
        return derived[var].base
    if var in sets:
        return var
    raise InputError(f"{where}: unknown variable {var!r} (not in the data, not derived)")


def _var_codes(derived: Mapping[str, Derived], var: str, sets: Mapping[str, CodeSets], where: str) -> dict[str, np.ndarray]:
    """Code -> base-code mask for a base or derived variable (leaves only)."""
    if var in derived:
        d = derived[var]
        s = sets[d.base]
        return {code: s.mask_of(items, f"{where}: derived {var!r} code {code!r}") for code, items in d.codes}
    s = sets[var]
    eye = np.eye(len(s.domain), dtype=bool)
    return {c: eye[i] for i, c in enumerate(s.domain)}


# --------------------------------------------------------------------------- filters on base codes


def _leaf(derived: Mapping[str, Derived], sets: Mapping[str, CodeSets], where: str) -> Callable[[flt.Test, bool], np.ndarray]:
    """A test's literal (``negated``: the test false) as the base codes of its variable's base
    variable it holds on — compiled by :func:`tabsafe.model.filter.fold`, the filters' one
    meaning. A base variable's codes are tested as the engine's SQL tests the column (its kind:
    numbers or text); a derived variable's code is the set of base codes it stands for, and
    ``!=``/``not in`` the other base codes. Named codes must be codes (a typo is an error)."""

    def run(node: flt.Test, negated: bool) -> np.ndarray:
        var = node.variable
        base = _base_of(derived, var, sets, where)
        s = sets[base]
        if var not in derived:
            try:
                p = flt.predicate(node, s.kind)
            except InputError as exc:
                raise InputError(f"{where}: ({node.to_text()}): {exc.what.removeprefix('filter: ')}") from None
            if p.op == "in":
                for v in (node.values if isinstance(node, flt.In) else (node.value,)):
                    if s.code_mask(v.text) is None:
                        raise InputError(f"{where}: {v.text!r} is not a code of {var!r}")
            return flt.truth_mask(p, s.numbers if p.numeric else s.texts, negated)
        if isinstance(node, flt.Compare) and node.op not in {"=", "!="}:
            raise InputError(f"{where}: ({node.to_text()}) orders the codes of {var!r}, which are sets of "
                             f"{base!r} codes, not numbers: compare {base!r} instead")
        codes = _var_codes(derived, var, sets, where)
        mask = np.zeros(len(s.domain), dtype=bool)
        for v in (node.values if isinstance(node, flt.In) else (node.value,)):
            hit = codes.get(v.text)
            if hit is None:
                raise InputError(f"{where}: {v.text!r} is not a code of {var!r}")
            mask |= hit
        negate = node.negate if isinstance(node, flt.In) else node.op == "!="
        return ~mask if negate != negated else mask

    return run


def filter_masks(derived: Mapping[str, Derived], node: flt.Filter | None, sets: Mapping[str, CodeSets],
                 where: str) -> dict[str, np.ndarray]:
    """The filter as a box: per base variable it restricts, the base codes it admits.

    Refuses, naming the part, a filter that is not an ``and`` of parts on one base variable
    each (after ``not`` is pushed inwards): its admitted set is no box, and the box method
    cannot difference it.
    """
    if node is None:
        return {}
    top = flt.nnf(node)
    parts = top.parts if isinstance(top, flt.And) else (top,)
    out: dict[str, np.ndarray] = {}
    leaf = _leaf(derived, sets, where)
    for part in parts:
        bases = list(dict.fromkeys(_base_of(derived, v, sets, where) for v in part.variables))
        if len(bases) > 1:
            raise InputError(
                f"{where}: the filter part ({part.to_text()}) ties {' and '.join(map(repr, bases))} together; the "
                "audit needs an 'and' of conditions on one base variable each (write one table per box)")
        admitted = flt.fold(part, leaf, lambda ms: np.logical_and.reduce(ms), lambda ms: np.logical_or.reduce(ms))
        out[bases[0]] = out[bases[0]] & admitted if bases[0] in out else admitted
    return out


def _table_dims(spec: DifferencingSpec, t: TableDef, sets: Mapping[str, CodeSets]) -> tuple[list[_Dim], dict[str, np.ndarray]]:
    where = f"{spec.source}: table {t.name!r}"
    filters = filter_masks(spec.derived, t.where, sets, where)
    dims: list[_Dim] = []
    bases_used: dict[str, str] = {}
    for var in t.by:
        base = _base_of(spec.derived, var, sets, where)
        if base in bases_used:
            raise InputError(f"{where}: {var!r} and {bases_used[base]!r} are both built from {base!r}; "
                             "a table may use each base variable once")
        bases_used[base] = var
        leaves = _var_codes(spec.derived, var, sets, where)
        h = t.hierarchies.get(var)
        if h is not None:
            unknown = sorted(set(h.leaves) - set(leaves))
            if unknown:
                raise InputError(f"{where}: hierarchy leaf {unknown[0]!r} is not a code of {var!r}")
            codes_order = list(h.order) if t.margins else list(h.leaves)
            masks: dict[str, np.ndarray] = {}
            for code in reversed(h.order):  # children before parents
                if h.is_leaf(code):
                    masks[code] = leaves[code]
                else:
                    masks[code] = np.logical_or.reduce([masks[c] for c in h.children(code)])
        else:
            codes_order = ([TOTAL] if t.margins else []) + list(leaves)
            masks = dict(leaves)
            masks[TOTAL] = np.logical_or.reduce(list(leaves.values()))
        f = filters.get(base)
        set_ids = []
        for code in codes_order:
            m = masks[code] if f is None else masks[code] & f
            label = f"{var}={code}" if var != base or code != TOTAL else None
            set_ids.append(sets[base].intern(m, label=label if f is None else None))
        dims.append(_Dim(base=base, codes=codes_order, set_ids=set_ids))
    return dims, filters


# --------------------------------------------------------------------------- the audit


def _overlaps(s: CodeSets) -> tuple[pd.DataFrame, np.ndarray]:
    """Every pair of sets of ``s`` that share a code, with the number shared; and the set sizes."""
    m = s.matrix()
    sizes = np.asarray(m.sum(axis=1)).ravel().astype(np.int64)
    inter = (m @ m.T).tocoo()
    return pd.DataFrame({"a": inter.row.astype(np.int64), "b": inter.col.astype(np.int64),
                         "k": inter.data.astype(np.int64)}), sizes


def _strict_subsets(overlaps: pd.DataFrame, sizes: np.ndarray) -> pd.DataFrame:
    """All pairs (sa, sb) of set ids with set sa a strict, non-empty subset of set sb."""
    a, b, k = (overlaps[c].to_numpy() for c in ("a", "b", "k"))
    keep = (k == sizes[a]) & (sizes[a] < sizes[b]) & (sizes[a] > 0)
    return pd.DataFrame({"sa": a[keep], "sb": b[keep]})


def _table_counts(dims: Sequence[_Dim], filters: Mapping[str, np.ndarray], sets: Mapping[str, CodeSets],
                  col: Mapping[str, int], code_idx: np.ndarray, weights: np.ndarray,
                  shape: Sequence[int]) -> np.ndarray:
    """Counts of every cell of one table, row-major over ``shape``, from the grouped data."""
    keep = np.ones(len(weights), dtype=bool)
    for b, m in filters.items():
        keep &= m[code_idx[:, col[b]]]
    frame = pd.DataFrame({f"d{k}": code_idx[keep, col[d.base]] for k, d in enumerate(dims)})
    frame["n"] = weights[keep]
    if not dims:
        return np.array([int(frame["n"].sum())], np.int64)
    frame = frame.groupby([f"d{k}" for k in range(len(dims))], sort=False)["n"].sum().reset_index()
    # expand each base code into every code of the dimension that contains it, one dimension at a time
    for k, d in enumerate(dims):
        s = sets[d.base]
        member = np.vstack([s.masks[i] for i in d.set_ids])  # codes x domain
        ci, bi = np.nonzero(member)
        link = pd.DataFrame({f"d{k}": bi, f"c{k}": ci})
        frame = frame.merge(link, on=f"d{k}").drop(columns=f"d{k}")
        keys = [f"c{i}" for i in range(k + 1)] + [f"d{i}" for i in range(k + 1, len(dims))]
        frame = frame.groupby(keys, sort=False)["n"].sum().reset_index()
    out = np.zeros(int(np.prod(shape)), np.int64)
    flat = np.ravel_multi_index(tuple(frame[f"c{k}"].to_numpy() for k in range(len(dims))), tuple(shape))
    out[flat] = frame["n"].to_numpy(np.int64)
    return out


def _covered(s: CodeSets, overlaps: pd.DataFrame, sizes: np.ndarray, sig: np.ndarray, dloc: np.ndarray,
             inner: np.ndarray, outer: np.ndarray, known_sig: np.ndarray, known_set: np.ndarray) -> np.ndarray:
    """Whether each sliver set ``outer[dloc] \\ inner[dloc]`` (other sets ``sig``) is a union of known
    sets inside it.

    Such a sliver is no news: every record in it already sits in a known (published or derived)
    cell inside it (a union of siblings of a hierarchy, say). Cells with the same other sets
    usually share one family of sets of the variable (every row of a table), so the test runs
    once per family and sliver; a set lies inside ``B \\ A`` iff it lies in ``B`` and misses ``A``,
    read off the sparse overlaps, so the (often large) sliver sets are never built.
    """
    out = np.zeros(len(dloc), dtype=bool)
    if len(dloc) == 0:
        return out
    known = pd.DataFrame({"sig": known_sig, "s": known_set}).drop_duplicates()
    # a family id per signature: an order-free hash of its sets, and their number
    rand = np.random.default_rng(0).integers(0, 2**63, size=len(sizes), dtype=np.uint64)
    n_sig = int(known_sig.max()) + 1
    h = np.zeros(n_sig, np.uint64)
    np.add.at(h, known["sig"].to_numpy(), rand[known["s"].to_numpy()])
    n = np.bincount(known["sig"].to_numpy(), minlength=n_sig)
    fam, _ = pd.factorize(pd.Series(h.astype(np.int64)).astype(str) + ":" + pd.Series(n).astype(str))
    members = pd.DataFrame({"f": fam[known["sig"].to_numpy()], "s": known["s"].to_numpy()}).drop_duplicates()
    m = s.matrix()[: len(sizes)]
    members = _minimal(members, overlaps, sizes, m)
    wanted = pd.DataFrame({"f": fam[sig], "d": dloc}).drop_duplicates().reset_index(drop=True)
    per_family = members.groupby("f").size()
    cost = per_family.reindex(wanted["f"]).fillna(0).to_numpy(np.int64)
    covered = np.zeros(len(wanted), dtype=bool)
    # bounded memory: the candidate (sliver, set) rows are built in chunks of about CHUNK rows
    bounds = np.searchsorted(np.cumsum(cost), np.arange(0, int(cost.sum()) + _CHUNK, _CHUNK)[1:], side="right")
    start = 0
    for stop in list(bounds) + [len(wanted)]:
        if stop <= start:
            continue
        part = wanted.iloc[start:stop].copy()
        part["w"] = np.arange(len(part))
        covered[start:stop] = _covered_part(part, members, overlaps, sizes, m, inner, outer)
        start = stop
    lookup = pd.DataFrame({"f": fam[sig], "d": dloc}).merge(wanted.assign(c=covered), on=["f", "d"], how="left")
    return lookup["c"].to_numpy(bool)


_CHUNK = 4_000_000


def _minimal(members: pd.DataFrame, overlaps: pd.DataFrame, sizes: np.ndarray, m: sp.csr_matrix) -> pd.DataFrame:
    """Keep, per family, the sets that are minimal for some code (not a union of their subsets).

    A sliver is a union of a family's sets inside it iff it is a union of these: any set inside
    it contains a minimal set for each of its codes.
    """
    sub = overlaps[(overlaps["k"].to_numpy() == sizes[overlaps["a"].to_numpy()])
                   & (sizes[overlaps["a"].to_numpy()] < sizes[overlaps["b"].to_numpy()])]
    pairs = (members.rename(columns={"s": "b"}).merge(sub[["a", "b"]], on="b")
             .merge(members.rename(columns={"s": "a"}), on=["f", "a"]))
    if pairs.empty:
        return members
    keys = members.reset_index(drop=True)
    keys["row"] = np.arange(len(keys))
    pairs = pairs.merge(keys.rename(columns={"s": "b"}), on=["f", "b"])
    pick = sp.csr_matrix((np.ones(len(pairs), np.int8), (pairs["row"].to_numpy(), np.arange(len(pairs)))),
                         shape=(len(keys), len(pairs)))
    union = (pick @ m[pairs["a"].to_numpy()]).tocsr()
    union.data[:] = 1
    covered = np.asarray(union.sum(axis=1)).ravel() == sizes[keys["s"].to_numpy()]
    return keys.loc[~covered, ["f", "s"]]


def _covered_part(wanted: pd.DataFrame, members: pd.DataFrame, overlaps: pd.DataFrame, sizes: np.ndarray,
                  m: sp.csr_matrix, inner: np.ndarray, outer: np.ndarray) -> np.ndarray:
    cand = wanted.merge(members, on="f")
    cand["A"], cand["B"] = inner[cand["d"].to_numpy()], outer[cand["d"].to_numpy()]
    cand = cand.merge(overlaps.rename(columns={"a": "s", "b": "B", "k": "kB"}), on=["s", "B"])
    cand = cand.merge(overlaps.rename(columns={"a": "s", "b": "A", "k": "kA"}), on=["s", "A"], how="left")
    size_s = sizes[cand["s"].to_numpy()]
    cand = cand[(cand["kB"].to_numpy() == size_s) & cand["kA"].isna().to_numpy() & (size_s > 0)]
    if cand.empty:
        return np.zeros(len(wanted), dtype=bool)
    pick = sp.csr_matrix((np.ones(len(cand), np.int8), (cand["w"].to_numpy(), np.arange(len(cand)))),
                         shape=(len(wanted), len(cand)))
    union = (pick @ m[cand["s"].to_numpy()]).tocsr()
    union.data[:] = 1
    d = wanted["d"].to_numpy()
    return np.asarray(union.sum(axis=1)).ravel() == sizes[outer[d]] - sizes[inner[d]]


def _describe(box: np.ndarray, base_vars: Sequence[str], sets: Mapping[str, CodeSets], *, j: int, sa: int,
              sb: int) -> str:
    """The sliver in words: the other variables' sets, then ``outer but not inner (what is left)``."""
    parts = [sets[v].describe(int(box[k])) for k, v in enumerate(base_vars) if k != j and box[k] != sets[v].full]
    s = sets[base_vars[j]]
    outer = "all" if sb == s.full else s.describe(sb)
    parts.append(f"{outer} but not {s.describe(sa)} ({s.describe(int(box[j]))})")
    return ", ".join(parts)
