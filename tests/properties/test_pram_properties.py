"""PRAM (seed 001 §6): invariance checked empirically, matrices from files checked when read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabsafe.errors import InputError
from tabsafe.model.microdata import Microdata
from tabsafe.protect.swapping import Pram
from tabsafe.protect.swapping.pram import invariant_matrix

CATS = ("a", "b", "c", "d")
COUNTS = (40, 80, 160, 320)
RUNS = 200


def units(counts=COUNTS, strata: int = 1) -> pd.DataFrame:
    """Records with category ``cat`` (counts per stratum as given) in ``strata`` strata."""
    rows = []
    for s in range(strata):
        for c, n in zip(CATS, counts):
            rows += [(f"S{s}", c)] * n
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rows, columns=["stratum", "cat"]).iloc[rng.permutation(len(rows))].reset_index(drop=True)
    df["household_id"] = np.arange(len(df))
    return df


def transitions(method: Pram, df: pd.DataFrame, runs: int = RUNS) -> np.ndarray:
    """Counts of (original, new) category pairs summed over ``runs`` seeded runs."""
    md = Microdata.from_frame(df)
    before = df["cat"].map({c: i for i, c in enumerate(CATS)}).to_numpy()
    total = np.zeros((len(CATS), len(CATS)))
    for seed in range(runs):
        after = method.perturb(md, seed=seed).microdata.read().column("cat").to_pylist()
        after = np.array([CATS.index(c) for c in after])
        np.add.at(total, (before, after), 1)
    return total


def assert_invariant(total: np.ndarray, t: np.ndarray, P: np.ndarray, runs: int) -> None:
    """Mean count per category after PRAM within 3 standard errors of the count before."""
    mean = total.sum(axis=0) / runs
    se = np.sqrt((t[:, None] * P * (1 - P)).sum(axis=0) / runs)
    assert (np.abs(mean - t) <= 3 * se).all(), f"counts after PRAM {mean} vs {t} (3 SE {3 * se})"


def assert_follows(total: np.ndarray, t: np.ndarray, P: np.ndarray, runs: int) -> None:
    """Each observed transition frequency within 3 standard errors of the matrix."""
    freq = total / (t[:, None] * runs)
    se = np.sqrt(P * (1 - P) / (t[:, None] * runs))
    assert (np.abs(freq - P) <= 3 * se + 1e-12).all(), f"transitions {freq.round(3)} vs {P.round(3)}"


def test_invariance_empirical_built_matrix() -> None:
    t = np.array(COUNTS, dtype=float)
    P = invariant_matrix(t, 0.4)
    total = transitions(Pram(variable="cat", retention=0.4), units())
    assert_follows(total, t, P, RUNS)
    assert_invariant(total, t, P, RUNS)
    assert (total.sum(axis=0) / RUNS != t).any()  # counts do move: invariance only in expectation


def test_strata_keep_units_and_invariance() -> None:
    df = units(counts=(10, 30, 60, 100), strata=3)
    # stratum S1 lacks category d: its matrix has three categories
    df = df[~((df["stratum"] == "S1") & (df["cat"] == "d"))].reset_index(drop=True)
    method = Pram(variable="cat", within=("stratum",), retention=0.3)
    md = Microdata.from_frame(df)
    sums = {s: np.zeros(len(CATS)) for s in ("S0", "S1", "S2")}
    for seed in range(100):
        after = method.perturb(md, seed=seed).microdata.read().to_pandas()
        assert (after["stratum"] == df["stratum"]).all()
        for s, part in after.groupby("stratum"):
            sums[s] += part["cat"].value_counts().reindex(list(CATS), fill_value=0).to_numpy()
    assert sums["S1"][3] == 0  # never moved into a category the stratum does not have
    for s, total in sums.items():
        t = df[df["stratum"] == s]["cat"].value_counts().reindex(list(CATS), fill_value=0).to_numpy().astype(float)
        present = t > 0
        P = invariant_matrix(t[present], 0.3)
        se = np.sqrt((t[present][:, None] * P * (1 - P)).sum(axis=0) / 100)
        assert (np.abs(total[present] / 100 - t[present]) <= 3 * se).all(), s


def test_households_change_together() -> None:
    rng = np.random.default_rng(2)
    size = rng.integers(1, 4, 300)
    hh = np.repeat(np.arange(300), size)
    cat = rng.choice(list(CATS), 300, p=[0.1, 0.2, 0.3, 0.4])[hh]
    df = pd.DataFrame({"household_id": hh, "cat": cat, "person": np.arange(hh.size)})
    out = Pram(variable="cat", retention=0.5, household="household_id").perturb(Microdata.from_frame(df), seed=3)
    after = out.microdata.read().to_pandas()
    assert (after.groupby("household_id")["cat"].nunique() == 1).all()
    changed = out.evaluation.column("changed").to_numpy(zero_copy_only=False)
    assert (changed == (after["cat"] != df["cat"]).to_numpy()).all() and changed.any()
    assert out.report.figures["units"] == 300


def write_wide(path: Path, P: np.ndarray, cats=CATS) -> Path:
    lines = ["from," + ",".join(cats)] + [f"{c}," + ",".join(f"{v:.12f}" for v in row) for c, row in zip(cats, P)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_matrix_from_file_wide_and_long(tmp_path: Path) -> None:
    t = np.array(COUNTS, dtype=float)
    P = invariant_matrix(t, 0.5)
    wide = write_wide(tmp_path / "wide.csv", P)
    long = tmp_path / "long.csv"
    long.write_text("from,to,p\n" + "".join(f"{a},{b},{P[i, j]:.12f}\n" for i, a in enumerate(CATS)
                                              for j, b in enumerate(CATS) if P[i, j] > 0))
    total = transitions(Pram(variable="cat", matrix=str(wide)), units())
    assert_follows(total, t, P, RUNS)
    assert_invariant(total, t, P, RUNS)
    md = Microdata.from_frame(units())
    a = Pram(variable="cat", matrix=str(wide)).perturb(md, seed=5).microdata.read()
    b = Pram(variable="cat", matrix=str(long)).perturb(md, seed=5).microdata.read()
    assert a.equals(b)


def test_non_invariant_matrix_names_the_row(tmp_path: Path) -> None:
    # the same retention for every category moves more units out of the large ones than in
    P = np.full((4, 4), 0.1)
    np.fill_diagonal(P, 0.7)
    method = Pram(variable="cat", matrix=str(write_wide(tmp_path / "m.csv", P)))
    with pytest.raises(InputError) as err:
        method.perturb(Microdata.from_frame(units()), seed=1)
    msg = err.value.render()
    # the largest change: d would expect 40·0.1 + 80·0.1 + 160·0.1 + 320·0.7 = 252, not 320
    assert "not invariant" in msg and "row 'd' (line 5)" in msg and "expect 252 units" in msg and "m.csv" in msg


def test_bad_rows_are_errors_when_read(tmp_path: Path) -> None:
    P = invariant_matrix(np.array(COUNTS, dtype=float), 0.5)
    P[2, 2] -= 0.05
    with pytest.raises(InputError, match=r"row 'c' \(line 4\) sums to 0\.95"):
        Pram(variable="cat", matrix=str(write_wide(tmp_path / "m.csv", P)))
    bad = tmp_path / "neg.csv"
    bad.write_text("from,to,p\na,a,1.2\n")
    with pytest.raises(InputError, match="line 2: probability 1.2 is outside"):
        Pram(variable="cat", matrix=str(bad))
    with pytest.raises(InputError, match="retention.*or.*matrix"):
        Pram(variable="cat")


def test_missing_row_and_foreign_category(tmp_path: Path) -> None:
    P = invariant_matrix(np.array(COUNTS[:3], dtype=float), 0.5)
    method = Pram(variable="cat", matrix=str(write_wide(tmp_path / "m.csv", P, CATS[:3])))
    with pytest.raises(InputError, match="category 'd' of 'variable' 'cat' has no row"):
        method.perturb(Microdata.from_frame(units()), seed=1)


def test_retention_one_is_identity() -> None:
    df = units()
    md = Microdata.from_frame(df)
    out = Pram(variable="cat", retention=1.0).perturb(md, seed=9)
    assert out.microdata.read().equals(md.read()) and out.report.figures["units_changed"] == 0


@settings(max_examples=100)
@given(counts=st.lists(st.integers(1, 10_000), min_size=1, max_size=12), q=st.floats(0, 1))
def test_invariant_matrix_properties(counts, q) -> None:
    t = np.array(counts, dtype=float)
    P = invariant_matrix(t, q)
    assert ((P >= -1e-15) & (P <= 1 + 1e-15)).all()
    assert np.allclose(P.sum(axis=1), 1)
    assert np.allclose(t @ P, t, rtol=1e-9, atol=1e-9)
    if len(counts) > 1:  # the smallest category keeps a unit with probability q, the others more
        assert np.isclose(P[np.argmin(t), np.argmin(t)], q)
        assert (np.diag(P) >= q - 1e-12).all()
