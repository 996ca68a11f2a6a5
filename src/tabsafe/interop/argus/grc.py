"""tau-ARGUS global recodes (``.grc``) and their application to codes and hierarchies.

Source: the tau-ARGUS manual ("Global recode"). A recode file is either

* a list of rules ``NEW : OLD, OLD-OLD, -OLD, OLD-`` (one new code per line: single codes,
  ranges, everything up to or from a code — codes compared as tau-ARGUS compares them, right
  aligned to the variable's width), optionally with ``<MISSING> code [code]`` (new missing
  values) and ``<CODELIST> file`` (labels of the new codes); or
* a tree recode: ``<TREERECODE>`` then the codes of a hierarchy whose subtrees are closed (their
  descendants are counted in them, they become leaves).

A batch file may also recode a hierarchy by a digit, ``<RECODE> 1, Region, 2``: every node of
level 2 with children is closed (:func:`truncate`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tabsafe.interop.argus._text import fail, lines, quote, tokens
from tabsafe.model.hierarchy import Hierarchy

__all__ = ["Recode", "RecodeRule", "apply_rules", "close_nodes", "read_grc", "truncate", "write_grc"]


@dataclass(frozen=True)
class RecodeRule:
    """``target : sources``; a source is ``(low, high)``: ``(c, c)`` one code, ``(None, c)``
    everything up to ``c``, ``(c, None)`` everything from ``c``, ``(a, b)`` a range."""

    target: str
    sources: tuple[tuple[str | None, str | None], ...]
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Recode:
    """A ``.grc`` file: rules, or (``tree``) the codes a tree recode closes."""

    rules: tuple[RecodeRule, ...] = ()
    tree: tuple[str, ...] | None = None
    missing: tuple[str, ...] = ()
    codelist: str | None = None


def _source(part: str, source: str, line: int, k: int) -> tuple[str | None, str | None]:
    where = f"source {k}"
    text = part.strip()
    if not text or text == "-":
        raise fail(source, line, where, "empty")
    if text.startswith('"') and text.endswith('"') and len(text) >= 2:
        return text[1:-1].strip(), text[1:-1].strip()
    if text.startswith("-"):
        return None, text[1:].strip()
    if text.endswith("-"):
        return text[:-1].strip(), None
    if "-" in text:
        low, high = (x.strip() for x in text.split("-", 1))
        if not low or not high or "-" in high:
            raise fail(source, line, where, "a range is 'low-high'")
        return low, high
    return text, text


def read_grc(text: str, *, source: str = "recode.grc") -> Recode:
    """Parse a ``.grc`` file's text."""
    body = lines(text)
    if body and body[0].text.strip().upper() == "<TREERECODE>":
        codes = tuple(ln.text.strip() for ln in body[1:])
        if not codes:
            raise fail(source, body[0].number, "<TREERECODE>", "no code to close")
        return Recode(tree=codes)
    rules: list[RecodeRule] = []
    missing: tuple[str, ...] = ()
    codelist = None
    for ln in body:
        stripped = ln.text.strip()
        if stripped.upper().startswith("<MISSING>"):
            missing = tuple(t.strip() for t in tokens(stripped, source, ln.number)[1:])
            if not 1 <= len(missing) <= 2:
                raise fail(source, ln.number, "<MISSING>", "needs one or two codes")
            continue
        if stripped.upper().startswith("<CODELIST>"):
            args = tokens(stripped, source, ln.number)[1:]
            if len(args) != 1:
                raise fail(source, ln.number, "<CODELIST>", "needs one file name")
            codelist = args[0]
            continue
        if ":" not in stripped:
            raise fail(source, ln.number, "rule", "needs 'new code : old codes'")
        target, rest = stripped.split(":", 1)
        target = target.strip().strip('"').strip()
        if not target:
            raise fail(source, ln.number, "new code", "empty")
        parts = rest.split(",")
        rules.append(RecodeRule(target, tuple(_source(p, source, ln.number, k) for k, p in enumerate(parts, 1)),
                                ln.number))
    if not rules:
        raise fail(source, None, "rules", "the recode file has no rule")
    return Recode(rules=tuple(rules), missing=missing, codelist=codelist)


def write_grc(recode: Recode) -> str:
    """The ``.grc`` text of ``recode`` (:func:`read_grc` reads it back to the same value)."""
    if recode.tree is not None:
        return "<TREERECODE>\n" + "".join(c + "\n" for c in recode.tree)
    out = []
    for rule in recode.rules:
        parts = []
        for low, high in rule.sources:
            if low == high:
                parts.append(str(low))
            else:
                parts.append(f"{low or ''}-{high or ''}")
        out.append(f"{rule.target} : {', '.join(parts)}")
    if recode.missing:
        out.append("<MISSING> " + " ".join(quote(m) for m in recode.missing))
    if recode.codelist is not None:
        out.append(f"<CODELIST> {quote(recode.codelist)}")
    return "\n".join(out) + "\n"


def apply_rules(recode: Recode, codes: Sequence[str], *, width: int, source: str = "recode.grc") -> dict[str, str]:
    """Old code → new code for every code of ``codes`` (codes no rule names keep their code).

    Codes are compared right-aligned to ``width``, as tau-ARGUS compares them (``9`` < ``10``).
    A code two rules claim goes to the later rule, as in tau-ARGUS (it counts such overlaps).
    """
    def key(code: str) -> str:
        return code.rjust(width)

    out = {c: c for c in codes}
    for rule in recode.rules:
        for k, (low, high) in enumerate(rule.sources, 1):
            hits = [c for c in codes if (low is None or key(c) >= key(low)) and (high is None or key(c) <= key(high))]
            if low is not None and low == high and not hits:
                raise fail(source, rule.line or None, f"source {k}", "names a code that does not occur")
            for c in hits:
                out[c] = rule.target
    return out


def close_nodes(hierarchy: Hierarchy, closed: Sequence[str], *, source: str = "recode.grc") -> tuple[Hierarchy, dict[str, str]]:
    """The hierarchy with the subtrees of ``closed`` nodes removed (the nodes become leaves), and
    old leaf → new leaf."""
    known = set(hierarchy.order)
    for i, code in enumerate(closed, 1):
        if code not in known:
            raise fail(source, None, f"code {i}", "is not a code of the hierarchy")
    shut = set(closed)
    mapping: dict[str, str] = {}
    keep: list[str] = []
    for code in hierarchy.order:
        chain = hierarchy.ancestors(code)[1:]
        top = next((a for a in reversed(chain) if a in shut), None)
        if top is None:
            keep.append(code)
        if hierarchy.is_leaf(code):
            mapping[code] = top if top is not None else code
    parents = {c: hierarchy.parents[c] for c in keep[1:]}
    return Hierarchy(parents, tuple(keep), hierarchy.total, hierarchy.source), mapping


def truncate(hierarchy: Hierarchy, level: int) -> tuple[Hierarchy, dict[str, str]]:
    """Close every node of ``level`` (1: top level) that has children: tau-ARGUS's digit recode."""
    nodes = [c for c in hierarchy.order[1:] if hierarchy.depth(c) == level and not hierarchy.is_leaf(c)]
    return close_nodes(hierarchy, nodes)


def recode_codes(mapping: Mapping[str, str], values: Sequence[str]) -> list[str]:
    return [mapping.get(v, v) for v in values]
