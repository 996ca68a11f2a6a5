"""tau-ARGUS magnitude p-tables (its data/cellkey/Magnitude folder: R ptable's
``create_num_ptable(..., step = 2)``): ``j``/``v`` in half steps, a ``type`` column, rows for
categories of ``i`` only. The files here are written in their style with numbers of our own,
not copied from sdcTools/tauargus."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tabsafe.errors
from tabsafe.protect.cell_key import MagnitudeParams, lookup_noise, perturb_magnitudes
from tabsafe.protect.cell_key_method import CellKeyMethod
from tabsafe.protect.ptable import PTable
from tabsafe.protect.ptable.columns import COLUMNS

# rows for i = 0, 1 and 3 only (the categories), half steps, E-notation as R writes small p
SAVINGS = """\
i;j;p;v;p_int_ub;type
0;0;1;0;1;all
1;0;0.3;-1;0.3;all
1;0.5;0.2;-0.5;0.5;all
1;1;0.3;0;0.8;all
1;1.5;0.15;0.5;0.95;all
1;2;0.05;1;1;all
3;1.5;5E-02;-1.5;0.05;all
3;2;0.1;-1;0.15;all
3;2.5;0.2;-0.5;0.35;all
3;3;0.3;0;0.65;all
3;3.5;0.2;0.5;0.85;all
3;4;0.1;1;0.95;all
3;4.5;5E-02;1.5;1;all
"""

# every i = 0..2 has rows, half steps: a table the flex design can look up row by row
FULL = """\
i;j;p;v;p_int_ub;type
0;0;1;0;1;all
1;0;0.4;-1;0.4;all
1;0.5;0.2;-0.5;0.6;all
1;1;0.25;0;0.85;all
1;2;0.15;1;1;all
2;1;0.1;-1;0.1;all
2;1.5;0.15;-0.5;0.25;all
2;2;0.35;0;0.6;all
2;2.5;0.25;0.5;0.85;all
2;3.5;0.15;1.5;1;all
"""


def write(folder: Path, text: str, name: str = "ptab.txt") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def rows_of(text: str) -> list[dict[str, str]]:
    """The file's rows as texts, read here without tabsafe."""
    header, *lines = text.splitlines()
    return [dict(zip(header.split(";"), line.split(";"))) for line in lines]


def test_half_steps_type_and_categories_are_kept(tmp_path: Path) -> None:
    pt = PTable.from_file(write(tmp_path, SAVINGS))
    rows = rows_of(SAVINGS)
    assert pt.kind == "all" and not pt.integral and not pt.covers
    assert pt.column("j").tolist() == [float(r["j"]) for r in rows]
    assert pt.column("v").tolist() == [float(r["v"]) for r in rows]
    assert pt.column("p").tolist() == [float(r["p"]) for r in rows]
    assert sorted(set(pt.column("i").tolist())) == [0, 1, 3]
    # p_int_lb is rebuilt as the previous row's p_int_ub within one i
    assert pt.column("p_int_lb").tolist()[6:9] == [0.0, 0.05, 0.15]


@pytest.mark.parametrize("kind", ["all", "even", "odd"])
def test_write_read_round_trip(tmp_path: Path, kind: str) -> None:
    text = SAVINGS.replace(";all", f";{kind}")
    pt = PTable.from_file(write(tmp_path, text))
    written = pt.to_text("tau-argus")
    back = PTable.from_file(write(tmp_path, written, "back.txt"))
    # value-identical: every column exactly, the type kept
    assert back.kind == kind
    for c in COLUMNS:
        assert np.array_equal(back.column(c), pt.column(c)), c
    # and what tabsafe writes reads back to the same bytes
    assert back.to_text("tau-argus") == written
    assert written.splitlines()[0] == "i;j;p;v;p_int_ub;type"
    assert [line.split(";")[1] for line in written.splitlines()[1:4]] == ["0", "0", "0.5"]
    assert [line.split(";")[5] for line in written.splitlines()[1:]] == [kind] * (len(rows_of(text)))


