"""The examples in the docstrings of src/tabsafe run as tests: one test per module that has any.

Each module's examples are found with the standard ``doctest`` finder and run with ELLIPSIS (as
pytest's ``--doctest-modules`` does); a module whose source holds more ``>>>`` lines than the
finder sees (an example in a comment, in a nested function, in an object the finder skips) fails
too, so an example cannot silently stop being run.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import tabsafe

SRC = Path(tabsafe.__file__).parent


def _modules_with_examples() -> list[str]:
    """Dotted names of the modules under src/tabsafe whose text holds a ``>>>`` line (read as
    text: importing every module at collection would cost each worker seconds)."""
    names = []
    for path in sorted(SRC.rglob("*.py")):
        if any(line.lstrip().startswith(">>>") for line in path.read_text(encoding="utf-8").splitlines()):
            parts = path.relative_to(SRC.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = _modules_with_examples()


def test_the_docstrings_hold_examples() -> None:
    """The scan finds the modules (a broken scan would make every test below vanish)."""
    assert len(MODULES) >= 20, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, name)
    source = Path(module.__file__).read_text(encoding="utf-8")
    written = sum(line.lstrip().startswith(">>>") for line in source.splitlines())
    found = sum(len(t.examples) for t in tests)
    assert found == written, f"{name}: {written} '>>>' lines, but doctest finds {found} examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    out: list[str] = []
    for test in tests:
        runner.run(test, out=out.append)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, "".join(out)
