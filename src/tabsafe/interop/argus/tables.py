"""The tables of a tau-ARGUS job: built from microdata or read from a ``.tab`` file, given
tau-ARGUS statuses by the job's rules and a-priori files, protected by tabsafe's methods.

Source: the tau-ARGUS manual (safety rules, a-priori statuses, suppression methods); tabsafe's
``suppress``, ``controlled-round`` and ``ckm`` methods do the protection (see
:mod:`.runner` for how each command is reported).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tabsafe.interop.argus._text import fail
from tabsafe.interop.argus.arb import Command
from tabsafe.interop.argus.job import Job, JobTable, read_file, records_of, resolve
from tabsafe.interop.argus.writetable import CS, CellTable
from tabsafe.model.hierarchy import TOTAL, Hierarchy
from tabsafe.model.table import Dimension, Table

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.interop.argus.rda import Variable

__all__ = ["cells_of", "protect", "table_from_tab"]

_TAB_STATUS = {"S": CS["safe_manual"], "U": CS["unsafe_manual"], "P": CS["protect_manual"],
               "M": CS["secondary_manual"], "E": CS["empty"]}


def _sorted_codes(codes: Any, v: Variable) -> list[str]:
    width = max([len(c) for c in codes] + [1])
    valid = sorted((c for c in codes if c not in v.missing), key=lambda c: c.rjust(width))
    return valid + [m for m in v.missing if m in codes]


def _hierarchy(job: Job, v: Variable, codes: list[str], cmd: Command) -> Hierarchy:
    """The hierarchy of an explanatory variable: its ``.hrc`` file, its digit levels, or the
    codes found (sorted as tau-ARGUS sorts them, missing codes last)."""
    from tabsafe.interop.argus.hrc import digit_hierarchy, read_hrc

    present = [m for m in v.missing if m in codes]
    if v.hierfile:
        bases = [d for d in (job.meta_dir, job.data.parent if job.data else None, job.arb.parent) if d]
        path = resolve(v.hierfile, bases, job.src, cmd.line, f"hierarchy of {v.name}")
        return read_hrc(read_file(path, job.src, cmd.line, f"hierarchy of {v.name}"), lead=v.leadstring or "@",
                        source=path.name, extra=present)
    if v.hierlevels:
        return digit_hierarchy(codes, v.hierlevels, missing=v.missing, source=f"{v.name} <HIERLEVELS>")
    return Hierarchy.flat(_sorted_codes(set(codes), v), source=v.name)


def _recoded(job: Job, t: JobTable, v: Variable, column: list[str], h: Hierarchy, cmd: Command
             ) -> tuple[list[str], Hierarchy]:
    from tabsafe.interop.argus.grc import apply_rules, close_nodes, read_grc, truncate

    kind, payload = t.recodes[v.name.lower()]
    if kind == "digit":
        h2, mapping = truncate(h, int(payload))
        return [mapping.get(c, c) for c in column], h2
    text, name = payload.split("\x00")
    recode = read_grc(text, source=name)
    if recode.tree is not None:
        h2, mapping = close_nodes(h, recode.tree, source=name)
        return [mapping.get(c, c) for c in column], h2
    mapping = apply_rules(recode, sorted(set(column)), width=v.length or max(len(c) for c in column), source=name)
    new = [mapping[c] for c in column]
    return new, Hierarchy.flat(_sorted_codes(set(new), v), source=v.name)


def explanatory(job: Job, t: JobTable, cmd: Command, records: Any) -> tuple[dict[str, Any], dict[str, Hierarchy]]:
    """Each explanatory variable's column of codes (recoded as the job says) and its hierarchy."""
    import pyarrow as pa

    assert job.meta is not None
    columns: dict[str, Any] = {}
    hierarchies: dict[str, Hierarchy] = {}
    for name in t.expl:
        v = job.meta.variable(name)
        column = records.column(v.name).to_pylist()
        h = _hierarchy(job, v, column, cmd)
        known = set(h.leaves)
        bad = next((k for k, c in enumerate(column) if c not in known), None)
        if bad is not None and job.data is not None:
            raise fail(job.data.name, job.record_lines[bad], v.name, "a code that is not a leaf of the variable's hierarchy")
        if v.name.lower() in t.recodes:
            column, h = _recoded(job, t, v, column, h, cmd)
        columns[v.name] = pa.array(column, pa.string())
        hierarchies[v.name] = h
    return columns, hierarchies


