"""tau-ARGUS's magnitude safety rules (``P``, ``NK``, ``REQ``, ``ZERO``, ``WGT``, holdings) run by
tabsafe's magnitude suppression (issues #29 and #30).

Source: the tau-ARGUS manual ("Batch processing", ``<SAFETYRULE>``; "Safety rules"): up to two
``P`` and two ``NK`` rules at the level of contributors, then two of each at the level of
holdings; one ``FREQ`` rule per level; a rule with a first value 0 (``NK(0,0)``) only fills a
slot. ``P(p,n)`` is the p% rule against a coalition of ``n``, ``P(p,q,n)`` its prior-posterior
form; ``REQ`` the request rule, ``ZERO(range)`` the zero rule, ``WGT(1)`` applies the
``<WEIGHT>`` variable, ``MIS(1)`` makes cells with a missing code safe, ``MAN(ratio)`` the
protection of cells made unsafe a priori. The rules become :func:`tabsafe.risk.dominance.parse_rules`
texts; the table is tabulated with its contributions (:func:`tabsafe.model.contributions.contributions`)
and protected by :func:`tabsafe.protect.magnitude.protect_magnitudes` — secondary suppression
audited by the public and by the largest contributors (tau-ARGUS audits the public only).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from tabsafe.interop.argus.writetable import CS

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.interop.argus.arb import Command, Rule
    from tabsafe.interop.argus.job import Job, JobTable

__all__ = ["MagnitudeRules", "protect_magnitude", "translate"]

#: the rules only a magnitude table has
DOMINANCE = ("P", "NK", "REQ", "ZERO")
#: how many rules of a kind a level takes (further ones are at the level of holdings)
_PER_LEVEL = {"P": 2, "NK": 2, "FREQ": 1}
#: tau-ARGUS's cost functions by number in ``<SPECIFYTABLE>``
_COSTS = {"-1": "frequency", "-2": "unity", "-3": "distance"}


@dataclass(frozen=True)
class MagnitudeRules:
    """A ``<SAFETYRULE>`` line in tabsafe's terms.

    Attributes:
        rules: tabsafe's rule texts (``p:15``, ``nk:2,85:holding``…).
        said: per tau-ARGUS rule, what it became (for the job's report).
        weights: ``WGT(1)``: the ``<WEIGHT>`` variable weighs the contributions.
        missing_safe: ``MIS(1)``: cells with a missing code are safe.
        manual: ``MAN(ratio)``: the protection ratio of cells made unsafe a priori (percent).
    """

    rules: tuple[str, ...]
    said: tuple[str, ...]
    weights: bool = False
    missing_safe: bool = False
    manual: float | None = None

    @property
    def magnitude(self) -> bool:
        """Whether the line needs a magnitude table's contributions (a dominance rule, weights or
        a rule for holdings)."""
        return self.weights or any(not r.startswith("freq:") or r.endswith(":holding") for r in self.rules)


def translate(rules: tuple[Rule, ...]) -> MagnitudeRules:
    """tau-ARGUS's safety rules as tabsafe's (module docstring)."""
    texts: list[str] = []
    said: list[str] = []
    seen = dict.fromkeys(_PER_LEVEL, 0)
    kw: dict[str, Any] = {}
    for r in rules:
        kind, v = r.kind, r.values
        if kind in seen:
            seen[kind] += 1
            holding = seen[kind] > _PER_LEVEL[kind]
            if v[0] <= 0:  # a dummy that fills a slot (tau-ARGUS's NK(0,0))
                continue
            text = _level_rule(kind, v) + (":holding" if holding else "")
        elif kind == "REQ" and v[0] > 0:
            text = f"request:{v[0]:g}"
            said.append(f"{r.text()} as {text} (a contributor that asked for protection and holds more than "
                        f"{v[0]:g}% of a cell; the other values are not used)")
            texts.append(text)
            continue
        elif kind == "ZERO" and v[0] > 0:
            text = f"zero:{v[0]:g}"
        else:
            if kind == "WGT":
                kw["weights"] = v[0] == 1
                said.append(f"{r.text()}: contributions weighted by the <WEIGHT> variable" if v[0] == 1 else
                            f"{r.text()}: unweighted")
            elif kind == "MIS":
                kw["missing_safe"] = v[0] == 1
                said.append(f"{r.text()}: cells with a missing code are " + ("always safe" if v[0] else "checked"))
            elif kind == "MAN":
                kw["manual"] = v[0]
                said.append(f"{r.text()}: protection ratio {v[0]:g}% for cells made unsafe a priori")
            continue
        texts.append(text)
        said.append(f"{r.text()} as {text}")
    return MagnitudeRules(tuple(texts), tuple(said), **kw)


def _level_rule(kind: str, v: tuple[float, ...]) -> str:
    if kind == "P":
        if len(v) == 3:
            return f"pq:{v[0]:g},{v[1]:g},{v[2]:g}"
        return f"p:{v[0]:g}" + (f",{v[1]:g}" if len(v) == 2 and v[1] > 1 else "")
    if kind == "NK":
        return f"nk:{v[0]:g},{v[1]:g}"
    return f"freq:{v[0]:g}" + (f",{v[1]:g}" if len(v) > 1 and v[1] > 0 else "")


def _frame(job: Job, t: JobTable, cmd: Command, m: MagnitudeRules) -> tuple[Any, dict[str, Any], Any]:
    """The records with the explanatory codes (recoded), the response and the role columns
    :func:`~tabsafe.model.contributions.contributions` reads; its keyword arguments; the
    hierarchies."""
    import pandas as pd

    from tabsafe.interop.argus._text import fail
    from tabsafe.interop.argus.job import records_of
    from tabsafe.interop.argus.tables import explanatory

    assert job.meta is not None
    records = records_of(job, cmd)
    columns, hierarchies = explanatory(job, t, cmd, records)
    frame = pd.DataFrame({k: c.to_pylist() for k, c in columns.items()})
    rv = job.meta.variable(t.response)
    frame["__value"] = records.column(rv.name).fill_null(0.0).to_numpy(zero_copy_only=False)
    kw: dict[str, Any] = {"value": "__value"}
    roles = {"holding": any(r.endswith(":holding") for r in m.rules), "weight": m.weights}
    for role, wanted in roles.items():
        if not wanted:
            continue
        found = job.meta.with_role(role)
        if not found:
            raise fail(job.src, cmd.line, "<SAFETYRULE>", f"a rule needs the metadata's <{role.upper()}> variable")
        frame[f"__{role}"] = records.column(found[0].name).to_pylist()
        kw[role] = f"__{role}"
    for role in ("shadow", "cost"):
        name = t.shadow if role == "shadow" else t.cost
        if name and name not in _COSTS and name.lower() != rv.name.lower():
            frame[f"__{role}"] = records.column(job.meta.variable(name).name).fill_null(0.0).to_pylist()
            kw[role] = f"__{role}"
    requests = job.meta.with_role("request")
    if any(r.startswith("request:") for r in m.rules):
        if not requests:
            raise fail(job.src, cmd.line, "<SAFETYRULE> REQ", "needs the metadata's <REQUEST> variable")
        codes = {c.strip() for c in requests[0].request_codes}
        column = records.column(requests[0].name).to_pylist()
        frame["__request"] = [int(str(x).strip() in codes) for x in column]
        kw["request"] = "__request"
    return frame, kw, hierarchies


def _controls(job: Job, t: JobTable, c: Any) -> tuple[Any, int]:
    """The a-priori entries as production controls (statuses, costs, protection levels); the
    number of entries not applied (bounds ``AB``)."""
    from tabsafe.interop.argus._text import fail
    from tabsafe.model.hierarchy import TOTAL
    from tabsafe.protect.magnitude import Controls

    assert job.meta is not None
    status = {"S": "safe", "U": "unsafe", "P": "protected", "M": "suppressed", "ML": "suppressed"}
    dims = c.dimensions
    entries: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    skipped = 0
    for source, e in t.apriori:
        key = []
        for k, (code, d) in enumerate(zip(e.codes, dims)):
            code = TOTAL if code == job.meta.variable(d.variable).total_code else code
            if code not in d.hierarchy.position:
                raise fail(source, e.line, f"field {k + 1}", "a code not in the table")
            key.append((d.variable, code))
        what = entries.setdefault(tuple(key), {})
        if e.action in status:
            what["status"] = status[e.action]
        elif e.action in {"C", "W"}:
            what["cost"] = e.values[0]
        elif e.action == "PL":
            what["lower"], what["upper"] = e.values
        else:
            skipped += 1
    return Controls.from_cells(c, {k: v for k, v in entries.items() if v}), skipped


def _statuses(res: Any, c: Any, controls: Any) -> np.ndarray:
    """tau-ARGUS's cell statuses of a protected magnitude table."""
    flags = res.assessment.flags
    primary = res.reason == "primary"
    status = np.full(c.n_cells, CS["safe"], dtype=np.int64)
    given = np.asarray(controls.status, dtype=object) if controls.status is not None else np.full(c.n_cells, "")
    status[given == "safe"] = CS["safe_manual"]
    status[primary] = CS["unsafe_rule"]
    for name, code in (("frequency", CS["unsafe_freq"]), ("zero", CS["unsafe_zero"])):
        if name in flags:  # flagged by this rule alone
            others = np.zeros(c.n_cells, dtype=bool)
            for other, mask in flags.items():
                if other != name:
                    others |= mask
            status[primary & flags[name] & ~others] = code
    status[primary & (given == "unsafe")] = CS["unsafe_manual"]
    status[given == "protected"] = CS["protect_manual"]
    secondary = res.reason == "secondary"
    status[secondary] = np.where(given[secondary] == "suppressed", CS["secondary_manual"], CS["secondary"])
    status[c.empty & ~res.suppressed] = CS["empty"]
    return status


