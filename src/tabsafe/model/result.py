"""What a protection method returns: the protected table and a report of what it did."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tabsafe.model.table import Table


@dataclass(frozen=True, kw_only=True)
class Report:
    """What a method did, for the user and for the evaluation report.

    Attributes:
        method: the registered name of the method (``"ckm"``, ``"round"``…).
        params: the parameters as given (JSON-serialisable values).
        seed: the seed used, if the method is random.
        figures: numbers worth reporting (cells changed, objective, gap, time…).
        notes: sentences worth reporting (decisions, warnings).
    """

    method: str
    params: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None
    figures: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Protection:
    """A protected table and its report.

    ``table`` holds the released values in ``count`` and the original counts in ``original``;
    ``release_columns`` names the value columns that may be published (``count`` and, e.g.,
    existence intervals or a suppression status); everything else is for evaluation only.
    """

    table: Table
    report: Report
    release_columns: tuple[str, ...] = ("count",)