def _micro_table(job: Job, t: JobTable, cmd: Command) -> Table:
    import pyarrow as pa

    from tabsafe.model.microdata import Microdata
    from tabsafe.tabulation import tabulate

    records = records_of(job, cmd)
    assert job.meta is not None
    columns, hierarchies = explanatory(job, t, cmd, records)
    sums: tuple[str, ...] = ()
    digits = 2
    if t.response.upper() != "<FREQ>":
        rv = job.meta.variable(t.response)
        columns[rv.name] = records.column(rv.name).fill_null(0.0)
        sums, digits = (rv.name,), rv.decimals or 0
    md = Microdata.from_frame(pa.table(columns))
    return tabulate(md, [job.meta.variable(n).name for n in t.expl], hierarchies=hierarchies, sums=sums,
                    sum_digits=digits).densify()


def table_from_tab(job: Job, t: JobTable, cmd: Command) -> tuple[Table, CellTable]:
    """The table a ``.tab`` file holds (every cell given, totals included) and its statuses."""
    from tabsafe.interop.argus.tab import read_tab

    assert job.meta is not None and job.data is not None
    data = read_tab(read_file(job.data, job.src, cmd.line, "data file"), job.meta, source=job.data.name)
    dims, positions = [], []
    for name in t.expl:
        v = job.meta.variable(name)
        column = list(data.columns[v.name])
        total = v.total_code or ""
        codes = [c for c in dict.fromkeys(column) if c != total]
        h = _hierarchy(job, v, codes, cmd) if v.hierfile else Hierarchy.flat(codes, source=v.name)
        pos = h.position
        rows = []
        for k, c in enumerate(column):
            code = TOTAL if c == total else c
            if code not in pos:
                raise fail(job.data.name, data.lines[k], f"field of {v.name}", "a code not in the variable's hierarchy")
            rows.append(pos[code])
        dims.append(Dimension(v.name, h))
        positions.append(np.array(rows))
    n = data.n_cells
    freq_var = job.meta.with_role("frequency")
    freq = np.array(data.columns[freq_var[0].name], dtype=np.float64) if freq_var else np.ones(n)
    if t.response.upper() == "<FREQ>":
        value = freq
        decimals = 0
    else:
        rv = job.meta.variable(t.response)
        value, decimals = np.array(data.columns[rv.name], dtype=np.float64), rv.decimals or 0
    status_var = job.meta.with_role("status")
    status = (np.array([_TAB_STATUS[s] for s in data.columns[status_var[0].name]]) if status_var
              else np.where((freq == 0) & (value == 0), CS["empty"], CS["safe"]))
    cols = {"count": value, "freq": freq, "status": status}
    for role in ("lowerpl", "upperpl"):
        rv_ = job.meta.with_role(role)
        cols[role] = np.array(data.columns[rv_[0].name], dtype=np.float64) if rv_ else np.zeros(n)
    table = Table.from_positions(dims, positions, cols)
    _check_additive(table, job.data.name, data.lines, positions, decimals)
    if table.n_stored != table.n_cells:
        table = table.densify()
        missing = table.column("status") == 0
        table = table.with_values(status=np.where(missing, CS["empty"], table.column("status")))
    return table, _cells(table, "Freq" if t.response.upper() == "<FREQ>" else t.response, decimals)


def _check_additive(table: Table, source: str, lines: tuple[int, ...], positions: list[np.ndarray],
                    decimals: int) -> None:
    """Every given total must be the sum of its children (tau-ARGUS checks this on reading a
    table; suppression of a table that does not add up would protect nothing)."""
    dense = table.densify()
    value = np.asarray(dense.column("count"), dtype=np.float64)
    strides = dense.strides
    ids = sum(np.asarray(p, dtype=np.int64) * s for p, s in zip(positions, strides))
    line_of = dict(zip(ids.tolist(), lines))
    tol = 0.5 * 10.0 ** -decimals
    for rel in dense.relations():
        sums = np.add.reduceat(value[rel.child_rows], rel.child_ptr[:-1]) if rel.child_rows.size else np.zeros(0)
        bad = np.flatnonzero(np.abs(sums - value[rel.total_rows]) > tol)
        if bad.size:
            cell = int(rel.total_rows[bad[0]])
            variable = dense.dimensions[rel.dimension].variable
            raise fail(source, line_of.get(cell), "cell", f"a total that is not the sum of its parts along {variable} "
                       "(is the variable's hierarchy in the metadata?)")


def _cells(table: Table, response: str, decimals: int) -> CellTable:
    value = np.asarray(table.column("count"), dtype=np.float64)
    return CellTable(tuple(table.dimensions), value, np.asarray(table.column("freq"), dtype=np.float64),
                     np.asarray(table.column("status"), dtype=np.int64).copy(), value.copy(), response, decimals,
                     table.column("lowerpl") if "lowerpl" in table.value_columns else None,
                     table.column("upperpl") if "upperpl" in table.value_columns else None)


