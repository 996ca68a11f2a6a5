"""The cells of a release: which cells of different tables are one cell (same codes, alternative
hierarchies, variables naming the same populations, filters), and what is refused."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tabsafe import Hierarchy, Microdata, tabulate
from tabsafe.errors import InputError
from tabsafe.release import ReleaseCells

DATA = pd.DataFrame({
    "area": ["a0", "a1", "a2", "a3", "a0", "a1", "a2", "a3", "a0", "a3"],
    "region": ["N", "N", "S", "S", "N", "N", "S", "S", "N", "S"],
    "sex": ["1", "2", "1", "2", "2", "1", "1", "2", "1", "1"],
    "act": ["E", "E", "U", "E", "U", "E", "E", "U", "E", "E"],
})
MD = Microdata.from_frame(DATA)
HALVES = Hierarchy.from_tree({"N": ["a0", "a1"], "S": ["a2", "a3"]})
PARITY = Hierarchy.from_tree({"EV": ["a0", "a2"], "OD": ["a1", "a3"]})


def _cell(cells: ReleaseCells, table: int, **codes: str) -> int:
    t = cells.tables[table]
    return int(cells.cells[table][t.cell_id(codes)])


def test_alternative_hierarchies_share_leaves_and_totals() -> None:
    t1 = tabulate(MD, ["area", "sex"], hierarchies={"area": HALVES})
    t2 = tabulate(MD, ["area", "sex"], hierarchies={"area": PARITY})
    cells = ReleaseCells.build([t1, t2])
    # 4 areas + Total shared, by 2 sexes + Total; N, S, EV, OD are four populations of their own
    assert cells.n_cells == (5 + 4) * 3
    assert _cell(cells, 0, area="a2", sex="1") == _cell(cells, 1, area="a2", sex="1")
    assert _cell(cells, 0, area="Total") == _cell(cells, 1, area="Total")
    assert _cell(cells, 0, area="N") != _cell(cells, 1, area="EV")
    values = cells.combine()
    assert values[_cell(cells, 1, area="EV", sex="Total")] == 5  # a0 (3 records) + a2 (2)
    # each table's relations, shared ones (the sex relations of shared cells) once
    assert cells.relations.shape[0] < t1.densify().additivity().shape[0] + t2.densify().additivity().shape[0]
    assert not np.any(cells.relations @ values)


def test_a_code_grouping_other_leaves_in_another_hierarchy_is_refused() -> None:
    other = Hierarchy.from_tree({"N": ["a0", "a2"], "S": ["a1", "a3"]})
    t1 = tabulate(MD, ["area"], hierarchies={"area": HALVES})
    t2 = tabulate(MD, ["area"], hierarchies={"area": other})
    with pytest.raises(InputError, match="code 'N' groups other codes"):
        ReleaseCells.build([t1, t2])


def test_a_hierarchy_missing_a_code_is_refused() -> None:
    small = Hierarchy.flat(["a0", "a1", "a2"])
    t1 = tabulate(MD, ["area"], hierarchies={"area": HALVES})
    t2 = tabulate(Microdata.from_frame(DATA[DATA["area"] != "a3"]), ["area"], hierarchies={"area": small})
    with pytest.raises(InputError, match="does not cover code 'a3'"):
        ReleaseCells.build([t1, t2])


def test_same_codes_link_geography_levels() -> None:
    by_region = tabulate(MD, ["region", "sex"])
    by_area = tabulate(MD, ["area", "sex"], hierarchies={"area": HALVES})
    apart = ReleaseCells.build([by_region, by_area])
    linked = ReleaseCells.build([by_region, by_area], same_codes=[("region", "area")])
    assert _cell(linked, 0, region="N", sex="2") == _cell(linked, 1, area="N", sex="2")
    assert _cell(apart, 0, region="N", sex="2") != _cell(apart, 1, area="N", sex="2")
    assert linked.n_cells == apart.n_cells - 2 * 3  # N and S by sex are cells of both


def test_a_filter_that_is_a_box_links_to_the_unfiltered_table() -> None:
    full = tabulate(MD, ["region", "act", "sex"])
    employed = tabulate(MD, ["region", "sex"], where="act = E")
    cells = ReleaseCells.build([full, employed], wheres=[None, "act = E"])
    assert _cell(cells, 1, region="S", sex="1") == _cell(cells, 0, region="S", act="E", sex="1")
    assert _cell(cells, 1) == _cell(cells, 0, act="E")
    cells.combine()  # the same counts
    # a filter that is not a box is a population of its own
    odd = ReleaseCells.build([full, employed], wheres=[None, "act = E or sex = 1"])
    assert _cell(odd, 1) not in set(odd.cells[0].tolist())


def test_tables_of_other_data_are_refused() -> None:
    t1 = tabulate(MD, ["sex"])
    t2 = tabulate(Microdata.from_frame(DATA.iloc[:5]), ["sex"])
    with pytest.raises(InputError, match="for the same population"):
        ReleaseCells.build([t1, t2], names=["all", "half"]).combine()
