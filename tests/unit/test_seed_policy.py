"""Issue #25 and #24: a seed is a secret, and one seed policy (tabsafe.seeds) everywhere.

* an intruder who replays barnardisation from every public output (release, report, stdout)
  recovers no original cell, while the private record's seed recovers them all and reruns the
  release byte for byte;
* no public output of any random table method holds its seed or the stream seed derived from it;
* a method alone with ``--seed S`` adds the same noise as the same method first in a chain;
* drawn seeds are 63 bits; small given seeds are warned about; fingerprints are keyed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tabsafe.cli import main
from tabsafe.seeds import draw_seed, fingerprint, stream_seed

SEED = 4_611_686_018_427_387_931  # a large seed, as a user who follows the warning gives


@pytest.fixture(scope="module")
def census(small_census) -> Path:
    """20,000 persons in 200 areas: area × sex has no small inner cell, so barnardisation's draws
    fall on the cells the release shows as non-zero (an intruder knows them)."""
    return small_census.persons


def run(args: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _inner(release: pd.DataFrame) -> pd.DataFrame:
    """The inner cells, in the release's (grid) order."""
    return release[(release["area"] != "Total") & (release["sex"] != "Total")].reset_index(drop=True)


def _replay(seed: int, n: int, p: float) -> np.ndarray:
    """Barnardisation's steps for the first ``n`` drawn cells of a run with stream seed ``seed``
    (what :func:`tabsafe.protect.barnardisation.barnardise` draws)."""
    u = np.random.default_rng(seed).random(n)
    return np.where(u < p / 2, -1, np.where(u < p, 1, 0))


def _candidates(*texts: str) -> set[int]:
    """Every number an intruder can read in the public outputs, and the fingerprints as numbers."""
    found = {int(m) for t in texts for m in re.findall(r"\d+", t)}
    found |= {int(h, 16) for t in texts for h in re.findall(r"[0-9a-f]{16,}", t)}
    return {c for c in found if c < 2**64}


def _recovered(release: pd.DataFrame, truth: pd.DataFrame, seed: int, p: float) -> int:
    """Inner cells an intruder gets right by taking a candidate's replayed steps off the release."""
    published = release["count"].to_numpy()
    steps = _replay(seed, published.size, p)
    guess = np.where(published != 0, published - steps, 0)
    return int((guess == truth["original"].to_numpy()).sum())


@pytest.mark.parametrize("given", [True, False], ids=["seed given", "seed drawn"])
def test_no_public_output_gives_the_intruder_an_original_cell(census: Path, tmp_path: Path, capsys, given) -> None:
    p = 0.4
    base = ["protect", census, "--by", "area,sex", "--method", "barnardisation", "--p", p]
    seed = ["--seed", SEED] if given else []
    out, report = tmp_path / "b.csv", tmp_path / "b.json"
    code, stdout, err = run([*base, *seed, "--out", out, "--report", report], capsys)
    assert code == 0, err
    public_report = report.read_text()
    assert "seed_fingerprint" in public_report and '"seed"' not in public_report and "private" not in public_report
    release = _inner(pd.read_csv(out, dtype={"area": str, "sex": str}))
    # the private record: the same run with an evaluation file beside a private report
    private_out, ev, private_report = tmp_path / "p.csv", tmp_path / "ev.csv", tmp_path / "p.json"
    if given:
        code, _, err = run([*base, *seed, "--out", private_out, "--evaluation", ev, "--report", private_report], capsys)
        assert code == 0, err
        assert private_out.read_bytes() == out.read_bytes()
    else:  # a drawn seed: kept in the private report, from which the rerun is byte-identical
        code, _, err = run([*base, "--out", private_out, "--evaluation", ev, "--report", private_report], capsys)
        assert code == 0, err
    assert private_report.stat().st_mode & 0o077 == 0 and ev.stat().st_mode & 0o077 == 0
    record = json.loads(private_report.read_text())
    rerun = tmp_path / "rerun.csv"
    assert run([*base, "--seed", record["seed"], "--out", rerun], capsys)[0] == 0
    assert rerun.read_bytes() == private_out.read_bytes()
    truth = _inner(pd.read_csv(ev, dtype={"area": str, "sex": str}))
    truth = truth.set_index(["area", "sex"]).loc[list(zip(release["area"], release["sex"]))].reset_index()
    assert (truth["original"] > 5).all()  # no small cell: the draws fall where the release says
    n = len(release)
    # with the private seed the intruder's replay gives back every original inner cell ...
    assert _recovered(pd.read_csv(private_out, dtype={"area": str, "sex": str}).pipe(_inner), truth,
                      stream_seed(record["seed"], 0), p) == n
    # ... with anything public, no more than the release itself tells (the cells left unchanged)
    baseline = int((release["count"].to_numpy() == truth["original"].to_numpy()).sum())
    assert baseline < n
    for c in _candidates(out.read_text(), public_report, stdout, err):
        for candidate in (c, stream_seed(c, 0) if c <= 2**63 - 1 else c):
            assert _recovered(release, truth, candidate, p) <= baseline, candidate


