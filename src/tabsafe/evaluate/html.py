"""The evaluation report: one self-contained HTML file (styles, charts and data inline).

The page is what an SDC board decides from: the measures laid out as seed 004's Tables 5–10
(risk; distances on the inner cells with standard errors; marginal totals; variance ratio;
change of rank orderings), the statistical tests of 000 §5.8, the method-level risk figures
(information gain, differencing), an R-U confidentiality map per table (risk against information
loss, one labelled point per setting), the distribution of the noise, an output-checker summary
of every release (what was applied, cells suppressed and perturbed, SHA-256 of the file), and the
parameters and seeds that rerun it all. The measures are downloadable as JSON and CSV from
``data:`` links.

Nothing on the page is fetched: no script, no font, no image from anywhere (a
Content-Security-Policy forbids it); charts are inline SVG. It carries published values and
measures only.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from tabsafe.evaluate.runner import Evaluation, Result

__all__ = ["render_html"]

_CSS = """
:root { --ink:#1d2733; --muted:#5b6b7c; --line:#d5dce4; --band:#f3f6f9; --accent:#1f5f9e; --warn:#a33b1f; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
       margin: 0; background: #fff; }
header { background: #16324f; color: #fff; padding: 18px 28px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 0; color: #c9d6e3; }
nav { position: sticky; top: 0; background: #fff; border-bottom: 1px solid var(--line); padding: 6px 28px;
      z-index: 2; font-size: 13px; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
main { padding: 8px 28px 40px; max-width: 1400px; }
section { margin-top: 26px; }
h2 { font-size: 18px; border-bottom: 2px solid var(--accent); padding-bottom: 3px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
p.note, .note { color: var(--muted); font-size: 12.5px; max-width: 980px; }
table { border-collapse: collapse; margin: 6px 0 12px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: right; vertical-align: top; }
td { white-space: nowrap; }
td.l { white-space: normal; }
th { background: var(--band); font-weight: 600; }
td.l, th.l { text-align: left; }
tbody tr:nth-child(even) td { background: #fbfcfd; }
.se { color: var(--muted); font-size: 12px; }
.maps { display: flex; flex-wrap: wrap; gap: 18px; }
.scroll { overflow-x: auto; max-width: 100%; }
figure { margin: 0; }
figcaption { font-size: 12.5px; color: var(--muted); max-width: 560px; }
svg text { font-family: system-ui, sans-serif; }
.legend { font-size: 12.5px; margin: 4px 0 0; padding-left: 18px; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }
pre { background: var(--band); border: 1px solid var(--line); padding: 10px; overflow-x: auto; max-width: 1200px; }
.hash { font-size: 11px; word-break: break-all; }
.bad { color: var(--warn); font-weight: 600; }
.small { font-size: 12px; }
a.download { display: inline-block; margin-right: 12px; padding: 6px 12px; border: 1px solid var(--accent);
             border-radius: 4px; color: var(--accent); text-decoration: none; }
"""

#: Colours of the settings (points of the R-U map), repeated when there are more settings.
_COLOURS = ("#1f5f9e", "#c0392b", "#2e8b57", "#8e44ad", "#d35400", "#16a085", "#7f8c8d", "#b7950b",
            "#2c3e50", "#e84393")


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _f(value: Any, digits: int = 4) -> str:
    """A number for a table cell: ``–`` when there is none."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if abs(value) >= 1000:
        return f"{value:,.1f}"
    return f"{value:.{digits}f}"


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _with_se(m: Any) -> str:
    if not m or m.get("mean") is None:
        return "–"
    se = m.get("se")
    return f"{_f(m['mean'])} <span class=se>({_f(se)})</span>" if se is not None else _f(m["mean"])


def _get(data: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


# ------------------------------------------------------------------------------------- charts


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    start = math.floor(lo / step) * step
    out = [round(start, 10)]
    while out[-1] < hi - step * 1e-9:
        out.append(round(out[-1] + step, 10))
    return out


def _scatter(points: Sequence[tuple[float, float, int, str]], *, xlabel: str, ylabel: str, svg_id: str,
             title: str) -> str:
    """An R-U map: one numbered point per setting (x information loss, y risk)."""
    w, h, ml, mr, mt, mb = 560, 380, 64, 20, 30, 52
    xs = [p[0] for p in points] or [0.0]
    ys = [p[1] for p in points] or [0.0]
    xt = _ticks(0.0 if min(xs) >= 0 else min(xs), max(xs) * 1.08 if max(xs) > 0 else 1.0)
    yt = _ticks(0.0 if min(ys) >= 0 else min(ys), max(max(ys) * 1.08, 0.05))
    x0, x1, y0, y1 = xt[0], xt[-1], yt[0], yt[-1]

    def sx(x: float) -> float:
        return ml + (x - x0) / (x1 - x0) * (w - ml - mr)

    def sy(y: float) -> float:
        return h - mb - (y - y0) / (y1 - y0) * (h - mt - mb)

    parts = [f'<svg id="{_e(svg_id)}" class="ru-map" role="img" aria-label="{_e(title)}" width="{w}" height="{h}" '
             f'viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg">',
             f'<text x="{w / 2}" y="18" text-anchor="middle" font-size="14" font-weight="600">{_e(title)}</text>']
    for t in xt:
        parts.append(f'<line x1="{sx(t):.1f}" y1="{mt}" x2="{sx(t):.1f}" y2="{h - mb}" stroke="#e6ebf0"/>'
                     f'<text x="{sx(t):.1f}" y="{h - mb + 16}" text-anchor="middle" font-size="11">{t:g}</text>')
    for t in yt:
        parts.append(f'<line x1="{ml}" y1="{sy(t):.1f}" x2="{w - mr}" y2="{sy(t):.1f}" stroke="#e6ebf0"/>'
                     f'<text x="{ml - 6}" y="{sy(t) + 4:.1f}" text-anchor="end" font-size="11">{t:g}</text>')
    parts.append(f'<rect x="{ml}" y="{mt}" width="{w - ml - mr}" height="{h - mt - mb}" fill="none" stroke="#8795a5"/>')
    parts.append(f'<text x="{(ml + w - mr) / 2}" y="{h - 12}" text-anchor="middle" font-size="12">{_e(xlabel)}</text>')
    parts.append(f'<text transform="translate(16 {(mt + h - mb) / 2}) rotate(-90)" text-anchor="middle" '
                 f'font-size="12">{_e(ylabel)}</text>')
    markers = _place([(sx(x), sy(y)) for x, y, _, _ in points], box=(ml + 9, mt + 9, w - mr - 9, h - mb - 9))
    labels_at: list[tuple[float, float, float, float]] = []
    for (x, y, number, label), (mx, my) in zip(points, markers):
        colour = _COLOURS[(number - 1) % len(_COLOURS)]
        px, py = sx(x), sy(y)
        moved = abs(mx - px) > 0.5 or abs(my - py) > 0.5
        # a marker moved off a crowded spot keeps a dot and a line to where it belongs
        lead = (f'<line x1="{px:.1f}" y1="{py:.1f}" x2="{mx:.1f}" y2="{my:.1f}" stroke="{colour}" '
                f'stroke-width="1"/><circle cx="{px:.1f}" cy="{py:.1f}" r="2.5" fill="{colour}"/>') if moved else ""
        text = _short(label)
        tw = 6.2 * len(text)
        spot = _free_label(mx + 12, my - 12, tw, labels_at, markers, left=ml + 2, right=w - mr)
        name = (f'<text x="{spot[0]:.1f}" y="{spot[1] + 9:.1f}" font-size="11" fill="{colour}">{_e(text)}</text>'
                if spot else "")
        if spot:
            labels_at.append((spot[0], spot[1], spot[0] + tw, spot[1] + 12))
        parts.append(f'<g class="ru-point" data-setting="{_e(label)}"><title>{number}. {_e(label)}: information loss '
                     f'{x:.4f}, risk {y:.4f}</title>{lead}<circle cx="{mx:.1f}" cy="{my:.1f}" r="9" fill="{colour}" '
                     f'fill-opacity="0.9"/><text x="{mx:.1f}" y="{my + 4:.1f}" text-anchor="middle" '
                     f'font-size="11" fill="#fff" font-weight="700">{number}</text>{name}</g>')
    parts.append("</svg>")
    return "".join(parts)


def _place(spots: Sequence[tuple[float, float]], *, box: tuple[float, float, float, float],
           gap: float = 19.0) -> list[tuple[float, float]]:
    """Marker positions: each point where it belongs unless an earlier marker is there; then
    the nearest free place on rings around it (inside ``box``), so no marker hides another."""
    placed: list[tuple[float, float]] = []
    x0, y0, x1, y1 = box
    for px, py in spots:
        spot = (px, py)
        if any(math.hypot(px - qx, py - qy) < gap for qx, qy in placed):
            spot = None
            for ring in range(1, 12):
                for step in range(8 * ring):
                    angle = -math.pi / 2 + 2 * math.pi * step / (8 * ring)
                    cx, cy = px + ring * gap * math.cos(angle), py + ring * gap * math.sin(angle)
                    if x0 <= cx <= x1 and y0 <= cy <= y1 and all(math.hypot(cx - qx, cy - qy) >= gap
                                                                 for qx, qy in placed):
                        spot = (cx, cy)
                        break
                if spot:
                    break
            spot = spot or (px, py)
        placed.append(spot)
    return placed


def _free_label(x: float, y: float, width: float, taken: Sequence[tuple[float, float, float, float]],
                markers: Sequence[tuple[float, float]], *, left: float, right: float) -> tuple[float, float] | None:
    """A place for a label near (x, y) that overlaps no other label and no marker, or None
    (the marker's number and the legend name it then)."""
    for dy in (0, 14, -14, 28, -28):
        for dx in (0, -width - 24):
            lx, ly = x + dx, y + dy
            if lx + width > right or lx < left:
                continue
            box = (lx, ly, lx + width, ly + 12)
            if any(box[0] < t[2] and t[0] < box[2] and box[1] < t[3] and t[1] < box[3] for t in taken):
                continue
            if any(box[0] - 9 < mx < box[2] + 9 and box[1] - 9 < my < box[3] + 9 for mx, my in markers):
                continue
            return lx, ly
    return None


def _short(label: str, n: int = 28) -> str:
    return label if len(label) <= n else label[: n - 1] + "…"


def _bars(hist: dict[str, int], *, svg_id: str, title: str) -> str:
    """The noise distribution of one release: cells per value of published − original."""
    keys = sorted((k for k in hist if k not in {"<", ">"}), key=int)
    if "<" in hist:
        keys.insert(0, "<")
    if ">" in hist:
        keys.append(">")
    if not keys:
        keys = ["0"]
    w, h, ml, mb, mt = 300, 150, 40, 28, 22
    total = sum(hist.values()) or 1
    top = max(hist.values(), default=1) / total
    bw = (w - ml - 8) / max(len(keys), 1)
    parts = [f'<svg id="{_e(svg_id)}" class="noise" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
             f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{_e(title)}">',
             f'<text x="{w / 2}" y="14" text-anchor="middle" font-size="11.5">{_e(title)}</text>',
             f'<line x1="{ml}" y1="{h - mb}" x2="{w - 8}" y2="{h - mb}" stroke="#8795a5"/>',
             f'<text x="{ml - 4}" y="{mt + 8}" text-anchor="end" font-size="10">{100 * top:.0f}%</text>']
    for i, k in enumerate(keys):
        share = hist.get(k, 0) / total
        bh = (h - mb - mt) * (share / top if top else 0)
        x = ml + i * bw
        colour = "#1f5f9e" if k == "0" else "#c0392b"
        parts.append(f'<rect x="{x + 1:.1f}" y="{h - mb - bh:.1f}" width="{max(bw - 2, 1):.1f}" height="{bh:.1f}" '
                     f'fill="{colour}"><title>{_e(k)}: {100 * share:.2f}% of inner cells</title></rect>')
        if len(keys) <= 12 or i % 2 == 0:
            parts.append(f'<text x="{x + bw / 2:.1f}" y="{h - mb + 12}" text-anchor="middle" font-size="9.5">'
                         f'{_e(k)}</text>')
    parts.append(f'<text x="{(ml + w) / 2}" y="{h - 3}" text-anchor="middle" font-size="10">published − original '
                 f'(inner cells)</text></svg>')
    return "".join(parts)


# ------------------------------------------------------------------------------------- tables


def _grid(ev: Evaluation, rows: Sequence[tuple[str, Callable[[Result], str]]], *, table: str, caption: str,
          table_id: str) -> str:
    """A measures table: one row per measure, one column per setting (as 004 Tables 5–10)."""
    labels = [r.setting.label for r in ev.runs]
    head = "".join(f'<th title="{_e(lab)}">{i}. {_e(_short(lab, 34))}</th>' for i, lab in enumerate(labels, 1))
    body = []
    for name, cell in rows:
        tds = "".join(f"<td>{cell(ev.result(table, lab))}</td>" for lab in labels)
        body.append(f'<tr><td class="l">{name}</td>{tds}</tr>')
    return (f'<div class="scroll"><table id="{_e(table_id)}" class="measures"><caption class="note" '
            f'style="caption-side:top;text-align:left">{caption}</caption><thead><tr><th class="l">measure</th>{head}'
            f'</tr></thead><tbody>{"".join(body)}</tbody></table></div>')


def _risk_rows(ev: Evaluation) -> list[tuple[str, Callable[[Result], str]]]:
    s = ev.options.small
    return [
        (f"DR: records in cells of 1–{s} left unperturbed", lambda r: _f(_get(r.measures, "risk.dr.dr"))),
        (f"share of cells of 1–{s}, before", lambda r: _pct(_get(r.measures, "risk.small_cells.share_before"))),
        (f"share of cells of 1–{s}, published", lambda r: _pct(_get(r.measures, "risk.small_cells.share_after"))),
        (f"original cells of 1–{s} published unchanged",
         lambda r: _pct(_get(r.measures, "risk.small_cells.share_unchanged"))),
        (f"directly disclosive cells (k = {ev.options.k}), before",
         lambda r: _pct(_get(r.measures, "risk.directly_disclosive.share_before"))),
        ("directly disclosive cells, as published",
         lambda r: _pct(_get(r.measures, "risk.directly_disclosive.share_after"))),
        ("directly disclosive cells, published and true",
         lambda r: _pct(_get(r.measures, "risk.directly_disclosive.share_after_exact"))),
        ("entropy risk r (original)", lambda r: _f(_get(r.measures, "risk.entropy.r"))),
        ("entropy risk r# (published)", lambda r: _f(_get(r.measures, "risk.entropy.r_sharp"))),
    ]


def _distance_rows(group: str) -> list[tuple[str, Callable[[Result], str]]]:
    return [
        ("Hellinger's distance", lambda r: _with_se(_get(r.measures, f"utility.{group}.hellinger"))),
        ("relative absolute distance", lambda r: _with_se(_get(r.measures, f"utility.{group}.rad"))),
        ("average absolute distance per cell", lambda r: _with_se(_get(r.measures, f"utility.{group}.aad"))),
    ]


def _stat_rows(ev: Evaluation, table: str) -> list[tuple[str, Callable[[Result], str]]]:
    first = ev.result(table, ev.runs[0].setting.label)
    rows: list[tuple[str, Callable[[Result], str]]] = [
        ("Spearman rank correlation (inner cells)", lambda r: _f(_get(r.measures, "utility.inner.spearman"))),
        ("Spearman rank correlation (margins, subtotals)",
         lambda r: _f(_get(r.measures, "utility.margins.spearman"))),
        ("signed-rank test p-value (location moved?)",
         lambda r: _f(_get(r.measures, "utility.signed_rank.p_value"))),
        ("binomial test of the realisation, min p × tests",
         lambda r: _binomial(_get(r.measures, "utility.binomial"))),
    ]
    for i, chi in enumerate(first.measures["utility"]["chi_square"]):
        def cell(r: Result, i: int = i) -> str:
            c = r.measures["utility"]["chi_square"][i]
            b, a = c["before"], c["after"]
            return f"{_f(b['cramers_v'])} → {_f(a['cramers_v'])}"

        rows.append((f"Cramér's V, {_e(chi['table'])}", cell))
    for i, chi in enumerate(first.measures["utility"]["chi_square"]):
        def chi2(r: Result, i: int = i) -> str:
            c = r.measures["utility"]["chi_square"][i]
            return f"{_f(c['before']['chi2'], 1)} → {_f(c['after']['chi2'], 1)}"

        rows.append((f"Pearson χ² ({first.measures['utility']['chi_square'][i]['before']['dof']} df), "
                     f"{_e(chi['table'])}", chi2))
    rows += _structure_rows(first)
    anova = first.measures["utility"].get("anova")
    if anova:
        rows.append((f"ANOVA R² of {_e(anova['target'])} between {_e(anova['groups'])}",
                     lambda r: f"{_f(_get(r.measures, 'utility.anova.r2_before'))} → "
                               f"{_f(_get(r.measures, 'utility.anova.r2_after'))}"))
    return rows


def _structure_rows(first: Result) -> list[tuple[str, Callable[[Result], str]]]:
    """Log-linear fit, median subgroup entropy, cell-size variance, distances with suppressed
    cells imputed (000 §5.8, 002 §4.1, 004 §5.2)."""
    u = first.measures["utility"]
    rows: list[tuple[str, Callable[[Result], str]]] = []
    if u.get("loglinear"):
        ll = u["loglinear"]
        rows.append((f"log-linear model ({_e(ll['model'])}), Pearson χ² of fit ({ll['before']['df']} df)",
                     lambda r: f"{_f(_get(r.measures, 'utility.loglinear.before.chi2'), 1)} → "
                               f"{_f(_get(r.measures, 'utility.loglinear.after.chi2'), 1)}"))
    if u.get("subgroup_entropy"):
        rows.append((f"median entropy of the subgroups of {_e(u['subgroup_entropy']['groups'])}",
                     lambda r: f"{_f(_get(r.measures, 'utility.subgroup_entropy.before'))} → "
                               f"{_f(_get(r.measures, 'utility.subgroup_entropy.after'))}"))
    if u.get("cell_size_variance"):
        rows.append(("variance ratio of cell counts, mean over columns",
                     lambda r: _f(_get(r.measures, "utility.cell_size_variance.by_column.mean"))))
        rows.append(("variance ratio of cell counts, whole table",
                     lambda r: _f(_get(r.measures, "utility.cell_size_variance.table"))))
    for how, words in (("midpoint", "interval midpoints"), ("average", "averages of the totals")):
        rows.append((f"relative absolute distance, suppressed cells as {words}",
                     lambda r, how=how: _with_se(_get(r.measures, f"utility.imputed.{how}.rad"))))
    return rows


def _binomial(b: Any) -> str:
    if not b:
        return "–"
    text = _f(b["p_min_adjusted"])
    if b.get("impossible"):
        text += f' <span class=bad>({b["impossible"]:,} impossible values)</span>'
    elif not b.get("consistent", True):
        text = f"<span class=bad>{text}</span>"
    return text


# ------------------------------------------------------------------------------------- sections


def _section_overview(ev: Evaluation) -> str:
    rows = []
    for name, t in ev.tables.items():
        shape = " × ".join(f"{_e(v)} ({n})" for v, n in t["shape"].items())
        s = t["summary"]
        rows.append(f'<tr><td class="l"><b>{_e(name)}</b></td><td class="l">{shape}</td><td>{s["cells"]:,}</td>'
                    f'<td>{s["inner_cells"]:,}</td><td>{_pct(s["inner_zero_share"])}</td>'
                    f'<td>{_pct(s["small_cell_share"])}</td><td class="l">{_e(t["rows"])}</td>'
                    f'<td class="l">{_e(t["where"] or "")}</td></tr>')
    settings = []
    for i, run in enumerate(ev.runs, 1):
        steps = " → ".join(f"{_e(m.name)} <span class=small>({_e(m.kind)})</span>" for m in run.setting.methods)
        settings.append(f'<tr><td>{i}</td><td class="l"><b>{_e(run.setting.label)}</b></td><td class="l">{steps}</td>'
                        f'<td>{_e(run.seed if run.seed is not None else "–")}</td></tr>')
    return (
        '<section id="overview"><h2>Tables and settings</h2>'
        '<table id="tables-overview"><thead><tr><th class="l">table</th><th class="l">variables (codes, totals '
        'included)</th><th>cells</th><th>inner cells</th><th>inner zeros</th><th>cells of 1–2</th>'
        '<th class="l">rows</th><th class="l">sub-population</th></tr></thead><tbody>'
        + "".join(rows) + "</tbody></table>"
        '<table id="settings-overview"><thead><tr><th>#</th><th class="l">setting</th><th class="l">steps</th>'
        '<th>seed</th></tr></thead><tbody>' + "".join(settings) + "</tbody></table>" + _skipped(ev) + "</section>"
    )


def _skipped(ev: Evaluation) -> str:
    if not ev.skipped:
        return ""
    items = "".join(f"<li><b>{_e(label)}</b>: {_e(error)}</li>" for label, error in ev.skipped)
    return f'<p class="note">Left out (they could not run here):</p><ul id="skipped" class="note">{items}</ul>'


def _section_map(ev: Evaluation) -> str:
    figures = []
    labels = [r.setting.label for r in ev.runs]
    for t_i, name in enumerate(ev.tables):
        points = []
        for i, lab in enumerate(labels, 1):
            r = ev.result(name, lab)
            x = _get(r.measures, "utility.inner.hellinger.mean")
            y = _get(r.measures, "risk.dr.dr")
            if x is not None and y is not None:
                points.append((float(x), float(y), i, lab))
        svg = _scatter(points, xlabel="information loss: Hellinger's distance (inner cells, mean over rows)",
                       ylabel=f"risk: DR (records in cells of 1–{ev.options.small} unperturbed)",
                       svg_id=f"ru-map-{t_i}", title=f"R-U map: {name}")
        figures.append(f'<figure>{svg}<figcaption>Each point is a setting on table <b>{_e(name)}</b>; '
                       'lower left is better (less risk, less information lost).</figcaption></figure>')
    legend = "".join(f'<li><span style="color:{_COLOURS[(i - 1) % len(_COLOURS)]}">●</span> {i}. {_e(lab)}</li>'
                     for i, lab in enumerate(labels, 1))
    return ('<section id="ru-map"><h2>R-U confidentiality map</h2><div class="maps">' + "".join(figures)
            + f'</div><ol class="legend" style="list-style:none;padding-left:0">{legend}</ol>'
            '<p class="note">Risk: DR, the share of the records in cells of 1–2 whose cell was published '
            'unchanged and who were not moved by a microdata step (seed 004 §5.2). Information loss: '
            "Hellinger's distance per row of the inner cells, averaged over the rows (004 §5.2).</p></section>")


def _section_risk(ev: Evaluation) -> str:
    parts = ['<section id="risk"><h2>Disclosure risk (as seed 004 Table 5)</h2>']
    for t_i, name in enumerate(ev.tables):
        parts.append(f"<h3>{_e(name)}</h3>")
        parts.append(_grid(ev, _risk_rows(ev), table=name, table_id=f"risk-{t_i}",
                           caption="Shares over the inner cells. Directly disclosive: a cell holding all but at "
                                   "most k units of a published margin it belongs to (000 §5.9). Entropy risk with "
                                   f"weights {', '.join(f'{w:.3g}' for w in ev.options.weights)} (000 §5.9)."))
    return "".join(parts) + "</section>"


def _section_distances(ev: Evaluation) -> str:
    parts = ['<section id="distances"><h2>Distance metrics (as seed 004 Tables 6–7)</h2>']
    for t_i, name in enumerate(ev.tables):
        rows_var = ev.tables[name]["rows"]
        parts.append(f"<h3>{_e(name)}: inner cells, per {_e(rows_var)}</h3>")
        parts.append(_grid(ev, _distance_rows("inner"), table=name, table_id=f"distances-{t_i}",
                           caption="Mean over the rows (standard error in brackets)."))
        parts.append(f"<h3>{_e(name)}: margins and subtotals, per {_e(rows_var)} code</h3>")
        parts.append(_grid(ev, _distance_rows("margins"), table=name, table_id=f"distances-margins-{t_i}",
                           caption="Cells with at least one total or subtotal code; a row per code of the row "
                                   "variable, its aggregates included."))
    return "".join(parts) + "</section>"


def _section_marginal(ev: Evaluation) -> str:
    parts = ['<section id="marginal"><h2>Marginal totals (as seed 004 Table 8)</h2>']
    for t_i, name in enumerate(ev.tables):
        first = ev.result(name, ev.runs[0].setting.label)
        rows = []
        for i, mt in enumerate(first.measures["utility"]["marginal_tables"]):
            def cell(r: Result, i: int = i) -> str:
                m = r.measures["utility"]["marginal_tables"][i]
                return (f"{_f(m['mean_relative_difference'])} <span class=se>RAD {_f(m['rad'])}, "
                        f"AAD {_f(m['aad'])}</span>")

            rows.append((_e(mt["table"]) + f' <span class=se>({mt["cells"]:,} cells)</span>', cell))
        parts.append(f"<h3>{_e(name)}</h3>")
        parts.append(_grid(ev, rows, table=name, table_id=f"marginal-{t_i}",
                           caption="Mean relative difference |published − original| / original of the published "
                                   "margin cells (non-zero originals); RAD summed over them; AAD per cell."))
    return "".join(parts) + "</section>"


def _section_variance_ranks(ev: Evaluation) -> str:
    parts = ['<section id="variance"><h2>Variance of cell counts and rank orderings (as seed 004 Tables 9–10)'
             '</h2>']
    for t_i, name in enumerate(ev.tables):
        rows = [
            ("average variance ratio over the rows", lambda r: _with_se(_get(r.measures,
                                                                             "utility.inner.variance_ratio"))),
            ("cells moved into another decile (%)", lambda r: _with_se(_get(r.measures,
                                                                             "utility.inner.decile_change"))),
        ]
        parts.append(f"<h3>{_e(name)}</h3>")
        parts.append(_grid(ev, rows, table=name, table_id=f"variance-{t_i}",
                           caption="Variance ratio V(published)/V(original) of each row's inner cells; deciles "
                                   "of each category's cells across the rows (004 §5.2)."))
    return "".join(parts) + "</section>"


def _section_tests(ev: Evaluation) -> str:
    parts = ['<section id="tests"><h2>Statistical analysis before → after (seed 000 §5.8)</h2>']
    for t_i, name in enumerate(ev.tables):
        parts.append(f"<h3>{_e(name)}</h3>")
        parts.append(_grid(ev, _stat_rows(ev, name), table=name, table_id=f"tests-{t_i}",
                           caption="χ² and Cramér's V from each two-way table's own sums; the binomial test "
                                   "checks a realisation against the method's stated probabilities (adjusted "
                                   "p below 0.05: it does not follow them)."))
    return "".join(parts) + "</section>"


def _section_method(ev: Evaluation) -> str:
    rows = []
    for i, run in enumerate(ev.runs, 1):
        mm = run.method_measures
        gain = _get(mm, "information_gain.value")
        diffs = mm.get("differencing") or []
        diff_text = "; ".join(f"n = {d['n']}: {_f(d['p_exact'])}" for d in diffs) or "–"
        swap = mm.get("risky_unswapped")
        rows.append(f'<tr><td>{i}</td><td class="l">{_e(run.setting.label)}</td>'
                    f'<td>{_pct(gain) if gain is not None else "–"}</td><td class="l">{diff_text}</td>'
                    f'<td>{_pct(swap["share"]) if swap else "–"}</td></tr>')
    prior = ev.options.prior
    return ('<section id="method"><h2>Risk of the method itself</h2><table id="method-risk"><thead><tr><th>#</th>'
            '<th class="l">setting</th><th>expected information gain</th><th class="l">differencing: P(difference '
            'shown exactly)</th><th>risky households left unswapped</th></tr></thead><tbody>' + "".join(rows)
            + f'</tbody></table><p class="note">Information gain (H(X) − H(X|Y)) / H(X) about a small count X from '
            f'its published value Y, prior {_e(prior)} (seed 001 §5); differencing: the published difference of two '
            "large cells n apart (001 §1, §4). Both computed exactly from the method's stated P(published | n); "
            "– where the method does not state one (or for chains). Unswapped risky households from the swapping "
            "steps' reports.</p></section>")


def _section_noise(ev: Evaluation) -> str:
    parts = ['<section id="noise"><h2>Distribution of the noise</h2><p class="note">Per setting and table: the '
             "share of inner cells by published − original (beyond ±10 in the end bins).</p>"]
    for i, run in enumerate(ev.runs, 1):
        charts = []
        for t_i, name in enumerate(ev.tables):
            r = ev.result(name, run.setting.label)
            charts.append(_bars(r.noise, svg_id=f"noise-{i}-{t_i}", title=name))
        parts.append(f'<h3>{i}. {_e(run.setting.label)}</h3><div class="maps">{"".join(charts)}</div>')
    return "".join(parts) + "</section>"


def _section_checker(ev: Evaluation) -> str:
    rows = []
    for r in ev.results:
        c = r.checker
        applied = "<br>".join(
            f"<b>{_e(s['method'])}</b> <span class=small>{_e(_params_text(s['params']))}</span>" for s in c["applied"])
        notes = "<br>".join(_e(n) for n in c["notes"]) or "–"
        rows.append(
            f'<tr><td class="l">{_e(r.table)}</td><td class="l">{_e(r.setting)}</td><td class="l">{applied}</td>'
            f'<td>{c["cells"]:,}</td><td>{c["cells_suppressed"]:,}</td><td>{c["cells_perturbed"]:,}</td>'
            f'<td>{_f(c["additive"]) if c["additive"] is not None else "–"}</td>'
            f'<td class="l small">{notes}</td><td class="l"><code>{_e(c["release_file"])}</code><br>'
            f'<span class="hash">{_e(c["sha256"])}</span></td></tr>')
    return ('<section id="checker"><h2>Output checker</h2><table id="output-checker"><thead><tr>'
            '<th class="l">table</th><th class="l">setting</th><th class="l">applied</th><th>cells</th>'
            '<th>suppressed</th><th>perturbed</th><th>additive</th><th class="l">notes</th>'
            '<th class="l">release file and SHA-256</th></tr></thead><tbody>' + "".join(rows)
            + '</tbody></table><p class="note">Cells of the whole grid (margins and subtotals included). The '
            "checksum is of the release as CSV, every grid cell listed (what <code>tabsafe protect --out "
            "FILE.csv</code> and <code>tabsafe evaluate --releases DIR</code> write).</p></section>")


def _params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in params.items())


def _section_params(ev: Evaluation) -> str:
    import yaml

    rows = []
    for i, run in enumerate(ev.runs, 1):
        steps = []
        for m, s in zip(run.setting.methods, run.step_seeds):
            seed = f" seed {_e(s)}" if m.random and s is not None else " (deterministic)"
            steps.append(f"<b>{_e(m.name)}</b>{seed}<br><code>{_e(json.dumps(m.params(), default=str))}</code>")
        rows.append(f'<tr><td>{i}</td><td class="l">{_e(run.setting.label)}</td>'
                    f'<td>{_e(run.seed if run.seed is not None else "–")}</td><td class="l">{"<br>".join(steps)}</td>'
                    "</tr>")
    config = yaml.safe_dump(ev.config, sort_keys=False, allow_unicode=True, width=110)
    return ('<section id="params"><h2>Parameters and seeds</h2><table id="parameters"><thead><tr><th>#</th>'
            '<th class="l">setting</th><th>seed</th><th class="l">steps: parameters and step seeds</th></tr></thead>'
            '<tbody>' + "".join(rows) + '</tbody></table><h3>Configuration (rerun with <code>tabsafe evaluate '
            f'CONFIG.yaml</code>)</h3><pre id="config">{_e(config)}</pre><p class="note">A run with seed S draws '
            "the noise of its k-th step from SeedSequence(S, spawn_key=(k,)), a method alone being step 0 (as "
            "<code>tabsafe protect --method A,B --seed S</code> does). This report is private: seeds undo the "
            "noise.</p></section>")


def _section_data(ev: Evaluation) -> str:
    payload = json.dumps(ev.to_json(), indent=1, default=str, allow_nan=False)
    js = base64.b64encode(payload.encode("utf-8")).decode("ascii")
    csv = base64.b64encode(ev.to_csv().encode("utf-8")).decode("ascii")
    return ('<section id="data"><h2>The measures as data</h2>'
            f'<a class="download" id="download-json" download="measures.json" '
            f'href="data:application/json;base64,{js}">measures.json</a>'
            f'<a class="download" id="download-csv" download="measures.csv" href="data:text/csv;base64,{csv}">'
            'measures.csv</a><p class="note">JSON: every measure, setting, seed and checksum; CSV: one number a '
            "line (table, setting, group, measure, value).</p></section>")


def _section_notes(ev: Evaluation) -> str:
    return (
        '<section id="notes"><h2>How the measures are taken</h2><ul class="note">'
        "<li>Every measure compares a release with the table of the unperturbed records; a chain with a "
        "microdata step (swapping, PRAM) is compared with the table before the records were perturbed.</li>"
        "<li>Per-row measures: the rows are the codes of the table's row variable (a geography); the mean over "
        "the rows is shown with its standard error √(s²/n<sub>r</sub>) (seed 004 §5.2 prints the rows' "
        "variance).</li>"
        "<li>Relative absolute distance: over the cells whose original count is not 0 (seed 002 §4.2).</li>"
        "<li>A suppressed cell counts as 0 (the naive user of seed 000 §5.8).</li>"
        "<li>DR counts a record as perturbed when its cell was published with another value, or when a "
        "microdata step moved it to another cell of the table.</li>"
        "<li>Entropy risk r# (000 §5.9) uses the entropy of a unit's original cell given its published cell; "
        "methods that change counts without moving units (cell perturbation, rounding) leave it at 0, so only "
        "the zeros term moves.</li>"
        "<li>Information gain and differencing risk are exact sums over the method's stated distribution "
        "P(published | true count), not simulations.</li>"
        "</ul></section>"
    )


def render_html(ev: Evaluation) -> str:
    """The report as one HTML document (see the module docstring)."""
    from tabsafe import __version__

    n_settings, n_tables = len(ev.runs), len(ev.tables)
    sections = [
        _section_overview(ev), _section_map(ev), _section_risk(ev), _section_distances(ev), _section_marginal(ev),
        _section_variance_ranks(ev), _section_tests(ev), _section_method(ev), _section_noise(ev),
        _section_checker(ev), _section_params(ev), _section_data(ev), _section_notes(ev),
    ]
    nav = "".join(f'<a href="#{a}">{t}</a>' for a, t in (
        ("overview", "tables & settings"), ("ru-map", "R-U map"), ("risk", "risk"), ("distances", "distances"),
        ("marginal", "margins"), ("variance", "variance & ranks"), ("tests", "tests"), ("method", "method risk"),
        ("noise", "noise"), ("checker", "output checker"), ("params", "parameters & seeds"), ("data", "data")))
    csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(ev.title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>{_e(ev.title)}</h1><p>{n_settings} settings × {n_tables} tables from {_e(ev.data)} — "
        f"tabsafe {_e(__version__)}. Published values and measures only.</p></header>"
        f"<nav>{nav}</nav><main>{''.join(sections)}</main></body></html>\n"
    )