@pytest.mark.parametrize(
    ("old", "new", "line", "field", "fragment"),
    [
        # rows of i=1 sum to 0.96 (the running sums are consistent, only the total is off)
        ("1;2;0.05;1;1;all", "1;2;0.01;1;0.96;all", 7, "p", "the p of i=1 sum to 0.96, not 1"),
        # p_int_ub not the running sum of p
        ("3;2.5;0.2;-0.5;0.35;all", "3;2.5;0.2;-0.5;0.4;all", 10, "p_int_ub", "0.4 is not the running sum"),
        # a type R ptable never writes, in one row or in all
        ("1;1;0.3;0;0.8;all", "1;1;0.3;0;0.8;both", 5, "type", "must be one of all, even, odd; got 'both'"),
        (";all", ";both", 2, "type", "must be one of all, even, odd; got 'both'"),
        # even and odd rows in one file: one value holds one type
        ("3;3;0.3;0;0.65;all", "3;3;0.3;0;0.65;even", 11, "type", "'even' after 'all' on line 2"),
    ],
)
def test_inconsistent_rows_name_file_line_and_field(tmp_path: Path, old: str, new: str, line: int,
                                                    field: str, fragment: str) -> None:
    assert old in SAVINGS
    path = write(tmp_path, SAVINGS.replace(old, new, 1 if old != ";all" else -1))
    with pytest.raises(tabsafe.errors.InputError) as info:
        PTable.from_file(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}:{line}: field {field}:"), msg
    assert fragment in msg, msg


def test_mixing_even_and_odd_is_refused_from_columns_too() -> None:
    rows = rows_of(SAVINGS)
    columns = {c: [r[c] for r in rows] for c in ("i", "j", "p", "v", "p_int_ub", "type")}
    ub = [float(x) for x in columns["p_int_ub"]]
    columns["p_int_lb"] = [0.0 if k == 0 or rows[k]["i"] != rows[k - 1]["i"] else ub[k - 1] for k in range(len(rows))]
    assert PTable.from_columns(columns).kind == "all"
    columns["type"] = ["even"] * 6 + ["odd"] * (len(rows) - 6)
    with pytest.raises(tabsafe.errors.InputError, match="column type must hold one of all, even, odd"):
        PTable.from_columns(columns)


def test_count_paths_refuse_a_magnitude_table(tmp_path: Path) -> None:
    path = write(tmp_path, FULL)
    pt = PTable.from_file(path)
    with pytest.raises(tabsafe.errors.InputError, match="fractional j/v"):
        lookup_noise(np.array([1, 2]), np.array([0.5, 0.5]), pt)
    with pytest.raises(tabsafe.errors.InputError) as info:
        CellKeyMethod(ptable=str(path), key="rkey")
    assert "magnitude p-table" in str(info.value) and str(path) in str(info.value)


def test_magnitude_noise_from_a_half_step_table(tmp_path: Path) -> None:
    """A value below the flex point has ``x_delta = x * p_small``, so ``a = 1 / p_small = 4``
    is capped at ``i_max = 2``: the noise is ``x_delta * v`` with ``v`` from the row of i=2
    whose interval holds the key (the magnitude look-up: the first row with key < p_int_ub)."""
    pt = PTable.from_file(write(tmp_path, FULL))
    params = MagnitudeParams(ptable=pt, fp=1000.0, p_small=0.25, p_large=0.05)
    targets = [(float(r["v"]), float(r["p_int_ub"])) for r in rows_of(FULL) if r["i"] == "2"]
    keys = np.array([0.05, 0.1, 0.2, 0.3, 0.6, 0.7, 0.85, 0.9, 0.99])
    expected_v = [next(v for v, ub in targets if key < ub) for key in keys]
    assert {-1.0, -0.5, 0.5, 1.5} <= set(expected_v)
    values = np.full(keys.size, 100.0)
    out = perturb_magnitudes(values, keys, params)
    np.testing.assert_allclose(out, 100.0 + 25.0 * np.array(expected_v), rtol=0, atol=1e-9)


def test_magnitude_params_refuse_what_they_cannot_look_up(tmp_path: Path) -> None:
    gaps = PTable.from_file(write(tmp_path, SAVINGS))
    with pytest.raises(tabsafe.errors.InputError, match=r"rows for every i = 0\.\.i_max.*0, 1, 3"):
        MagnitudeParams(ptable=gaps, fp=1000.0)
    even = PTable.from_file(write(tmp_path, FULL.replace(";all", ";even"), "even.txt"))
    with pytest.raises(tabsafe.errors.InputError, match="type 'all'"):
        MagnitudeParams(ptable=even, fp=1000.0)
    with pytest.raises(tabsafe.errors.InputError, match="type 'all'"):
        MagnitudeParams(ptable=PTable.from_file(write(tmp_path, FULL, "full.txt")), fp=1000.0,
                        small_cells_ptable=even)
