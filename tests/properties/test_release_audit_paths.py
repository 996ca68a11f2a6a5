"""The release audit of rounded and perturbed releases whose published values add up to no table
(issue #28): the fast path (additive moves from a central feasible table, then the programs for
what is left) finds exactly the cells the programs alone find, with the same intervals, and
every interval it reports lies inside the cell's feasibility interval.

Checked against an independent oracle: scipy's ``linprog`` minimum and maximum of every unknown
cell over the release's relations and the published bounds. The releases are the random releases
of the release property tests; their values are rounded to a base at random (each table on its
own, so shared cells and margins disagree, as random rounding publishes them) or perturbed by
bounded noise, here, without tabsafe's methods.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from tabsafe import Hierarchy, Microdata, tabulate
from tabsafe.model.release_cells import ReleaseCells
from tabsafe.release.audit import _System, audit_release, central_point, published_bounds
from tests.properties.test_release_properties import _hierarchy, releases

_TOL = 1e-6


def _published(cells: ReleaseCells, rng: np.random.Generator, kind: str, step: int) -> tuple[list, np.ndarray, np.ndarray]:
    """Each table's values rounded at random to an adjacent multiple of ``step`` (``kind`` "round")
    or moved by noise in ``[-step, step]`` (``kind`` "noise", not below 0), and what the intruder
    knows of each release cell from them."""
    published = []
    for table in cells.tables:
        z = np.asarray(table.counts, dtype=np.float64)
        if kind == "round":
            down = np.floor(z / step) * step
            up_p = (z - down) / step  # unbiased: up with probability (z - down) / step
            published.append(down + step * (rng.random(z.size) < up_p))
        else:
            published.append(np.maximum(z + rng.integers(-step, step + 1, z.size), 0.0))
    if kind == "round":
        lo, hi = published_bounds(cells, published, bases=[step] * len(published))
    else:
        lo = np.zeros(cells.n_cells)
        hi = np.full(cells.n_cells, np.inf)
        for v, rows in zip(published, cells.cells):
            np.maximum.at(lo, rows, np.maximum(v - step, 0.0))
            np.minimum.at(hi, rows, v + step)
    return published, lo, hi


def release_cells(release) -> ReleaseCells:
    """The cells of a release drawn by the release property tests' strategy."""
    data, tables = release
    md = Microdata.from_frame(data)
    built = [tabulate(md, list(by), hierarchies={v: _hierarchy(v, trees.get(v)) for v in by}) for by, trees in tables]
    return ReleaseCells.build(built, names=[f"t{i}" for i in range(len(built))])


