"""Shared fixtures: a small synthetic census written once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tabsafe.synth import SynthResult, synth_census


@pytest.fixture(scope="session")
def small_census(tmp_path_factory: pytest.TempPathFactory) -> SynthResult:
    """20,000 persons (seed 7): persons.parquet, households.parquet, meta.yaml, hierarchies/."""
    out: Path = tmp_path_factory.mktemp("census") / "census"
    return synth_census(20_000, 7, out)


# hypothesis: one profile for every property test (no per-test deadline tweaks)
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("tabsafe", max_examples=40, deadline=None)
_hypothesis_settings.load_profile("tabsafe")
