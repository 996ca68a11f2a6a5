"""The elimination's basis of a release: a basis of exactly the vectors that are additive in every
table of the release (shared cells one value), whatever order the shared cells are equated in
(issue #13: the order was changed to the narrowest cells first, 200 s → 2.4 s at 1.5M persons).

Checked against linear algebra written out here: every basis vector satisfies the release's
relations, the vectors are independent, and there are as many as the dimension of the space
(``n - rank(relations)``; with zeros published, ``n - rank([relations; zero cells])``).
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabsafe import Microdata, tabulate
from tabsafe.protect.suppression.elimination import joint_basis, table_basis
from tabsafe.release import ReleaseCells
from tests.properties.test_release_properties import _hierarchy, releases


def _dense(basis: list[dict[int, float]], n: int) -> np.ndarray:
    out = np.zeros((n, len(basis)))
    for j, col in enumerate(basis):
        for i, v in col.items():
            out[i, j] = v
    return out


@settings(max_examples=25, suppress_health_check=[HealthCheck.data_too_large])
@given(release=releases(), zeros_published=st.booleans())
def test_joint_basis_spans_the_release_additive_vectors(release, zeros_published: bool) -> None:
    data, tables = release
    md = Microdata.from_frame(data)
    built = [tabulate(md, list(by), hierarchies={v: _hierarchy(v, trees.get(v)) for v in by}) for by, trees in tables]
    cells = ReleaseCells.build(built, names=[f"t{i}" for i in range(len(built))])
    n = cells.n_cells
    B = _dense(joint_basis([table_basis(t, zeros_published) for t in cells.tables], cells.cells, n), n)
    A = cells.relations.toarray()
    assert np.abs(A @ B).max(initial=0.0) < 1e-9, "a basis vector is not additive in some table"
    constraints = A
    if zeros_published:
        zero = np.flatnonzero(cells.combine("count") == 0)
        assert np.abs(B[zero]).max(initial=0.0) < 1e-9, "a basis vector moves a zero cell"
        constraints = np.vstack([A, np.eye(n)[zero]])
    dimension = n - np.linalg.matrix_rank(constraints) if constraints.size else n
    assert B.shape[1] == dimension, "the basis misses part of the space (or has extra vectors)"
    assert np.linalg.matrix_rank(B) == B.shape[1], "the basis vectors are not independent"