def _micro_cells(job: Job, t: JobTable, cmd: Command) -> tuple[Table, CellTable]:
    dense = _micro_table(job, t, cmd)
    freq = np.asarray(dense.counts, dtype=np.float64)
    if t.response.upper() == "<FREQ>":
        value, response, decimals = freq, "Freq", 0
    else:
        assert job.meta is not None
        rv = job.meta.variable(t.response)
        value, response, decimals = np.asarray(dense.column(f"sum_{rv.name}"), dtype=np.float64), rv.name, rv.decimals or 0
    status = np.where((freq == 0) & (value == 0), CS["empty"], CS["safe"])
    base = Table.from_grid(dense.dimensions, {"count": value, "freq": freq, "status": status})
    return base, _cells(base, response, decimals)


def cells_of(job: Job, t: JobTable, cmd: Command) -> CellTable:
    """The table's cells with their current statuses (built on first use)."""
    if t.cells is None:
        if job.tabular:
            raise fail(job.src, cmd.line, f"<{cmd.keyword}>", "read the table first (<READTABLE>)")
        t.base, t.cells = _micro_cells(job, t, cmd)
    return t.cells


def _statuses(job: Job, t: JobTable, cells: CellTable, cmd: Command) -> tuple[np.ndarray, float]:
    """Primary statuses by the rules and a-priori entries; the protection ratio they ask for."""
    from tabsafe.risk.rules import threshold_rule

    status = cells.status.copy()
    ratio = 0.0
    freq_rules = [r for r in (t.rules or ()) if r.kind == "FREQ"]
    if freq_rules and freq_rules[0].values[0] > 0:
        grid = Table.from_grid(cells.dimensions, {"count": cells.freq})
        flagged = threshold_rule(grid, freq_rules[0].values[0]) & (status == CS["safe"])
        status[flagged] = CS["unsafe_freq"]
        ratio = freq_rules[0].values[1] / 100.0
    for r in t.rules or ():
        if r.kind == "MAN":
            ratio = max(ratio, r.values[0] / 100.0)
        if r.kind == "MIS" and r.values[0] == 1 and job.meta is not None:
            missing = _missing_cells(job, cells)
            status[missing & (status >= 3) & (status <= 9)] = CS["safe"]
    _apply_apriori(job, t, cells, status, cmd)
    return status, ratio


def _missing_cells(job: Job, cells: CellTable) -> np.ndarray:
    assert job.meta is not None
    out = np.zeros(cells.status.size, dtype=bool)
    for i in range(out.size):
        out[i] = any(c in job.meta.variable(d.variable).missing for c, d in zip(cells.codes(i), cells.dimensions))
    return out


def _apply_apriori(job: Job, t: JobTable, cells: CellTable, status: np.ndarray, cmd: Command) -> None:
    new = {"S": CS["safe_manual"], "U": CS["unsafe_manual"], "P": CS["protect_manual"],
           "M": CS["secondary_manual"], "ML": CS["secondary_manual"]}
    sizes = [len(d.hierarchy.order) for d in cells.dimensions]
    for source, e in t.apriori:
        if e.action not in new:
            continue
        idx = 0
        for k, (code, d, size) in enumerate(zip(e.codes, cells.dimensions, sizes)):
            code = TOTAL if code == (job.meta.variable(d.variable).total_code if job.meta else None) else code
            if code not in d.hierarchy.position:
                raise fail(source, e.line, f"field {k + 1}", "a code not in the table")
            idx = idx * size + d.hierarchy.position[code]
        if status[idx] != CS["empty"]:
            status[idx] = new[e.action]


def protect(job: Job, t: JobTable, cmd: Command) -> tuple[str, str]:
    """Run ``<SUPPRESS>`` on table ``t``: the outcome and the text stating the mapping."""
    from dataclasses import replace

    method, _, params, rest = cmd.args
    cells = cells_of(job, t, cmd)
    status, ratio = _statuses(job, t, cells, cmd)
    if method in {"GH", "MOD", "NET", "OPT"}:
        return _suppress(t, cells, status, ratio, method, params)
    if method == "RND":
        return _round(t, cells, status, params)
    if method == "CKM":
        return _ckm(job, t, cmd, rest)
    t.cells = replace(cells, status=status)
    return "not-run", "controlled tabular adjustment (CTA) is not available in tabsafe"


