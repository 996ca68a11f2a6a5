"""The output formats of tau-ARGUS's ``<WRITETABLE>`` for a table tabsafe protected.

Source: the tau-ARGUS manual ("Save table") and the writers of sdcTools/tauargus (``SaveTable``,
``WriteCSVTable``, ``WriteCellRecords``, ``JJFormat``), whose layouts these follow:

1. **csv** — the table laid out as rows × columns (one block per combination of the other
   variables), ``x`` for a suppressed cell, ``-`` for an empty one;
2. **pivot-csv** — one line per cell: codes, value (a first line of names);
3. **code-value** — the same without the first line unless ``FL+``;
4. **sbs** — the structural business statistics layout: codes, value, frequency, status letter,
   and for a table protected by dominance rules the largest contribution's share in percent
   (values of suppressed cells are shown: a file for the statistical office, not the public);
5. **intermediate** — ``codes;value;freq;status;lower;upper``, the ``.tab`` layout tau-ARGUS
   reads back (``SO+``: codes and status only);
6. **jj** — the JJ format of the solvers: cells with value, cost, status, bounds and
   protection levels, then the additive relations;
7. **ckm** — codes and the perturbed value (``AO+``, ``AD+``, ``AC+`` add original, difference).

Formats 4, 5 and 6, and options that add originals or statuses (``AS+``, ``AO+``, ``AD+``,
``AC+``), carry original values or which cells are primary: :func:`private` says so and the
runner writes them as evaluation files (mode 0600). The others carry published values only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tabsafe.model.table import Dimension

__all__ = ["CS", "LETTER", "CellTable", "private", "write_table"]

#: tau-ARGUS cell statuses (its ``CellStatusItems``)
CS = {"safe": 1, "safe_manual": 2, "unsafe_rule": 3, "unsafe_peep": 4, "unsafe_freq": 5, "unsafe_zero": 6,
      "unsafe_singleton": 7, "unsafe_singleton_manual": 8, "unsafe_manual": 9, "protect_manual": 10,
      "secondary": 11, "secondary_manual": 12, "empty_nonstructural": 13, "empty": 14}


def LETTER(status: int) -> str:
    """The status letter of the intermediate format: S safe, U unsafe, P protected, M secondary, E empty."""
    if status in (13, 14):
        return "E"
    if status in (1, 2):
        return "S"
    if 3 <= status <= 9:
        return "U"
    return "P" if status == 10 else "M"


@dataclass(frozen=True, eq=False)
class CellTable:
    """A protected table as tau-ARGUS writes it: every grid cell (tabsafe's canonical order is
    tau-ARGUS's: the total first, codes in hierarchy order, the last variable fastest).

    Attributes:
        dimensions: the explanatory variables and their hierarchies.
        value: the original response value (the count of a frequency table).
        freq: the number of contributors.
        status: the tau-ARGUS status of each cell (:data:`CS`).
        published: the published value (``nan`` where suppressed; perturbed or rounded values).
        response: the response's name (``Freq`` for a frequency table).
        decimals: decimal places of the response.
        lower, upper: protection levels of unsafe cells.
        method: ``suppress``, ``round``, ``ckm`` or ``None`` (not protected).
        cellkey: the cell keys (cell key method only).
        dominance: the share (percent) of each cell's largest contribution (magnitude tables
            protected by dominance rules only; the SBS format's last field — private).
    """

    dimensions: tuple[Dimension, ...]
    value: np.ndarray
    freq: np.ndarray
    status: np.ndarray
    published: np.ndarray
    response: str = "Freq"
    decimals: int = 0
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    method: str | None = None
    cellkey: np.ndarray | None = None
    dominance: np.ndarray | None = None

    def codes(self, i: int) -> list[str]:
        out = []
        for d in reversed(self.dimensions):
            n = len(d.hierarchy.order)
            out.append(d.hierarchy.order[i % n])
            i //= n
        return out[::-1]


def private(fmt: int, options: Mapping[str, bool]) -> bool:
    """Whether a ``<WRITETABLE>`` output carries original values or statuses (an evaluation file)."""
    if fmt in (4, 5, 6):
        return True
    return any(options.get(o, False) for o in ("AS", "AO", "AD", "AC"))


def _num(x: float, decimals: int) -> str:
    return f"{x:.{decimals}f}"


def _label(code: str, total: str, quote: bool) -> str:
    shown = "Total" if code == total else code
    return f'"{shown}"' if quote else shown


def _public(t: CellTable, i: int) -> str:
    """A cell as the public sees it: the published value, ``x`` suppressed, ``-`` empty."""
    if not np.isfinite(t.published[i]):
        return "x"
    if t.status[i] == 14 and t.method in (None, "suppress"):
        return "-"
    return _num(t.published[i], t.decimals)


def _csv(t: CellTable, quote: bool) -> list[str]:
    dims = t.dimensions
    sizes = [len(d.hierarchy.order) for d in dims]
    labels = [[_label(c, d.hierarchy.total, quote) for c in d.hierarchy.order] for d in dims]
    out: list[str] = []
    if len(dims) == 1:
        out.append("," + ",".join(labels[0]))
        out.append("," + ",".join(_public(t, i) for i in range(sizes[0])))
        return out
    rows, cols = sizes[-2], sizes[-1]
    layers = int(np.prod(sizes[:-2], dtype=np.int64)) if len(dims) > 2 else 1
    for layer in range(layers):
        if len(dims) > 2:
            idx, rest = [], layer
            for s in reversed(sizes[:-2]):
                idx.append(rest % s)
                rest //= s
            idx.reverse()
            out.append(", ".join(f"Var {k + 1},{labels[k][j]}" for k, j in enumerate(idx)))
        out.append("," + ",".join(labels[-1]))
        for r in range(rows):
            base = (layer * rows + r) * cols
            out.append(labels[-2][r] + "," + ",".join(_public(t, base + c) for c in range(cols)))
        out.append("")
    return out


def _records(t: CellTable, fmt: int, opts: Mapping[str, bool]) -> list[str]:
    quote = opts.get("QU", True)
    q = '"' if quote else ""
    out: list[str] = []
    header = fmt == 2 or (fmt == 3 and opts.get("FL", False))
    show = opts.get("AS", False)
    if header:
        names = [f"{q}{d.variable}{q}" for d in t.dimensions] + [f"{q}{t.response}{q}"]
        if show:
            names.append(f"{q}Status{q}")
        out.append(",".join(names))
    skip_empty = opts.get("SE", False) or fmt == 4
    for i in range(t.status.size):
        if skip_empty and t.freq[i] == 0:
            continue
        codes = [_label(c, d.hierarchy.total, quote) for c, d in zip(t.codes(i), t.dimensions)]
        if fmt == 4 and opts.get("HL", False):
            codes = [x for c, d, lab in zip(t.codes(i), t.dimensions, codes)
                     for x in (lab, str(d.hierarchy.depth(c)))]
        if fmt == 4 or show:
            value = _num(t.value[i], t.decimals) if t.freq[i] or t.value[i] else "-"
        else:
            value = _public(t, i)
        fields = [*codes, value]
        if fmt == 4:
            letter = {1: "V", 2: "V", 10: "V", 13: "V", 5: "A", 14: "-", 11: "D", 12: "D"}.get(int(t.status[i]), "B")
            fields += [str(int(t.freq[i])), letter]
            if t.dominance is not None:
                fields.append(f"{t.dominance[i]:.2f}")
        elif show:
            fields.append(str(int(t.status[i])))
        out.append(",".join(fields))
    return out


def _intermediate(t: CellTable, opts: Mapping[str, bool]) -> list[str]:
    out = []
    for i in range(t.status.size):
        if opts.get("SE", False) and t.freq[i] == 0:
            continue
        codes = [f'"{c}"' for c in t.codes(i)]
        if opts.get("SO", False):
            out.append(";".join([*codes, LETTER(int(t.status[i]))]))
            continue
        lo = t.lower[i] if t.lower is not None else 0.0
        hi = t.upper[i] if t.upper is not None else 0.0
        out.append(";".join([*codes, _num(t.value[i], t.decimals), str(int(t.freq[i])), LETTER(int(t.status[i])),
                             _num(lo, t.decimals), _num(hi, t.decimals)]))
    return out


def _jj(t: CellTable) -> list[str]:
    from tabsafe.model.table import Table

    n = t.status.size
    out = ["0", str(n)]
    code = {1: "s", 2: "s", 13: "s", 10: "z", 14: "z", 11: "m", 12: "m"}
    lower_bound = 0.0
    upper_bound = float(np.max(t.value)) * 2 if n else 0.0
    for i in range(n):
        s = code.get(int(t.status[i]), "u")
        lo = t.lower[i] if (s == "u" and t.lower is not None) else 0.0
        hi = t.upper[i] if (s == "u" and t.upper is not None) else 0.0
        cost = max(1, round(t.value[i]))
        out.append(f"{i} {_num(t.value[i], t.decimals)} {cost} {s} {_num(lower_bound, t.decimals)} "
                   f"{_num(upper_bound, t.decimals)} {lo:.{t.decimals + 3}f} {hi:.{t.decimals + 3}f} 0")
    grid = Table.from_grid(t.dimensions, {"count": np.zeros(n)})
    relations = []
    for rel in grid.relations():
        for r in range(rel.total_rows.size):
            kids = rel.child_rows[rel.child_ptr[r]:rel.child_ptr[r + 1]]
            terms = " ".join(f"{k} (1)" for k in kids)
            relations.append(f"0 {kids.size + 1} : {rel.total_rows[r]} (-1) {terms}")
    out.append(str(len(relations)))
    return out + relations


def _ckm(t: CellTable, opts: Mapping[str, bool]) -> list[str]:
    out = []
    for i in range(t.status.size):
        if opts.get("SE", False) and t.freq[i] == 0:
            continue
        fields = [f'"{c}"' for c in t.codes(i)] + [_num(t.published[i], t.decimals)]
        if opts.get("AO", False):
            fields.append(_num(t.value[i], t.decimals))
        if opts.get("AD", False):
            fields.append(_num(t.published[i] - t.value[i], t.decimals))
        if opts.get("AC", False) and t.cellkey is not None:
            fields.append(repr(float(t.cellkey[i])))
        out.append(",".join(fields))
    return out


def write_table(t: CellTable, fmt: int, options: Mapping[str, bool]) -> str:
    """The text of ``<WRITETABLE>`` format ``fmt`` (1–7) with ``options`` (``{"AS": True, …}``)."""
    if fmt == 1:
        body = _csv(t, options.get("QU", True))
    elif fmt in (2, 3, 4):
        body = _records(t, fmt, options)
    elif fmt == 5:
        body = _intermediate(t, options)
    elif fmt == 6:
        body = _jj(t)
    elif fmt == 7:
        body = _ckm(t, options)
    else:
        raise ValueError(f"unknown format {fmt}")
    return "\n".join(body) + "\n"
