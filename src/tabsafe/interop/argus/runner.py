"""Run a tau-ARGUS batch file headless with tabsafe's methods, saying what each command became.

Source: the tau-ARGUS manual ("Batch processing") for what each command means; tabsafe's
methods for what is done instead. Every command gets one :class:`Step`: ``ran`` (done as in
tau-ARGUS), ``mapped`` (done by tabsafe's nearest method — the text says which and how the result
differs), ``not-run`` (tabsafe cannot do it; the job goes on without it) or ``ignored`` (nothing
to do headless). Magnitude rules (p%, (n,k), request, zero, weights, holdings) run as
``magnitude-suppress`` on microdata (:mod:`.magnitude`; a table file lacks the contributions).

Outputs (``<WRITETABLE>``, ``<VERSIONINFO>``) are planned in an :class:`~tabsafe.io.Outputs`
before any work and written together at the end; formats that carry original values or which
cells are primary are written as evaluation files (mode 0600, :func:`.writetable.private`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabsafe.errors import InputError
from tabsafe.interop.argus._text import fail
from tabsafe.interop.argus.arb import FORMATS, Command, read_arb
from tabsafe.interop.argus.hst import read_hst
from tabsafe.interop.argus.job import Job, JobTable, Step, read_file, records_of, resolve
from tabsafe.interop.argus.rda import Variable, read_rda
from tabsafe.interop.argus.writetable import private, write_table
from tabsafe.io import Outputs

__all__ = ["JobResult", "Step", "planned_outputs", "run_job"]


@dataclass(frozen=True)
class JobResult:
    """The steps of a job and the files it wrote."""

    source: str
    steps: tuple[Step, ...]
    outputs: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"job": self.source, "steps": [s.__dict__ for s in self.steps], "outputs": list(self.outputs),
                "not_run": sum(s.outcome == "not-run" for s in self.steps)}


def planned_outputs(commands: list[Command], arb: Path) -> list[tuple[Command, Path, str]]:
    """The files a job writes (``<WRITETABLE>``, ``<VERSIONINFO>``) and their kind."""
    out = []
    for c in commands:
        if c.keyword == "WRITETABLE":
            _table, fmt, opts, path = c.args
            out.append((c, arb.parent / path, "evaluation" if private(fmt, dict(opts)) else "release"))
        elif c.keyword == "VERSIONINFO":
            out.append((c, arb.parent / c.args[0], "release"))
    return out


def run_job(arb: str | Path, out: Outputs) -> JobResult:
    """Execute the batch file ``arb``; its outputs go through ``out`` (planned here, committed by
    the caller's ``with`` block)."""
    arb = Path(arb)
    text = read_file(arb, arb.name, None, "job")  # type: ignore[arg-type]
    commands = read_arb(text, source=arb.name)
    paths: dict[int, Path] = {}
    for cmd, path, kind in planned_outputs(commands, arb):
        if not path.parent.is_dir():
            raise fail(arb.name, cmd.line, f"<{cmd.keyword}> file", "its folder does not exist")
        try:
            paths[cmd.line] = out.plan(path, kind=kind)
        except InputError as exc:
            raise fail(arb.name, cmd.line, f"<{cmd.keyword}> file", exc.what) from None
    job = Job(arb)
    for cmd in commands:
        if cmd.keyword == "//":
            continue
        if cmd.keyword == "GOINTERACTIVE":
            job.say(cmd, "ignored", "headless: the job ends here (tau-ARGUS would open its window)")
            break
        _dispatch(job, cmd, out, paths)
    for c in commands:  # planned outputs the job never reached are not left empty
        if c.line in paths and paths[c.line] not in out.temps:
            out.write_text(paths[c.line], "")
            job.steps.append(Step(c.line, c.keyword, "not-run", "the job ended before this output; written empty"))
    return JobResult(arb.name, tuple(job.steps), tuple(str(p) for p in paths.values()))


def _dispatch(job: Job, cmd: Command, out: Outputs, paths: dict[int, Path]) -> None:
    kw = cmd.keyword
    if kw in {"OPENMICRODATA", "OPENTABLEDATA"}:
        job.data = resolve(cmd.args[0], [job.arb.parent], job.src, cmd.line, f"<{kw}> file")
        job.tabular = kw == "OPENTABLEDATA"
        job.say(cmd, "ran", "data file found")
    elif kw == "OPENMETADATA":
        _open_metadata(job, cmd)
    elif kw == "SPECIFYTABLE":
        _specify(job, cmd)
    elif kw == "SAFETYRULE":
        _safety(job, cmd)
    elif kw in {"READMICRODATA", "READTABLE"}:
        _read_data(job, cmd)
    elif kw == "RECODE":
        _recode(job, cmd)
    elif kw == "APRIORI":
        _apriori(job, cmd)
    elif kw == "SUPPRESS":
        _suppress(job, cmd)
    elif kw == "WRITETABLE":
        _writetable(job, cmd, out, paths[cmd.line])
    elif kw == "VERSIONINFO":
        from tabsafe import __version__

        out.write_text(paths[cmd.line], f"tabsafe version: {__version__} (running a tau-ARGUS batch file)\n")
        job.say(cmd, "mapped", "wrote tabsafe's version (not tau-ARGUS's)")
    elif kw == "CLEAR":
        job.tables.clear()
        job.data = job.meta = job.records = None
        job.say(cmd, "ran", "tables and data cleared")
    elif kw == "SOLVER":
        job.say(cmd, "mapped", f"tabsafe solves with HiGHS, not {cmd.args[0]}")
    elif kw == "LOGBOOK":
        job.say(cmd, "ignored", "tabsafe reports each command on standard output and in --report")
    else:
        job.say(cmd, "ignored", "nothing to do headless in tabsafe")


def _open_metadata(job: Job, cmd: Command) -> None:
    if job.data is None:
        raise fail(job.src, cmd.line, "<OPENMETADATA>", "open the data first (<OPENMICRODATA> or <OPENTABLEDATA>)")
    path = resolve(cmd.args[0], [job.arb.parent, job.data.parent], job.src, cmd.line, "<OPENMETADATA> file")
    job.meta = read_rda(read_file(path, job.src, cmd.line, "<OPENMETADATA> file"),
                        kind="table" if job.tabular else "micro", source=path.name)
    job.meta_dir = path.parent
    job.say(cmd, "ran", f"{len(job.meta.variables)} variables")


def _var(job: Job, name: str, cmd: Command, what: str) -> Variable:
    assert job.meta is not None
    try:
        return job.meta.variable(name)
    except KeyError:
        raise fail(job.src, cmd.line, what, "not a variable of the metadata") from None


def _specify(job: Job, cmd: Command) -> None:
    if job.meta is None:
        raise fail(job.src, cmd.line, "<SPECIFYTABLE>", "open the metadata first")
    names, response, shadow, cost, lam = cmd.args
    for k, n in enumerate(names, 1):
        if not _var(job, n, cmd, f"<SPECIFYTABLE> variable {k}").recodeable:
            raise fail(job.src, cmd.line, f"<SPECIFYTABLE> variable {k}", "not an explanatory variable")
    if response.upper() != "<FREQ>":
        v = _var(job, response, cmd, "<SPECIFYTABLE> response")
        if not v.numeric:
            raise fail(job.src, cmd.line, "<SPECIFYTABLE> response", "not a numeric variable")
    job.tables.append(JobTable(tuple(names), response, shadow, cost))
    notes = []
    if shadow:
        notes.append("the shadow variable is read by dominance rules only")
    if cost or lam:
        notes.append("a cost variable or function applies to tables protected by dominance rules (elsewhere the "
                     "costs are the cell values); λ is not used")
    job.say(cmd, "mapped" if notes else "ran", f"table {len(job.tables)}" + (": " + "; ".join(notes) if notes else ""))


def _safety(job: Job, cmd: Command) -> None:
    from tabsafe.interop.argus.magnitude import translate

    if not job.tables:
        raise fail(job.src, cmd.line, "<SAFETYRULE>", "specify a table first")
    t = job.tables[-1]
    t.rules = cmd.args
    m = translate(cmd.args)
    if not m.magnitude:  # a frequency rule: the threshold rule of the suppress method
        texts = []
        for rule in cmd.args:
            if rule.kind == "FREQ" and rule.values[0] > 0:
                texts.append(f"{rule.text()} as the threshold rule 0 < n < {rule.values[0]:g}, "
                             f"protection ratio {rule.values[1]:g}%")
        texts += [s for s in m.said if not s.startswith("FREQ")]
        job.say(cmd, "mapped" if texts else "ran", "; ".join(texts) or "no rule: the given statuses are used")
        return
    if t.response.upper() == "<FREQ>":
        job.say(cmd, "not-run", "; ".join(m.said) + ": dominance rules need a magnitude response, not <FREQ>")
        return
    job.say(cmd, "mapped", "; ".join(m.said) + " (magnitude-suppress; tau-ARGUS levels: the first two P and NK "
            "rules and the first FREQ rule for contributors, further ones for holdings)")


def _read_data(job: Job, cmd: Command) -> None:
    if not job.tables or job.meta is None:
        raise fail(job.src, cmd.line, f"<{cmd.keyword}>", "specify a table first")
    if job.tabular != (cmd.keyword == "READTABLE"):
        raise fail(job.src, cmd.line, f"<{cmd.keyword}>", "does not match the data opened")
    if job.tabular:
        from tabsafe.interop.argus.tables import table_from_tab

        for t in job.tables:
            t.base, t.cells = table_from_tab(job, t, cmd)
        job.say(cmd, "mapped", "cells read; totals taken from the file (tau-ARGUS's additivity option not applied)")
    else:
        records = records_of(job, cmd)
        job.say(cmd, "ran", f"{records.num_rows:,} records read")


def _recode(job: Job, cmd: Command) -> None:
    table, var, target = cmd.args
    if not 1 <= table <= len(job.tables):
        raise fail(job.src, cmd.line, "<RECODE> table", "no such table")
    t = job.tables[table - 1]
    if var.lower() not in {n.lower() for n in t.expl}:
        raise fail(job.src, cmd.line, "<RECODE> variable", "not a variable of the table")
    if job.tabular:
        raise fail(job.src, cmd.line, "<RECODE>", "tau-ARGUS recodes microdata only")
    if re.fullmatch(r"[1-9]", target):
        t.recodes[var.lower()] = ("digit", target)
        job.say(cmd, "ran", f"hierarchy closed below level {target}")
    else:
        assert job.meta_dir is not None
        path = resolve(target, [job.arb.parent, job.meta_dir], job.src, cmd.line, "<RECODE> file")
        t.recodes[var.lower()] = ("file", read_file(path, job.src, cmd.line, "<RECODE> file") + "\x00" + path.name)
        job.say(cmd, "ran", "recode read")
    t.cells = t.base = None


def _apriori(job: Job, cmd: Command) -> None:
    path_name, table, sep, _ignore, expand = cmd.args
    if not 1 <= table <= len(job.tables):
        raise fail(job.src, cmd.line, "<APRIORI> table", "no such table")
    path = resolve(path_name, [job.arb.parent], job.src, cmd.line, "<APRIORI> file")
    t = job.tables[table - 1]
    entries = read_hst(read_file(path, job.src, cmd.line, "<APRIORI> file"), separator=sep, dimensions=len(t.expl),
                       source=path.name)
    t.apriori.extend((path.name, e) for e in entries)
    unsupported = sum(e.action in {"C", "W", "PL", "AB"} for e in entries)
    text = f"{len(entries)} entries"
    if unsupported:
        text += (f"; {unsupported} cost, protection-level or bound entries: costs and protection levels apply "
                 "to tables protected by dominance rules only, bounds (AB) never")
    if expand:
        text += "; trivial levels are not expanded"
    job.say(cmd, "mapped" if unsupported or expand else "ran", text)


def _protect_table(job: Job, t: JobTable, cmd: Command) -> tuple[str, str]:
    """One table of ``<SUPPRESS>``: a table with dominance rules on its magnitudes goes to the
    magnitude path (``interop/argus/magnitude.py``), every other to ``tables.protect``."""
    from tabsafe.interop.argus.magnitude import protect_magnitude, translate
    from tabsafe.interop.argus.tables import protect

    method, _, params, _rest = cmd.args
    if method in {"GH", "MOD", "NET", "OPT"} and translate(t.rules or ()).magnitude:
        return protect_magnitude(job, t, cmd, method, params)
    return protect(job, t, cmd)


def _suppress(job: Job, cmd: Command) -> None:
    _method, table, _params, _rest = cmd.args
    targets = list(range(len(job.tables))) if table == 0 else [table - 1]
    if table != 0 and not 1 <= table <= len(job.tables):
        raise fail(job.src, cmd.line, "<SUPPRESS> table", "no such table")
    texts, outcome = [], "mapped"
    for i in targets:
        o, text = _protect_table(job, job.tables[i], cmd)
        texts.append(f"table {i + 1}: {text}")
        outcome = "not-run" if o == "not-run" else outcome
    if table == 0:
        texts.append("linked tables are protected one by one (tau-ARGUS protects them together)")
    job.say(cmd, outcome, "; ".join(texts))


def _writetable(job: Job, cmd: Command, out: Outputs, path: Path) -> None:
    from tabsafe.interop.argus.tables import cells_of

    table, fmt, opts, _ = cmd.args
    if not 1 <= table <= len(job.tables):
        raise fail(job.src, cmd.line, "<WRITETABLE> table", "no such table")
    cells = cells_of(job, job.tables[table - 1], cmd)
    options = dict(opts)
    out.write_text(path, write_table(cells, fmt, options))
    kind = "an evaluation file (0600: original values or statuses)" if private(fmt, options) else "a release"
    job.say(cmd, "ran", f"format {fmt} ({FORMATS[fmt]}) as {kind}")
