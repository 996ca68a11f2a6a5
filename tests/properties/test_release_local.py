"""The release audit's local programs (:mod:`tabsafe.release.local`, issue #28): a cell's programs
over a box of cells around it, every other cell at a feasible table's value, the box grown by
column generation until the bound is shown wide enough or exact.

Checked against an independent oracle (scipy's ``linprog`` over the release's relations and the
published bounds, as in ``test_release_audit_paths``): every value the local programs reach lies
inside the cell's feasibility interval, and on these small releases they decide every cell: the
cells they show narrow are exactly the oracle's narrow cells, with the oracle's intervals.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tabsafe import Hierarchy, Microdata, tabulate
from tabsafe.model.release_cells import ReleaseCells
from tabsafe.release.audit import _System, central_point
from tabsafe.release.local import release_box, settle_locally
from tests.properties.test_release_audit_paths import _oracle, _published, release_cells
from tests.properties.test_release_properties import releases

_TOL = 1e-6
#: the box the programs start from: one partner, no variable whole (smaller than these releases)
START = (1, 0)


def _settled(cells: ReleaseCells, lo: np.ndarray, hi: np.ndarray, required: float):
    """The local programs on every unknown cell, from the central point alone (no moves first),
    starting from boxes smaller than the release (:data:`START`)."""
    unknown = hi - lo > 1e-7
    system = _System.of(cells.relations, lo, unknown)
    req = np.full(cells.n_cells, required)
    point = central_point(system, lo, hi, reach=req)
    assert point is not None
    seen_lo, seen_hi = point.copy(), point.copy()
    # boxes smaller than these releases' tables (the default takes small variables whole)
    left, narrow = settle_locally(cells, system, point, lo, hi, unknown, req, seen_lo, seen_hi, start=START)
    return unknown, left, narrow, seen_lo, seen_hi


@settings(max_examples=10, suppress_health_check=[HealthCheck.data_too_large])
@given(release=releases(), kind=st.sampled_from(["round", "noise"]), step=st.sampled_from([2, 3]),
       seed=st.integers(0, 2**32 - 1), required=st.sampled_from([1.0, 2.0]))
def test_local_programs_stay_inside_the_intruders_intervals(release, kind: str, step: int, seed: int,
                                                           required: float) -> None:
    cells = release_cells(release)
    _, lo, hi = _published(cells, np.random.default_rng(seed), kind, step)
    o_lo, o_hi = _oracle(cells, lo, hi)
    unknown, left, narrow, seen_lo, seen_hi = _settled(cells, lo, hi, required)
    # every value reached is one a table satisfying every relation gives the cell
    assert (seen_lo >= o_lo - _TOL).all() and (seen_hi <= o_hi + _TOL).all()
    # every cell decided (the work budget is far above these releases)
    assert not left.any()
    shown = {n.cell for n in narrow}
    for n in narrow:  # shown narrow: its interval the oracle's
        assert abs(n.low.value - o_lo[n.cell]) <= _TOL and abs(n.high.value - o_hi[n.cell]) <= _TOL
    # the narrow cells are the oracle's narrow cells; every other one was shown wide enough
    assert shown == set(np.flatnonzero(unknown & (o_hi - o_lo < required - _TOL)).tolist())
    wide = [c for c in np.flatnonzero(unknown).tolist() if c not in shown]
    assert (seen_hi[wide] - seen_lo[wide] >= required - _TOL).all()
    event(f"shown narrow: {'some' if shown else 'none'}")


def _two_tables() -> ReleaseCells:
    """area × age and area × sex (areas in two regions), 300 persons."""
    rng = np.random.default_rng(3)
    tree = {"R1": ["a1", "a2", "a3"], "R2": ["a4", "a5"]}
    frame = pd.DataFrame({"area": rng.choice([a for k in tree.values() for a in k], 300),
                          "age": rng.choice(["0", "1", "2", "3"], 300), "sex": rng.choice(["m", "f"], 300)})
    md = Microdata.from_frame(frame)
    area = Hierarchy.from_tree(tree)
    return ReleaseCells.build([tabulate(md, ["area", "age"], hierarchies={"area": area}),
                               tabulate(md, ["area", "sex"], hierarchies={"area": area})], names=["aa", "as"])


def test_the_box_around_a_release_cell() -> None:
    cells = _two_tables()
    values = cells.combine()
    aa = cells.tables[0]
    cell = int(cells.cells[0][aa.cell_id({"area": "a2", "age": "1"})])
    # no partners, no variable whole: the cell's codes and those above them, in every table (the
    # total of a variable the cell's table lacks)
    got = set(release_box(cells, cell, values, partners=0, small=0).tolist())
    want = {int(cells.cells[0][aa.cell_id({"area": a, "age": g})]) for a in ("a2", "R1", "Total") for g in ("1", "Total")}
    ast = cells.tables[1]
    want |= {int(cells.cells[1][ast.cell_id({"area": a, "sex": "Total"})]) for a in ("a2", "R1", "Total")}
    assert got == want
    # one partner: the largest sibling of the cell's code (a2's in R1; not R2 nor its areas), and
    # below a code its largest child; of ages, the cell's own and the largest other
    def value(area: str, age: str) -> float:
        return float(values[cells.cells[0][aa.cell_id({"area": area, "age": age})]])

    sib = max(("a1", "a3"), key=lambda a: value(a, "1"))
    age = max(("0", "2", "3"), key=lambda g: value("a2", g))
    areas = {"a2", sib, "R1", "Total"}
    got = set(release_box(cells, cell, values, partners=1, small=0).tolist())
    want = {int(cells.cells[0][aa.cell_id({"area": a, "age": g})]) for a in areas for g in ("1", age, "Total")}
    want |= {int(cells.cells[1][ast.cell_id({"area": a, "sex": x})]) for a in areas
             for x in ("Total", max(("m", "f"), key=lambda x: values[cells.cells[1][ast.cell_id({"area": "a2", "sex": x})]]))}
    assert got == want
    # every variable whole: every cell of every table
    assert release_box(cells, cell, values, partners=0, small=99).tolist() == list(range(cells.n_cells))


def test_local_programs_settle_cells_the_moves_leave() -> None:
    """Not vacuous: on a rounded release of the two tables the local programs alone decide every
    unknown cell, some shown narrow and most wide, inside linprog's intervals (the property test
    above checks the same on random releases)."""
    cells = _two_tables()
    _, lo, hi = _published(cells, np.random.default_rng(11), "round", 3)
    o_lo, o_hi = _oracle(cells, lo, hi)
    unknown, left, narrow, seen_lo, seen_hi = _settled(cells, lo, hi, 3.0)
    assert not left.any()
    # 10 of the 56 unknown cells are narrower than 3 (linprog): those, and only those
    shown = {n.cell for n in narrow}
    assert len(shown) == 10 and shown == set(np.flatnonzero(unknown & (o_hi - o_lo < 3.0 - _TOL)).tolist())
    assert (seen_lo >= o_lo - _TOL).all() and (seen_hi <= o_hi + _TOL).all()