RANDOM_METHODS = [
    ["--method", "barnardisation", "--p", "0.3"],
    ["--method", "round", "--mode", "random", "--base", "3"],
    ["--method", "round", "--mode", "semi-controlled", "--base", "3"],
    ["--method", "round", "--mode", "small-cell", "--base", "3"],
    ["--method", "stochastic"],
    ["--method", "abs-perturbation"],
    ["--method", "targeted-swap,ckm", "--geography", "region,area", "--risk-vars", "sex", "--k", "3",
     "--swaprate", "0.05", "--max-noise", "2", "--variance", "1"],
]


@pytest.mark.parametrize("method", RANDOM_METHODS, ids=[" ".join(m[1:3]) for m in RANDOM_METHODS])
def test_public_outputs_hold_no_seed(census: Path, tmp_path: Path, capsys, method) -> None:
    args = ["protect", census, "--by", "area,sex", *method, "--seed", SEED]
    code, stdout, err = run([*args, "--out", tmp_path / "r.csv", "--report", tmp_path / "r.json"], capsys)
    assert code == 0, err
    public = (tmp_path / "r.csv").read_text() + (tmp_path / "r.json").read_text() + stdout + err
    secrets = {SEED, *(stream_seed(SEED, k) for k in range(3))}
    assert not any(str(s) in public for s in secrets)
    assert fingerprint(SEED) in (tmp_path / "r.json").read_text()
    private = json.loads(_private_report(args, tmp_path, capsys).read_text())
    assert private["seed"] == SEED and private["seed_fingerprint"] == fingerprint(SEED)


def _private_report(args: list[object], tmp_path: Path, capsys) -> Path:
    report = tmp_path / "private.json"
    code, _, err = run([*args, "--out", tmp_path / "p.csv", "--evaluation", tmp_path / "e.csv", "--report", report],
                       capsys)
    assert code == 0, err
    assert report.stat().st_mode & 0o077 == 0
    return report


def test_a_method_alone_adds_the_noise_it_adds_first_in_a_chain(census: Path, tmp_path: Path, capsys) -> None:
    """One seed policy: ``--method barnardisation --seed 5`` and ``--method
    barnardisation,additivity --seed 5`` (barnardised tables are additive already: the second
    step keeps them) publish the same table; so do the Python call and the release path."""
    import tabsafe as ts
    from tabsafe.pipeline import Chain

    base = ["protect", census, "--by", "area,sex", "--p", "0.3", "--seed", 5]
    alone, chained = tmp_path / "alone.csv", tmp_path / "chain.csv"
    assert run([*base, "--method", "barnardisation", "--out", alone], capsys)[0] == 0
    assert run([*base, "--method", "barnardisation,additivity", "--out", chained], capsys)[0] == 0
    assert alone.read_bytes() == chained.read_bytes()
    md = ts.Microdata.from_file(census)
    table = ts.tabulate(md, ["area", "sex"])
    method = ts.build_method("barnardisation", {"p": 0.3})
    direct = method.protect(table, seed=5).release.table.counts
    first = Chain((method, ts.build_method("additivity", {}))).protect(table, seeds=[5, 5]).release.table.counts
    published = pd.read_csv(alone, dtype={"area": str, "sex": str})
    assert np.array_equal(direct, first)
    assert int(published["count"].sum()) == int(table.densify().with_values(count=direct).counts.sum())
    # the seed itself is never the stream: step k of a run with seed S draws from stream_seed(S, k)
    assert not np.array_equal(direct, method.apply(table, 5).release["count"])
    assert np.array_equal(direct, method.apply(table, stream_seed(5, 0)).release["count"])


