"""``tabsafe measure info-gain|differencing-risk`` through the real CLI: JSON on stdout, options
generated from the method's parameters, one-line errors."""

from __future__ import annotations

import json

import pytest

from tabsafe.cli import main


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_info_gain_of_the_cell_key_method(capsys) -> None:
    from tabsafe.evaluate.distribution import information_gain
    from tabsafe.protect.cell_key_method import CellKeyMethod

    assert main(["measure", "info-gain", "--method", "ckm", "--max-noise", "3", "--variance", "2", "--js", "1"]) == 0
    out = _json(capsys)
    assert out["method"] == "ckm" and out["params"]["max_noise"] == 3 and out["params"]["js"] == 1
    want = information_gain(CellKeyMethod(max_noise=3, variance=2, js=1))["information_gain"]
    assert out["information_gain"] == pytest.approx(want, abs=1e-12)
    assert out["base"] == 6 and out["entropy_x"] == pytest.approx(1.0)
    # a prior given as probabilities (001 §5's skewed one): another figure, base still 6
    assert main(["measure", "info-gain", "--method", "ckm", "--max-noise", "3", "--variance", "2", "--js", "1",
                 "--prior", "0.35,0.25,0.15,0.10,0.10,0.05"]) == 0
    skewed = _json(capsys)
    assert skewed["prior"][0] == pytest.approx(0.35)
    assert skewed["information_gain"] != pytest.approx(out["information_gain"])


def test_info_gain_of_random_rounding_base_5_is_17_percent(capsys) -> None:
    """Seed 001 §5 from the command line: random rounding to base 5, uniform and skewed priors."""
    assert main(["measure", "info-gain", "--method", "round", "--mode", "random", "--base", "5"]) == 0
    uniform = _json(capsys)
    assert uniform["information_gain"] == pytest.approx(0.168554516, abs=1e-9)
    assert main(["measure", "info-gain", "--method", "round", "--mode", "random", "--base", "5",
                 "--prior", "0.35,0.25,0.15,0.10,0.10,0.05"]) == 0
    assert _json(capsys)["information_gain"] == pytest.approx(0.166246112, abs=1e-9)
    # rounding to base 5 never shows a difference of 1: differencing cannot reveal a single person
    assert main(["measure", "differencing-risk", "--method", "round", "--mode", "random", "--base", "5",
                 "--n", "1"]) == 0
    out = _json(capsys)
    assert out["p_exact"] == 0.0 and set(out["distribution"]) <= {"-5", "0", "5", "10"}
    # semi-controlled rounding selects cells jointly: no cell distribution to compute from
    assert main(["measure", "info-gain", "--method", "round", "--mode", "semi-controlled", "--base", "5"]) == 3
    assert "does not state" in capsys.readouterr().err


def test_info_gain_of_an_identity_p_table_is_everything(tmp_path, capsys) -> None:
    ptable = tmp_path / "identity.csv"
    rows = ["i,j,p,v,p_int_lb,p_int_ub"] + [f"{i},{i},1,0,0,1" for i in range(4)]
    ptable.write_text("\n".join(rows) + "\n")
    assert main(["measure", "info-gain", "--method", "ckm", "--ptable", str(ptable)]) == 0
    assert _json(capsys)["information_gain"] == pytest.approx(1.0)


def test_differencing_risk_matches_the_p_table_computation(capsys) -> None:
    from tabsafe.evaluate.differencing import difference_distribution
    from tabsafe.protect.cell_key_method import CellKeyMethod

    assert main(["measure", "differencing-risk", "--method", "ckm", "--max-noise", "3", "--variance", "2",
                 "--js", "1", "--n", "1", "--total", "5"]) == 0
    out = _json(capsys)
    ptable = CellKeyMethod(max_noise=3, variance=2, js=1).ptable_table
    want = difference_distribution(ptable, 1, total=5)
    assert out["n"] == 1 and out["total"] == 5
    assert out["p_exact"] == pytest.approx(want[1], abs=1e-12)
    assert {int(k): v for k, v in out["distribution"].items()} == pytest.approx(want, abs=1e-12)
    # without --total: a large area (both cells in the p-table's last row)
    assert main(["measure", "differencing-risk", "--method", "ckm", "--max-noise", "3", "--variance", "2",
                 "--js", "1", "--n", "2"]) == 0
    large = _json(capsys)
    assert large["total"] == 1002
    assert large["p_exact"] == pytest.approx(difference_distribution(ptable, 2)[2], abs=1e-12)


@pytest.mark.parametrize("argv, code, message", [
    (["info-gain", "--method", "suppress", "--min-freq", "3"], 3, "does not state P(published | true count)"),
    (["info-gain", "--method", "ckm", "--max-noise", "3", "--variance", "2", "--prior", "0.5,0.2"], 2,
     "sum to 1"),
    (["differencing-risk", "--method", "ckm", "--max-noise", "3", "--variance", "2"], 2, "needs --n"),
    (["differencing-risk", "--method", "ckm", "--max-noise", "3", "--variance", "2", "--n", "3", "--total", "2"],
     2, "--total"),
    (["info-gain", "--method", "ckm", "--max-noise", "3", "--variance", "2", "--n", "1"], 2, "differencing-risk"),
    (["info-gain", "--method", "nope"], 2, "unknown method"),
    (["info-gain", "--method", "ckm", "--max-noise", "0", "--variance", "2"], 2, "--max-noise"),
    (["info-gain", "--method", "ckm,suppress"], 2, "one method"),
    (["what", "--method", "ckm"], 2, "invalid choice"),
])
def test_measure_errors_are_one_line(capsys, argv, code, message) -> None:
    assert main(["measure", *argv]) == code
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert message in err
