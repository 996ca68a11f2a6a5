"""tau-ARGUS codelists (``.cdl``): one ``code,label`` per line.

Source: the tau-ARGUS manual ("Codelist file"). Codes may be padded with spaces to the
variable's width (`` 1,Groningen``); tabsafe trims them and pads them again on writing when a
width is given. The label is everything after the first comma.
"""

from __future__ import annotations

from collections.abc import Mapping

from tabsafe.interop.argus._text import fail, lines

__all__ = ["read_cdl", "write_cdl"]


def read_cdl(text: str, *, source: str = "codelist.cdl") -> dict[str, str]:
    """Code → label, in file order."""
    out: dict[str, str] = {}
    first: dict[str, int] = {}
    for ln in lines(text):
        if "," not in ln.text:
            raise fail(source, ln.number, "line", "needs 'code,label'")
        code, label = ln.text.split(",", 1)
        code = code.strip()
        if not code:
            raise fail(source, ln.number, "code", "empty")
        if code in out:
            raise fail(source, ln.number, "code", f"appears again (first on line {first[code]})")
        out[code] = label.strip()
        first[code] = ln.number
    if not out:
        raise fail(source, None, "codes", "the codelist is empty")
    return out


def write_cdl(labels: Mapping[str, str], *, width: int | None = None) -> str:
    """The ``.cdl`` text of ``labels`` (codes right-aligned to ``width`` when given)."""
    out = []
    for code, label in labels.items():
        if "," in code or "\n" in label or "\n" in code:
            raise ValueError("a .cdl code holds no comma and no line break; a label no line break")
        out.append(f"{code.rjust(width) if width else code},{label}")
    return "\n".join(out) + "\n"