def protect_magnitude(job: Job, t: JobTable, cmd: Command, method: str, params: tuple[float, ...]
                      ) -> tuple[str, str]:
    """Run ``<SUPPRESS>`` on a magnitude table with dominance rules: the outcome and its text."""
    from tabsafe.interop.argus.tables import cells_of
    from tabsafe.model.contributions import contributions
    from tabsafe.protect.magnitude import MagnitudeSettings, protect_magnitudes
    from tabsafe.protect.suppression.problem import Mode
    from tabsafe.risk.dominance import parse_rules

    m = translate(t.rules or ())
    if job.tabular:
        return "not-run", ("dominance rules on a table file need every cell's top contributions; this runner "
                           "applies them to microdata only")
    if t.response.upper() == "<FREQ>":
        return "not-run", "dominance rules need a magnitude response, not <FREQ>"
    assert job.meta is not None
    cells = cells_of(job, t, cmd)
    frame, kw, hierarchies = _frame(job, t, cmd, m)
    missing = ({job.meta.variable(n).name: tuple(job.meta.variable(n).missing) for n in t.expl}
               if m.missing_safe else {})
    rules = parse_rules(m.rules, missing={k: v for k, v in missing.items() if v})
    c = contributions(frame, [job.meta.variable(n).name for n in t.expl], hierarchies=hierarchies,
                      digits=cells.decimals, **kw)
    controls, skipped = _controls(job, t, c)
    cost = _COSTS.get(t.cost, "value" if not t.cost or "cost" not in kw else "variable")
    notes = []
    if cost == "distance":
        cost = "value"
        notes.append("the distance cost function is not available: costs are the cell values")
    mode = Mode.OPTIMAL if method == "OPT" else Mode.FAST
    settings = MagnitudeSettings(mode=mode, cost=cost, manual_ratio=m.manual if m.manual is not None else 10.0)
    res = protect_magnitudes(c, rules, settings, controls)
    status = _statuses(res, c, controls)
    published = np.where(res.suppressed, np.nan, c.value)
    primary = res.reason == "primary"
    # with WGT(1) the cells are the weighted totals the rules read (tau-ARGUS weighs its tables)
    t.cells = replace(cells, value=np.asarray(c.value, dtype=np.float64), status=status, published=published,
                      method="suppress",
                      lower=np.where(primary, res.lower, 0.0), upper=np.where(primary, res.upper, 0.0),
                      dominance=_dominance(c))
    if skipped:
        notes.append(f"{skipped} a-priori bound (AB) entries are not applied")
    how = "the optimal integer program (HiGHS)" if mode is Mode.OPTIMAL else "the fast mode"
    return "mapped", (f"{method} ran as magnitude-suppress ({', '.join(m.rules)}; {how}; secondary cells also "
                      f"audited from the largest contributors' point of view, which tau-ARGUS does not); "
                      f"{int(primary.sum())} primary and {int((res.reason == 'secondary').sum())} secondary cells"
                      + ("; " + "; ".join(notes) if notes else ""))


def _dominance(c: Any) -> np.ndarray:
    """Per cell, the share (percent) of its largest contribution — a private figure (the SBS
    format's dominance column)."""
    out = np.zeros(c.n_cells)
    for i in range(c.n_cells):
        _, amount, weight = c.cell(i)
        total = float(np.abs(amount * weight).sum())
        if total > 0:
            out[i] = 100.0 * float(np.abs(amount * weight).max()) / total
    return out
