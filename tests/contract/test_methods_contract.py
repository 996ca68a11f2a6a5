"""One contract for every discovered method (DESIGN.md, style 10; tabsafe.testing.contract).

The cases are the registry's methods — tabsafe's own and any plugin's — each checked with the
examples it supplies: declared and documented parameters, params round trip, one-line errors
naming each parameter, same seed → same output, input and meta untouched, report from the
declared parameters, no secret in the release, needs() honoured, identity parameters → the
original, options that join ``tabsafe protect``.
"""

from __future__ import annotations

import pytest

from tabsafe.registry import get_method, method_names
from tabsafe.testing.contract import check_method


@pytest.mark.parametrize("name", method_names())
def test_contract(name: str) -> None:
    check_method(get_method(name))
