"""No function in src/ over 80 lines unless its docstring says why (issue #24, the project's style
rule "keep functions under ~80 lines").

A function is measured from its ``def`` line to its last line (docstring, comments and blank
lines included: what a reader has to hold). A function may be longer when its docstring has a line
starting ``Long because:`` that gives the reason. ``ALLOWED`` may name a file or folder not checked
yet, with why (empty: every function of src/ is checked).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tabsafe"
MAX_LINES = 80
REASON = "Long because:"

#: Paths under src/tabsafe (a file, or a folder ending in "/") not checked yet, with why.
ALLOWED: dict[str, str] = {}


def _allowed(rel: str, allowed: dict[str, str]) -> bool:
    return any(rel == entry or (entry.endswith("/") and rel.startswith(entry)) for entry in allowed)


def _has_reason(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    doc = ast.get_docstring(node) or ""
    return any(line.strip().startswith(REASON) for line in doc.splitlines())


def long_functions(root: Path, allowed: dict[str, str], limit: int = MAX_LINES) -> list[str]:
    """Every function (methods and nested ones too) in the ``.py`` files under ``root`` longer than
    ``limit`` lines without a ``Long because:`` line in its docstring, outside ``allowed``; one
    ``path:line name (n lines)`` each."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if _allowed(rel, allowed):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if n > limit and not _has_reason(node):
                    found.append(f"{rel}:{node.lineno} {node.name} ({n} lines)")
    return found


def test_no_function_in_src_is_long_without_a_reason() -> None:
    found = long_functions(SRC, ALLOWED)
    assert not found, (f"functions over {MAX_LINES} lines: split them by responsibility, or give the reason "
                       f"in a docstring line starting {REASON!r}:\n  " + "\n  ".join(found))


def test_the_allowed_paths_exist() -> None:
    # a renamed or removed file must leave the list, or the list would hide its successor's length
    missing = [entry for entry in ALLOWED if not (SRC / entry.rstrip("/")).exists()]
    assert not missing, f"allow-listed paths that do not exist: {missing}"


def _function(name: str, body_lines: int, doc: str = "A function.") -> str:
    body = "".join(f"    x{i} = {i}\n" for i in range(body_lines))
    return f'def {name}():\n    """{doc}"""\n{body}    return 0\n'


def test_the_check_bites(tmp_path: Path) -> None:
    # 81 lines (def, docstring, 78 statements, return) is one too many; 80 pass
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(_function("too_long", 78) + "\n\n" + _function("just_fits", 77),
                                           encoding="utf-8")
    assert long_functions(tmp_path, {}) == ["pkg/m.py:1 too_long (81 lines)"]
    # methods and nested functions count too
    nested = "class C:\n    def m(self):\n        def inner():\n" + "".join(
        f"            y{i} = {i}\n" for i in range(80)) + "        return inner\n"
    (tmp_path / "pkg" / "n.py").write_text(nested, encoding="utf-8")
    assert [f.split(" ")[1] for f in long_functions(tmp_path, {})] == ["too_long", "m", "inner"]
    # a reason in the docstring lets it be; so does an allow-list entry (file or folder)
    (tmp_path / "pkg" / "n.py").unlink()
    (tmp_path / "pkg" / "m.py").write_text(_function("too_long", 78, "One table.\n\n    Long because: one SQL."),
                                           encoding="utf-8")
    assert long_functions(tmp_path, {}) == []
    (tmp_path / "pkg" / "m.py").write_text(_function("too_long", 78, "Long, but no reason given."), encoding="utf-8")
    assert long_functions(tmp_path, {}) == ["pkg/m.py:1 too_long (81 lines)"]
    assert long_functions(tmp_path, {"pkg/m.py": "split pending"}) == []
    assert long_functions(tmp_path, {"pkg/": "split pending"}) == []
    assert long_functions(tmp_path, {"pk": "a prefix is no folder"}) == ["pkg/m.py:1 too_long (81 lines)"]
