"""Hypothesis building blocks shared by the property tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

from tabsafe.model.hierarchy import Hierarchy


def dimensions(draw: Callable[[st.SearchStrategy[Any]], Any], names: Sequence[str],
               max_leaves: int) -> tuple[dict[str, Hierarchy], list[list[str]]]:
    """Per variable, 2..``max_leaves`` leaf codes, either flat or split into two groups under the
    total: the hierarchies and each variable's leaves."""
    hierarchies: dict[str, Hierarchy] = {}
    codes: list[list[str]] = []
    for name in names:
        n_leaves = draw(st.integers(2, max_leaves))
        leaves = [f"{name}{i}" for i in range(n_leaves)]
        if n_leaves >= 3 and draw(st.booleans()):
            cut = draw(st.integers(1, n_leaves - 1))
            hierarchies[name] = Hierarchy.from_tree({f"{name}G1": leaves[:cut], f"{name}G2": leaves[cut:]})
        else:
            hierarchies[name] = Hierarchy.flat(leaves)
        codes.append(leaves)
    return hierarchies, codes
