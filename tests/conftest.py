"""Shared fixtures: a small synthetic census written once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from tabsafe.synth import SynthResult, synth_census

# hypothesis' settings in one place: no per-example deadline (examples that solve linear
# programs take seconds on a loaded machine; the suite's time is kept by max_examples)
settings.register_profile("tabsafe", deadline=None)
settings.load_profile("tabsafe")


@pytest.fixture(scope="session")
def small_census(tmp_path_factory: pytest.TempPathFactory) -> SynthResult:
    """20,000 persons (seed 7): persons.parquet, households.parquet, meta.yaml, hierarchies/."""
    out: Path = tmp_path_factory.mktemp("census") / "census"
    return synth_census(20_000, 7, out)
