"""Shared fixtures (a small synthetic census written once per test session) and the one
Hypothesis profile of the suite.

The profile is the only place Hypothesis is configured (tests set at most ``max_examples`` and a
health check that is about their own fixtures or data). It makes a run independent of the machine
and of earlier runs:

* ``deadline=None``: an example's duration depends on the machine and its load, never on whether
  the code is right;
* ``HealthCheck.too_slow`` off: it times data generation, again the machine's speed;
* ``derandomize=True``: each test draws the same examples on every machine and every run (seeded
  from the test's name), so a failure is a property of the code and reruns identically;
* ``database=None``: no examples replayed from an earlier run's ``.hypothesis/`` folder, which
  would make a run depend on the history of the checkout;
* ``print_blob=True``: a failure prints the ``@reproduce_failure`` line to replay it.

To explore other examples by hand, run with ``--hypothesis-seed=N`` after setting
``derandomize=False`` here; the suite itself stays derandomized.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tabsafe.synth import SynthResult, synth_census

settings.register_profile("tabsafe", deadline=None, derandomize=True, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tabsafe")

# seed fingerprints are keyed (tabsafe.seeds): the suite's key, so that no test makes a key file in
# the home folder (subprocesses inherit it)
os.environ.setdefault("TABSAFE_SEED_KEY", "tabsafe test suite")


@pytest.fixture(scope="session")
def small_census(tmp_path_factory: pytest.TempPathFactory) -> SynthResult:
    """20,000 persons (seed 7): persons.parquet, households.parquet, meta.yaml, hierarchies/."""
    out: Path = tmp_path_factory.mktemp("census") / "census"
    return synth_census(20_000, 7, out)