def _suppress(t: JobTable, cells: CellTable, status: np.ndarray, ratio: float, method: str, params: tuple[float, ...]
              ) -> tuple[str, str]:
    from dataclasses import replace

    from tabsafe.protect.suppression.problem import Mode, Settings
    from tabsafe.protect.suppression.secondary import secondary_suppression

    primary = ((status >= 3) & (status <= 9)) | (status == CS["secondary_manual"])
    mode = Mode.OPTIMAL if method == "OPT" else Mode.FAST
    time_limit = params[0] * 60 if method == "OPT" and params else 60.0
    level = 1.0 if cells.decimals == 0 else 10.0 ** -cells.decimals
    settings = Settings(mode=mode, protection_level=level, protection_ratio=ratio, time_limit=time_limit)
    grid = Table.from_grid(cells.dimensions, {"count": cells.value})
    result = secondary_suppression(grid, primary, settings)
    new = status.copy()
    secondary = result.reason == "secondary"
    new[secondary] = np.where(status[secondary] == CS["safe_manual"], CS["secondary_manual"], CS["secondary"])
    published = np.where(result.reason == "published", cells.value, np.nan)
    t.cells = replace(cells, status=new, published=published, method="suppress")
    source = "tabsafe's optimal integer program (HiGHS)" if mode is Mode.OPTIMAL else "tabsafe's fast mode"
    tau = "its optimal method" if method == "OPT" else _SUPPRESS_MAP[method]
    protected = int((status == CS["protect_manual"]).sum())
    note = (f"; {protected} protected (P) cells may be suppressed: tabsafe cannot forbid it" if protected else "")
    return "mapped", (f"{method} ran as suppress with {source} in place of tau-ARGUS's {tau}; "
                      f"{int(result.suppressed.sum())} cells suppressed{note}")


_SUPPRESS_MAP = {"GH": "hypercube method", "MOD": "modular method (HiTaS)", "NET": "network method"}


def _round(t: JobTable, cells: CellTable, status: np.ndarray, params: tuple[float, ...]) -> tuple[str, str]:
    from dataclasses import replace

    from tabsafe.registry import build_method

    if not params:
        return "not-run", "RND needs a rounding base"
    if cells.decimals:
        return "not-run", "tabsafe rounds whole numbers; the response has decimals"
    base = int(params[0])
    grid = Table.from_grid(cells.dimensions, {"count": cells.value.astype(np.int64)})
    result = build_method("controlled-round", {"base": base}).protect(grid)
    published = np.asarray(result.release.table.densify().counts, dtype=np.float64)
    t.cells = replace(cells, status=status, published=published, method="round")
    return "mapped", (f"RND ran as controlled-round --base {base} (HiGHS; steps, time, partitions and stopping "
                      "rule of tau-ARGUS are not used)")


def _ckm(job: Job, t: JobTable, cmd: Command, rest: str) -> tuple[str, str]:
    from dataclasses import replace

    from tabsafe.model.spec import KeySpec
    from tabsafe.registry import build_method

    assert job.meta is not None
    keys = job.meta.with_role("recordkey")
    if job.tabular or not keys:
        return "not-run", "the cell key method needs microdata with a <RECORDKEY>"
    if t.response.upper() != "<FREQ>":
        return "not-run", "the magnitude form of tau-ARGUS's cell key method is not supported by this runner"
    key = keys[0]
    name = rest.strip().strip('"') or key.pfile
    if not name:
        return "not-run", "no p-table (give it in the batch file or as <PFILE>)"
    path = resolve(name, [job.arb.parent] + ([job.meta_dir] if job.meta_dir else []), job.src, cmd.line, "p-table")
    digits = min(max(key.decimals or 15, 1), 15)
    import pyarrow as pa

    from tabsafe.model.microdata import Microdata
    from tabsafe.tabulation import tabulate

    records = records_of(job, cmd)
    cells = cells_of(job, t, cmd)
    cols = {d.variable: records.column(d.variable) for d in cells.dimensions}
    cols["rkey"] = records.column(key.name)
    hier = {d.variable: d.hierarchy for d in cells.dimensions}
    table = tabulate(Microdata.from_frame(pa.table(cols)), list(hier), hierarchies=hier,
                     key=KeySpec(column="rkey", digits=digits))
    method = build_method("ckm", {"ptable": str(path), "key": "rkey", "key_digits": digits})
    result = method.protect(table)
    published = np.asarray(result.release.table.densify().counts, dtype=np.float64)
    t.cells = replace(cells, published=published, method="ckm")
    return "mapped", f"CKM ran as tabsafe's ckm with the p-table file ({digits}-digit record keys)"
