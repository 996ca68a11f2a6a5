"""Hierarchy construction, validation (one clear message per failure mode) and file round trips."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabsafe import Hierarchy, InputError

GEO = {"R1": {"A1": ["S1", "S2"], "A2": ["S3"]}, "R2": {"A3": ["S4", "S5"]}}


def test_tree_order_depths_and_leaves() -> None:
    h = Hierarchy.from_tree(GEO)
    assert h.order == ("Total", "R1", "A1", "S1", "S2", "A2", "S3", "R2", "A3", "S4", "S5")
    assert h.leaves == ("S1", "S2", "S3", "S4", "S5")
    assert [h.depth(c) for c in ("Total", "R2", "A3", "S5")] == [0, 1, 2, 3]
    assert h.children("A1") == ("S1", "S2")
    assert h.ancestors("S3") == ("S3", "A2", "R1", "Total")


def test_hrc_round_trip_keeps_structure(tmp_path) -> None:
    h = Hierarchy.from_tree(GEO)
    text = h.to_hrc()
    assert text.splitlines()[:4] == ["R1", "@A1", "@@S1", "@@S2"]
    path = tmp_path / "geo.hrc"
    path.write_text(text)
    assert Hierarchy.from_hrc(path) == h


def test_yaml_round_trip(tmp_path) -> None:
    import yaml

    h = Hierarchy.from_tree(GEO)
    path = tmp_path / "geo.yaml"
    path.write_text(yaml.safe_dump(h.to_tree()))
    assert Hierarchy.from_yaml(path) == h


def test_yaml_parents_form_and_int_codes(tmp_path) -> None:
    path = tmp_path / "h.yaml"
    path.write_text("parents:\n  1: A\n  2: A\n  3: B\n  A: null\n  B: null\n")
    h = Hierarchy.from_yaml(path)
    assert h.children("A") == ("1", "2") and h.leaves == ("1", "2", "3")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("R1\n@A1\n@@S1\nR2\n@A1\n", "'A1' appears again (under 'R1' and 'R2')"),
        ("R1\n@@S1\n", "'S1' is 2 levels below the line before it"),
        ("", "empty hierarchy"),
        ("R1\n@Total\n", "may not be named 'Total'"),
    ],
)
def test_hrc_failure_modes(text: str, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)) as err:
        Hierarchy.from_hrc_text(text, source="geo.hrc")
    assert "\n" not in str(err.value) and str(err.value).startswith("geo.hrc")


def test_tree_leaf_in_two_parents() -> None:
    with pytest.raises(InputError, match="'S1' appears under both 'A1' and 'A2'"):
        Hierarchy.from_tree({"A1": ["S1"], "A2": ["S1"]})


def test_cycle_is_reported_with_its_path() -> None:
    with pytest.raises(InputError, match="cycle in hierarchy: (A -> B -> A|B -> A -> B)"):
        Hierarchy.from_parents({"A": "B", "B": "A", "C": None})


def test_parent_that_is_not_a_code() -> None:
    with pytest.raises(InputError, match="parent 'X' of 'A' is not a code"):
        Hierarchy.from_parents({"A": "X"})


def test_leaves_must_be_in_codelist() -> None:
    h = Hierarchy.from_tree({"R1": ["A1", "A9"]}, source="geo.yaml")
    with pytest.raises(InputError, match="geo.yaml: 1 leaf code\\(s\\) not in the codelist of 'area': 'A9'"):
        h.check_codelist(["A1", "A2"], variable="area")


def test_unknown_file_format(tmp_path) -> None:
    path = tmp_path / "h.txt"
    path.write_text("A\n")
    with pytest.raises(InputError, match="unknown hierarchy format '.txt'"):
        Hierarchy.from_file(path)


def test_invalid_yaml_names_line(tmp_path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("R1: [A1, A2\nR2: x\n")
    with pytest.raises(InputError, match="bad.yaml line"):
        Hierarchy.from_yaml(path)


@st.composite
def trees(draw: st.DrawFn, depth: int = 3) -> dict:
    counter = iter(range(10_000))

    def node(level: int) -> object:
        n = draw(st.integers(1, 3))
        if level == depth or draw(st.booleans()) and level > 1:
            return [f"L{next(counter)}" for _ in range(n)]
        return {f"N{next(counter)}": node(level + 1) for _ in range(n)}

    return node(1)  # type: ignore[return-value]


@given(trees())
@settings(max_examples=40)
def test_hrc_round_trip_random(tree: dict) -> None:
    h = Hierarchy.from_tree(tree)
    assert Hierarchy.from_hrc_text(h.to_hrc()) == h
    assert Hierarchy.from_tree(h.to_tree()) == h
    # Every code except the root has exactly one parent, and every chain ends at the root.
    assert all(h.ancestors(c)[-1] == "Total" for c in h.order)