def _oracle(cells: ReleaseCells, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The feasibility interval of every cell by linprog (dense, independent of tabsafe's solver)."""
    A = cells.relations.toarray()
    n = cells.n_cells
    o_lo, o_hi = lo.copy(), hi.copy()
    for c in np.flatnonzero(hi - lo > 1e-9).tolist():
        for sense, out in ((1.0, o_lo), (-1.0, o_hi)):
            cost = np.zeros(n)
            cost[c] = sense
            lp = linprog(cost, A_eq=A, b_eq=np.zeros(A.shape[0]), bounds=list(zip(lo, hi)), method="highs")
            assert lp.status == 0, lp.message
            out[c] = sense * lp.fun
    return o_lo, o_hi


@settings(max_examples=8, suppress_health_check=[HealthCheck.data_too_large])
@given(release=releases(), kind=st.sampled_from(["round", "noise"]), step=st.sampled_from([2, 3, 5]),
       seed=st.integers(0, 2**32 - 1), required=st.sampled_from([1.0, 2.0]))
def test_fast_release_audit_matches_the_programs_and_the_oracle(release, kind: str, step: int, seed: int,
                                                                 required: float) -> None:
    cells = release_cells(release)
    published, lo, hi = _published(cells, np.random.default_rng(seed), kind, step)
    o_lo, o_hi = _oracle(cells, lo, hi)

    fast = audit_release(cells, lo, hi, required=required, published=published)
    slow = audit_release(cells, lo, hi, required=required, published=published, shortcuts=False)
    narrow = np.flatnonzero((hi - lo > 1e-7) & (o_hi - o_lo < required - _TOL))
    for audit in (fast, slow):
        # the same exposed cells as the oracle, with its exact intervals
        assert [e.cell for e in audit.exposed] == narrow.tolist()
        for e in audit.exposed:
            assert abs(e.lower - o_lo[e.cell]) <= _TOL and abs(e.upper - o_hi[e.cell]) <= _TOL, \
                (cells.name(e.cell), e.lower, e.upper, o_lo[e.cell], o_hi[e.cell])
        # every reported interval is one the intruder can reach (inside the feasibility interval)
        # and every cell not exposed is shown wide enough
        got = np.flatnonzero(audit.audited)
        assert not np.isnan(audit.interval_lower[got]).any()
        assert (audit.interval_lower[got] >= o_lo[got] - _TOL).all()
        assert (audit.interval_upper[got] <= o_hi[got] + _TOL).all()
        wide = np.setdiff1d(got, narrow)
        assert (audit.interval_upper[wide] - audit.interval_lower[wide] >= required - _TOL).all()

    # the moves start from a table the intruder cannot rule out: every relation and bound holds
    unknown = hi - lo > 1e-7
    point = central_point(_System.of(cells.relations, lo, unknown), lo, hi)
    assert point is not None
    assert np.abs(cells.relations @ point).max() <= 1e-6
    assert (point >= lo - 1e-9).all() and (point <= hi + 1e-9).all()


def test_moves_settle_the_zeros_of_a_sparse_category() -> None:
    """A category almost no one has (the demo's 'not stated' citizenship): controlled rounding
    publishes its cells as 0, beside 0s in every direction, and every move between sibling
    leaves in all variables at once meets a 0 at its bound both ways (the chains of the margins'
    moves reach a few inner cells, not these). Moves between siblings in one variable, carried to
    the totals in the others, widen each such cell to a width of 1 — and no wider than linprog's
    interval. Without them, those cells are left to the programs."""
    from tabsafe.protect.controlled_rounding import ControlledRounding
    from tabsafe.release import protect_release
    from tabsafe.release.audit import _follow, feasible_point, move_intervals, moves_of

    rng = np.random.default_rng(7)
    areas = {f"R{r}": [f"R{r}A{i}" for i in range(9)] for r in range(2)}
    leaves = [a for kids in areas.values() for a in kids]
    n = 3000
    frame = pd.DataFrame({"area": rng.choice(leaves, n), "age": rng.choice([str(i) for i in range(9)], n),
                          "cit": rng.choice(["own", "other"], n)})
    frame.loc[rng.choice(n, 5, replace=False), "cit"] = "unstated"  # five persons in 162 inner cells
    table = tabulate(Microdata.from_frame(frame), ["area", "age", "cit"],
                     hierarchies={"area": Hierarchy.from_tree(areas)})
    result = protect_release([table], ControlledRounding(base=3), names=["t"])
    cells = result.cells
    published = [np.asarray(p.release.table.column("count"), dtype=float) for p in result.protections]
    lo, hi = published_bounds(cells, published, bases=[3])
    point = feasible_point(cells, published, lo, hi)
    assert point is not None
    unknown = hi - lo > 1e-7
    first_lo, first_hi = point.copy(), point.copy()
    for shift in range(1, 7):
        for backward in (False, True):
            _follow(cells, moves_of(cells, backward, shift), point, lo, hi, unknown, first_lo, first_hi)
    left = np.flatnonzero(unknown & (first_hi - first_lo < 1.0))
    assert left.size >= 20  # the first kind leaves the zeros
    reach_lo, reach_hi = move_intervals(cells, point, lo, hi, unknown)
    assert not (unknown & (reach_hi - reach_lo < 1.0)).any()
    A = cells.relations.toarray()
    for c in left.tolist():  # within the intruder's interval (linprog)
        for sense, reach in ((1.0, reach_lo[c]), (-1.0, reach_hi[c])):
            cost = np.zeros(cells.n_cells)
            cost[c] = sense
            lp = linprog(cost, A_eq=A, b_eq=np.zeros(A.shape[0]), bounds=list(zip(lo, hi)), method="highs")
            assert lp.status == 0 and sense * reach >= lp.fun - _TOL, (cells.name(c), reach, sense * lp.fun)


def test_a_cell_pinned_by_rounded_values_is_derived_from_them() -> None:
    """Two areas of 1 person each and their total of 2, rounded at random to base 3 as 3, 3 and
    0 (each with chance 1/3): each area is at least 1, the total at most 2, so all three are
    pinned. What gives an area away is the other area and the total as published (no cell is
    published exactly, so a derivation of exact cells alone would be empty)."""
    t = tabulate(Microdata.from_frame(pd.DataFrame({"area": ["a", "b"]})), ["area"])
    cells = ReleaseCells.build([t], names=["t"])
    published = np.array([3.0 if code != "Total" else 0.0 for code in t.dimensions[0].hierarchy.order])
    lo, hi = published_bounds(cells, [published], bases=[3])
    audit = audit_release(cells, lo, hi, required=1.0, published=[published])
    assert {(e.codes, e.lower, e.upper) for e in audit.exposed} == \
        {("(area=a)", 1.0, 1.0), ("(area=b)", 1.0, 1.0), ("(area=Total)", 2.0, 2.0)}
    a = next(e for e in audit.exposed if e.codes == "(area=a)")
    assert set(a.derivation) == {"t (area=b) published 3", "t (area=Total) published 0"}
