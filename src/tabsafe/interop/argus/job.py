"""The state of a tau-ARGUS job while :mod:`.runner` executes it, and the files it opens.

Shared by :mod:`.runner` (the commands) and :mod:`.tables` (the tables they build and protect).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabsafe.interop.argus._text import fail
from tabsafe.interop.argus.arb import Command, Rule
from tabsafe.interop.argus.hst import AprioriEntry
from tabsafe.interop.argus.rda import Metadata
from tabsafe.interop.argus.writetable import CellTable
from tabsafe.model.table import Table

__all__ = ["Job", "JobTable", "Step", "read_file", "records_of", "resolve"]


@dataclass(frozen=True)
class Step:
    """What became of one command."""

    line: int
    command: str
    outcome: str
    text: str

    def render(self, source: str) -> str:
        return f"{source}:{self.line}: <{self.command}> {self.outcome}: {self.text}"


@dataclass
class JobTable:
    """A table the job specified (mutable while the job runs: its rules, recodes, a-priori entries
    and cells change command by command)."""

    expl: tuple[str, ...]
    response: str
    shadow: str
    cost: str
    rules: tuple[Rule, ...] | None = None
    recodes: dict[str, tuple[str, str]] = field(default_factory=dict)
    apriori: list[tuple[str, AprioriEntry]] = field(default_factory=list)
    cells: CellTable | None = None
    base: Table | None = None


@dataclass
class Job:
    arb: Path
    steps: list[Step] = field(default_factory=list)
    data: Path | None = None
    tabular: bool = False
    meta: Metadata | None = None
    meta_dir: Path | None = None
    tables: list[JobTable] = field(default_factory=list)
    records: Any = None
    record_lines: tuple[int, ...] = ()

    @property
    def src(self) -> str:
        return self.arb.name

    def say(self, cmd: Command, outcome: str, text: str) -> None:
        self.steps.append(Step(cmd.line, cmd.keyword, outcome, text))


def resolve(name: str, bases: list[Path], src: str, line: int, what: str) -> Path:
    """A file a job names: as given (relative to the job's folder), else its base name beside the
    job or the data (a job moved from a Windows machine)."""
    candidates = [b / name for b in bases] + [b / re.split(r"[\\/]", name)[-1] for b in bases]
    for c in candidates:
        if c.is_file():
            return c
    raise fail(src, line, what, "the file does not exist (looked beside the job and the data)")


def read_file(path: Path, src: str, line: int, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        raise fail(src, line, what, "cannot read the file") from None


def records_of(job: Job, cmd: Command) -> Any:
    from tabsafe.interop.argus.asc import read_asc

    if job.records is None:
        assert job.data is not None and job.meta is not None
        text = read_file(job.data, job.src, cmd.line, "data file")
        job.records = read_asc(text, job.meta, source=job.data.name)
        job.record_lines = tuple(i for i, line in enumerate(text.splitlines(), 1) if line.strip())
    return job.records


