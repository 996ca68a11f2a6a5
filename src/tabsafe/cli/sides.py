"""Side tables written beside a command's output: the publishable tables a method's report carries
(:attr:`tabsafe.method.Method.side_tables`; PRAM's transition matrix, seed 001 §6).

``--out release.csv`` with ``--method pram`` writes ``release-transitions.csv`` beside it (CSV:
the strata's values, ``from``, ``to``, ``p``); in a chain with several such steps the step is in
the name (``release-step1-transitions.csv``). The paths are planned with the output, before any
work, by the one output rule (never an input, never an existing file without ``--force``); they
are release files: they may be published.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def side_paths(out: str, methods: Sequence[Any]) -> dict[tuple[int, str], Path]:
    """``(step, table name)`` → the path of each side table the chain's steps may give."""
    named = [(k, name) for k, m in enumerate(methods) for name in getattr(type(m), "side_tables", ())]
    base = Path(out)
    stem = base.name[: -len(base.suffix)] if base.suffix else base.name
    several = len({k for k, _ in named}) > 1
    return {(k, name): base.with_name(f"{stem}-{f'step{k}-' if several else ''}{name}.csv") for k, name in named}


def plan_sides(outputs: Any, out: str, methods: Sequence[Any]) -> dict[tuple[int, str], Path]:
    """Plan the side tables' files beside ``out`` (release files)."""
    return {key: outputs.plan(path, kind="release", option="out") for key, path in side_paths(out, methods).items()}


def write_sides(outputs: Any, planned: dict[tuple[int, str], Path], report: Any) -> list[Path]:
    """Write the side tables ``report`` carries to their planned files; a planned table the
    method did not give (too large to publish: its report says so) is dropped from the plan."""
    from tabsafe.model.result import side_tables

    given = {(k, name): t for k, name, t in side_tables(report)}
    written = []
    for key, path in planned.items():
        table = given.get(key)
        if table is None:
            outputs.planned.pop(path, None)
            continue
        outputs.write_arrow(path, table)
        written.append(path)
    return written
