"""The suite's own rules, checked: browser tests fail rather than skip under CI, CI sets CI, and
Hypothesis is configured in tests/conftest.py alone (a profile loaded by one test module changes
the settings of every module imported after it, so results depended on the order of imports)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _pytest.outcomes import Failed, OutcomeException, Skipped

import tests.chromium as chromium

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


@pytest.mark.parametrize("ci", ["1", "true"])
def test_a_missing_browser_fails_under_ci(monkeypatch, tmp_path, ci: str) -> None:
    monkeypatch.setattr(chromium, "CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.setenv("CI", ci)
    # caught as either outcome: a skip escaping here would turn this test into a skip, not a failure
    with pytest.raises(OutcomeException) as outcome:
        chromium.require_chromium()
    assert type(outcome.value) is Failed, type(outcome.value)
    assert "no-chromium missing: run scripts/ensure-chromium" in outcome.value.msg


@pytest.mark.parametrize("ci", [None, "", "0"])
def test_a_missing_browser_skips_outside_ci(monkeypatch, tmp_path, ci: str | None) -> None:
    monkeypatch.setattr(chromium, "DRIVER", str(tmp_path / "no-driver"))
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(OutcomeException) as outcome:
        chromium.require_chromium()
    assert type(outcome.value) is Skipped, type(outcome.value)
    assert "no-driver missing" in outcome.value.msg


def test_a_present_browser_runs_under_ci(monkeypatch, tmp_path) -> None:
    for name in ("CHROMIUM", "DRIVER"):
        (tmp_path / name).touch()
        monkeypatch.setattr(chromium, name, str(tmp_path / name))
    monkeypatch.setenv("CI", "1")
    assert chromium.require_chromium() is None


def test_ci_runs_the_suite_with_ci_set() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^export CI=1$", script, re.M), script


def test_hypothesis_is_configured_in_the_root_conftest_only() -> None:
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT).as_posix()
        if rel in ("tests/conftest.py", "tests/unit/test_suite_policy.py"):
            continue
        if re.search(r"register_profile|load_profile", text):
            offenders.append(f"{rel}: a settings profile")
        for knob in ("deadline", "derandomize", "database", "HealthCheck.too_slow"):
            if re.search(rf"settings\([^)]*{re.escape(knob)}", text, re.S):
                offenders.append(f"{rel}: {knob} in a per-test settings")
    assert not offenders, offenders