def test_drawn_seeds_are_wide_and_small_seeds_are_warned_about(census: Path, tmp_path: Path, capsys) -> None:
    drawn = [draw_seed() for _ in range(64)]
    assert max(drawn) >= 2**60 and len(set(drawn)) == 64  # 63 bits, not randbelow(10**9)
    code, stdout, err = run(["protect", census, "--by", "sex", "--method", "barnardisation", "--p", "0.2", "--seed", 5,
                             "--out", tmp_path / "s.csv"], capsys)
    assert code == 0 and err.startswith("tabsafe: warning: seed 5 is small") and err.count("\n") == 1
    # nor the seed on stdout (the output's path is the test's own and may hold any digit)
    assert "5" not in stdout.replace("barnardisation", "").replace(str(tmp_path / "s.csv"), "")
    # a deterministic method with a small seed: nothing to warn about
    code, _, err = run(["protect", census, "--by", "sex", "--method", "round", "--mode", "conventional", "--seed", 5,
                        "--out", tmp_path / "c.csv"], capsys)
    assert code == 0 and err == ""
    code, stdout, err = run(["protect", census, "--by", "sex", "--method", "barnardisation", "--p", "0.2",
                             "--out", tmp_path / "d.csv"], capsys)
    assert code == 0 and err == "" and "seed drawn (63 bits; fingerprint hmac-sha256:" in stdout


def test_fingerprints_are_keyed(monkeypatch) -> None:
    monkeypatch.setenv("TABSAFE_SEED_KEY", "one key")
    a = fingerprint(5)
    monkeypatch.setenv("TABSAFE_SEED_KEY", "another key")
    b = fingerprint(5)
    # without the key a fingerprint says nothing: the same small seed under another key differs,
    # and the plain hash of the seed is not it
    import hashlib

    assert a != b and a == fingerprint(5, key=b"one key") and a.startswith("hmac-sha256:")
    assert hashlib.sha256(b"5").hexdigest()[:32] not in a


def test_the_key_file_is_private(tmp_path: Path, monkeypatch) -> None:
    from tabsafe.seeds import fingerprint_key

    monkeypatch.delenv("TABSAFE_SEED_KEY")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    key = fingerprint_key()
    path = tmp_path / "tabsafe" / "seed-fingerprint.key"
    assert key is not None and len(key) == 32 and path.read_bytes() == key
    assert path.stat().st_mode & 0o077 == 0 and path.parent.stat().st_mode & 0o077 == 0
    assert fingerprint_key() == key  # made once, read after


@pytest.mark.parametrize("fmt", ["csvw", "sdmx-csv"])
def test_published_formats_hold_no_seed(census: Path, tmp_path: Path, capsys, fmt) -> None:
    """The CSV-W metadata records the method and parameters: the seed's fingerprint, not the seed."""
    out = tmp_path / "r.csv"
    code, stdout, err = run(["protect", census, "--by", "area,sex", "--method", "barnardisation", "--p", "0.3",
                             "--seed", SEED, "--format", fmt, "--out", out], capsys)
    assert code == 0, err
    public = "".join(p.read_text() for p in tmp_path.iterdir()) + stdout
    assert not any(str(s) in public for s in (SEED, stream_seed(SEED, 0)))
    if fmt == "csvw":
        assert fingerprint(SEED) in (tmp_path / "r.csv-metadata.json").read_text()
