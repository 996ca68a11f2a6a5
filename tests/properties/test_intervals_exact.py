"""Feasibility intervals (seed 000 §5.3, METHODS.md §10) against ``scipy.optimize.linprog``: on
random hierarchical tables with random suppression patterns, every suppressed cell's minimum
and maximum are those of the intruder's program written out here, for counts ≥ 0 and for counts
≥ 1 (zeros never suppressed). The audit skips the minimum program of a cell at its least value
(its minimum is that value); a cell above it must still get its own, exact minimum."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from tabsafe.model.table import Table
from tabsafe.risk.intervals import feasibility_intervals
from tests.properties.test_suppression_properties import tables


@settings(max_examples=40)
@given(table=tables(), lower=st.sampled_from([0.0, 1.0]), seed=st.integers(0, 2**31 - 1), share=st.sampled_from([0.2, 0.4]))
def test_intervals_are_the_linear_programs_extremes(table: Table, lower: float, seed: int, share: float) -> None:
    counts = np.asarray(table.counts, dtype=np.float64)
    rng = np.random.default_rng(seed)
    suppressed = rng.random(counts.size) < share
    if lower == 1.0:
        suppressed &= counts >= 1  # a publisher who never suppresses zeros
    if not suppressed.any():
        return
    A = np.asarray(table.additivity().todense(), dtype=np.float64)
    res = feasibility_intervals(A, counts, suppressed, lower=lower)
    S = np.flatnonzero(suppressed)
    P = np.flatnonzero(~suppressed)
    A_S, b = A[:, S], -A[:, P] @ counts[P]
    keep = np.abs(A_S).sum(axis=1) > 0
    for j, cell in enumerate(S.tolist()):
        c = np.zeros(S.size)
        c[j] = 1.0
        lo = linprog(c, A_eq=A_S[keep], b_eq=b[keep], bounds=[(lower, None)] * S.size)
        hi = linprog(-c, A_eq=A_S[keep], b_eq=b[keep], bounds=[(lower, None)] * S.size)
        assert lo.status == 0 and hi.status in (0, 3)
        top = np.inf if hi.status == 3 else -hi.fun
        assert abs(res.lower[cell] - lo.fun) < 1e-6, f"cell {cell} ({counts[cell]:g}): minimum {res.lower[cell]} vs {lo.fun}"
        if np.isinf(top):
            assert np.isinf(res.upper[cell])
        else:
            assert abs(res.upper[cell] - top) < 1e-6, f"cell {cell} ({counts[cell]:g}): maximum {res.upper[cell]} vs {top}"
