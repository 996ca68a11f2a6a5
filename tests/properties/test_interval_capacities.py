"""The capacities of a narrow cell (:func:`tabsafe.risk.intervals.capacity`: Fischetti and
Salazar-González's capacity constraints, read off the duals of the audit's programs), checked against the intruder's programs
written out with ``scipy.optimize.linprog``: on random hierarchical tables and patterns, the
width of a cell's feasibility interval equals ``sum(c * x)`` under the audited pattern ``x``, and
is at most ``sum(c * x')`` under any other pattern ``x'`` (the optimal mode's cuts rest on this:
a cut that removed a protected pattern would make its bound a lie)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from tabsafe.model.table import Table
from tabsafe.risk.intervals import feasibility_intervals
from tests.properties.test_suppression_properties import tables


def _width(A: np.ndarray, counts: np.ndarray, suppressed: np.ndarray, lower: float, cell: int) -> float:
    """max - min of ``cell`` over the tables an intruder cannot rule out (its own programs)."""
    S = np.flatnonzero(suppressed)
    P = np.flatnonzero(~suppressed)
    A_S, b = A[:, S], -A[:, P] @ counts[P]
    keep = np.abs(A_S).sum(axis=1) > 0
    c = np.zeros(S.size)
    c[int(np.flatnonzero(S == cell)[0])] = 1.0
    lo = linprog(c, A_eq=A_S[keep], b_eq=b[keep], bounds=[(lower, None)] * S.size)
    hi = linprog(-c, A_eq=A_S[keep], b_eq=b[keep], bounds=[(lower, None)] * S.size)
    assert lo.status == 0 and hi.status in (0, 3)
    return np.inf if hi.status == 3 else -hi.fun - lo.fun


@settings(max_examples=40)
@given(table=tables(), lower=st.sampled_from([0.0, 1.0]), seed=st.integers(0, 2**31 - 1),
       share=st.sampled_from([0.2, 0.4]))
def test_capacities_bound_the_width_under_every_pattern(table: Table, lower: float, seed: int, share: float) -> None:
    counts = np.asarray(table.counts, dtype=np.float64)
    rng = np.random.default_rng(seed)
    allowed = counts >= 1 if lower == 1.0 else np.ones(counts.size, dtype=bool)  # zeros never suppressed
    suppressed = (rng.random(counts.size) < share) & allowed
    if not suppressed.any():
        return
    A = np.asarray(table.additivity().todense(), dtype=np.float64)
    # a width no cell reaches: every cell of finite width is narrow and gets its capacities
    res = feasibility_intervals(A, counts, suppressed, lower=lower, required=np.full(counts.size, 1e9))
    # (none when every suppressed cell is unbounded or alone in its relations: determined)
    for cell, (cells, c) in list(res.capacities.items())[:6]:
        assert (c > 0).all()
        width = res.upper[cell] - res.lower[cell]
        at = float(c[suppressed[cells]].sum())
        assert abs(at - width) < 1e-6, f"cell {cell}: width {width} but capacities give {at} under its pattern"
        assert set(res.holders[cell].tolist()) == set(cells[~suppressed[cells]].tolist())
        for _ in range(3):
            other = ((rng.random(counts.size) < 0.5) | suppressed) & allowed if rng.random() < 0.5 else \
                (rng.random(counts.size) < share) & allowed
            other[cell] = True
            bound = float(c[other[cells]].sum())
            true = _width(A, counts, other, lower, cell)
            assert true <= bound + 1e-6, f"cell {cell}: width {true} under another pattern, capacities say ≤ {bound}"
