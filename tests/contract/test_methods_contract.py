"""One contract for every discovered method (DESIGN.md, style 10; tabsafe.testing.contract), one
test item per (method, check), so one failure hides no other (scikit-learn's
``parametrize_with_checks``).

The cases are the registry's methods — tabsafe's own and any plugin's — each checked with the
examples it supplies, by the checks its declared parameters and capabilities call for: declared
and documented parameters, params round trip, one-line errors for every bad value and validate(),
admitted extremes that run, same seed → same output (also in other processes), seeds declared,
no originals in the release, input untouched, each declared capability (consistent, additive,
joint, hides, needs_grid, magnitudes) holding on the examples.
"""

from __future__ import annotations

import pytest

from tabsafe.registry import get_method, method_names
from tabsafe.testing.contract import checks_for, run_check

CASES = [(name, check) for name in method_names() for check in checks_for(get_method(name))]


@pytest.mark.parametrize(("name", "check"), CASES, ids=[f"{n}-{c}" for n, c in CASES])
def test_contract(name: str, check: str) -> None:
    run_check(get_method(name), check)
