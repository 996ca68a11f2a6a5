"""PRAM's published transition matrix (seed 001 §6): an analyst who has only the release and the
matrix file corrects a table with the moment estimator ``T̂ = T* R⁻¹`` and gets the original table
back within sampling error. Everything on the analyst's side is computed here with numpy from
the two published CSV files; the original table from the records with pandas.

``E T* = T R`` holds for the matrix *applied*: the test fails when the file holds another matrix
(e.g. the non-invariant ``P`` given instead of its invariant form ``R``, or a matrix built by a
formula other than the one drawn from)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tabsafe.cli import main

CATS = ("a", "b", "c")
#: a matrix that is not invariant for the data below (its invariant form is applied)
P_FILE = "from,to,p\na,a,0.7\na,b,0.3\nb,b,0.9\nb,c,0.1\nc,c,0.8\nc,a,0.2\n"


def _records(n: int = 40_000, seed: int = 1) -> pd.DataFrame:
    """Units in two strata; the category depends on sex, so a table by sex is not the margin."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(["1", "2"], n)
    cat = np.where(sex == "1", rng.choice(list(CATS), n, p=[0.1, 0.3, 0.6]),
                   rng.choice(list(CATS), n, p=[0.5, 0.3, 0.2]))
    return pd.DataFrame({"st": rng.choice(["X", "Y"], n), "sex": sex, "cat": cat})


def _published(tmp_path: Path, args: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    data = tmp_path / "d.csv"
    _records().to_csv(data, index=False)
    (tmp_path / "P.csv").write_text(P_FILE)
    out = tmp_path / "rel.csv"
    args = [str(tmp_path / a) if a == "P.csv" else a for a in args]
    code = main(["protect", str(data), "--by", "st,sex,cat", "--method", "pram", "--variable", "cat",
                 "--within", "st", *args, "--seed", "20250101", "--out", str(out), "--quiet"])
    assert code == 0
    release = pd.read_csv(out, dtype={"st": str, "sex": str, "cat": str})
    matrix = pd.read_csv(tmp_path / "rel-transitions.csv", dtype={"st": str, "from": str, "to": str})
    return release, matrix


def _analyst(release: pd.DataFrame, matrix: pd.DataFrame, stratum: str, sex: str) -> tuple[np.ndarray, np.ndarray]:
    """The published counts of one stratum and sex by category, and the stratum's matrix."""
    cells = release[(release["st"] == stratum) & (release["sex"] == sex) & release["cat"].isin(CATS)]
    t_star = cells.set_index("cat")["count"].reindex(CATS, fill_value=0).to_numpy(dtype=float)
    m = matrix[matrix["st"] == stratum]
    R = np.zeros((3, 3))
    for row in m.itertuples():
        R[CATS.index(row[2]), CATS.index(row[3])] = row.p
    return t_star, R


@pytest.mark.parametrize("args", [["--matrix", "P.csv", "--invariant"], ["--retention", "0.6"]],
                         ids=["invariant-form", "retention"])
def test_moment_estimator_recovers_the_original_table(tmp_path: Path, args: list[str]) -> None:
    release, matrix = _published(tmp_path, args)
    original = _records().groupby(["st", "sex", "cat"]).size()
    assert set(matrix["st"]) == {"X", "Y"}
    z_all = []
    for stratum in ("X", "Y"):
        for sex in ("1", "2"):
            t_star, R = _analyst(release, matrix, stratum, sex)
            assert np.allclose(R.sum(axis=1), 1.0)
            t = original.loc[(stratum, sex)].reindex(CATS, fill_value=0).to_numpy(dtype=float)
            # the analyst's estimate and its covariance under multinomial PRAM of independent units
            inv = np.linalg.inv(R)
            estimate = t_star @ inv
            cov_star = sum(ti * (np.diag(R[i]) - np.outer(R[i], R[i])) for i, ti in enumerate(t))
            se = np.sqrt(np.diag(inv.T @ cov_star @ inv))
            z_all += list((estimate - t) / se)
    z = np.array(z_all)
    assert np.abs(z).max() < 4.5, f"the moment estimator misses the original table: z = {z.round(1)}"
    for stratum in ("X", "Y"):
        # the matrix is invariant for the stratum: its published margin is the original in expectation
        margin = original.loc[stratum].groupby(level="cat").sum().reindex(CATS).to_numpy(dtype=float)
        stratum_star = sum(_analyst(release, matrix, stratum, s)[0] for s in ("1", "2"))
        R = _analyst(release, matrix, stratum, "1")[1]
        assert np.allclose(margin @ R, margin, rtol=1e-9), "the published matrix is not invariant for the stratum"
        se_margin = np.sqrt((margin[:, None] * R * (1 - R)).sum(axis=0))
        assert (np.abs(stratum_star - margin) <= 4.5 * se_margin).all()
    # and the correction matters: the uncorrected cells by sex are far from the originals
    raw = []
    for stratum in ("X", "Y"):
        for sex in ("1", "2"):
            t_star, _ = _analyst(release, matrix, stratum, sex)
            raw.append(np.abs(t_star - original.loc[(stratum, sex)].reindex(CATS).to_numpy()).max())
    assert max(raw) > 200


def test_published_matrix_is_what_the_seed_formula_gives(tmp_path: Path) -> None:
    """The retention matrix in the file is seed 001 §6's, computed here from the units per
    category: ``P_ii = 1 − p·x_min/x_i``, ``P_ij = p·x_min/((m−1)·x_i)``."""
    _, matrix = _published(tmp_path, ["--retention", "0.6"])
    counts = _records().groupby(["st", "cat"]).size()
    for stratum in ("X", "Y"):
        x = counts.loc[stratum].reindex(CATS).to_numpy(dtype=float)
        move = 0.4 * x.min() / x
        expected = np.repeat((move / 2)[:, None], 3, axis=1)
        np.fill_diagonal(expected, 1 - move)
        got = np.zeros((3, 3))
        for row in matrix[matrix["st"] == stratum].itertuples():
            got[CATS.index(row[2]), CATS.index(row[3])] = row.p
        assert np.allclose(got, expected, atol=1e-12)
        # what the matrix reveals (module docstring): with the stratum's total, the original counts
        ratio = 1 / (1 - np.diag(got))  # ∝ x_i
        assert np.allclose(ratio / ratio.sum() * x.sum(), x)
