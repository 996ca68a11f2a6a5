"""tau-ARGUS hierarchies: ``.hrc`` files (any leading string) and digit-split levels.

Source: the tau-ARGUS manual ("Hierarchical codelists"). An ``.hrc`` file lists the codes below
the total, each after one leading string (``@`` unless ``<HIERLEADSTRING>`` says otherwise) per
level below the top; codes may be padded with spaces to the variable's width (``@ 1``), which
tabsafe trims. ``<HIERLEVELS> 3 1 1 1 0 0`` instead builds the tree from the digits of the codes
(a 6-digit code under its 5-, 4- and 3-digit prefixes).

:class:`~tabsafe.model.hierarchy.Hierarchy` already reads ``@`` files; this module adds the
leading string, width padding on writing, the digit-split form and errors that name the line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tabsafe.interop.argus._text import fail, lines
from tabsafe.model.hierarchy import TOTAL, Hierarchy

__all__ = ["digit_hierarchy", "read_hrc", "write_hrc"]


def _depth_and_code(text: str, lead: str) -> tuple[int, str]:
    depth, i = 1, 0
    while text.startswith(lead, i):
        depth += 1
        i += len(lead)
    return depth, text[i:].strip()


def read_hrc(text: str, *, lead: str = "@", total: str = TOTAL, source: str = "hierarchy.hrc",
             extra: Sequence[str] = ()) -> Hierarchy:
    """The hierarchy of an ``.hrc`` file's text; ``extra`` codes (missing values) are added as
    top-level leaves when the file does not list them, as tau-ARGUS adds them."""
    if not lead:
        raise fail(source, None, "<HIERLEADSTRING>", "the leading string is empty")
    parents: dict[str, str] = {}
    first_line: dict[str, int] = {}
    order = [total]
    stack = [total]
    for ln in lines(text):
        depth, code = _depth_and_code(ln.text.strip(), lead)
        if not code:
            raise fail(source, ln.number, "code", "empty")
        if depth > len(stack):
            raise fail(source, ln.number, "level", "more than one level below the line before it")
        if code == total:
            raise fail(source, ln.number, "code", "equals the total's code")
        if code in parents:
            raise fail(source, ln.number, "code", f"appears again (first on line {first_line[code]})")
        del stack[depth:]
        parents[code] = stack[-1]
        first_line[code] = ln.number
        order.append(code)
        stack.append(code)
    if len(order) == 1:
        raise fail(source, None, "codes", "the hierarchy is empty")
    for code in extra:
        if code and code not in parents and code != total:
            parents[code] = total
            order.append(code)
    return Hierarchy(parents, tuple(order), total, source)


def write_hrc(hierarchy: Hierarchy, *, lead: str = "@", width: int | None = None) -> str:
    """The ``.hrc`` text of ``hierarchy`` (codes right-aligned to ``width`` when given)."""
    out = []
    for code in hierarchy.order[1:]:
        shown = code.rjust(width) if width else code
        out.append(lead * (hierarchy.depth(code) - 1) + shown)
    return "\n".join(out) + "\n"


def digit_hierarchy(codes: Iterable[str], levels: Sequence[int], *, total: str = TOTAL,
                    missing: Sequence[str] = (), source: str = "hierarchy") -> Hierarchy:
    """The tree ``<HIERLEVELS>`` describes: each code under its prefixes of the cumulative level
    widths (``3 1 1 1 0 0``: a code of 6 digits under its 5, 4 and 3 first digits). Missing
    codes are top-level leaves."""
    cuts: list[int] = []
    acc = 0
    for width in levels:
        acc += width
        if width > 0:
            cuts.append(acc)
    parents: dict[str, str] = {}
    for code in sorted(set(codes)):
        if code in missing:
            parents[code] = total
            continue
        if len(code) != acc:
            raise fail(source, None, "<HIERLEVELS>", f"a code of {len(code)} characters where the levels need {acc}")
        chain = [code[:c] for c in cuts[:-1]] + [code]
        parent = total
        for node in chain:
            if node in parents and parents[node] != parent:
                raise fail(source, None, "<HIERLEVELS>", "a prefix is also a code of another level")
            parents.setdefault(node, parent)
            parent = node
    if not parents:
        raise fail(source, None, "codes", "no code to build the hierarchy from")
    return Hierarchy.from_parents(parents, total=total, source=source)
