"""Pieces of the evaluation runner by hand: the inner cell of each record (what record-level DR
and the entropy risk's transitions are built from), the noise histogram, default labels."""

from __future__ import annotations

import pyarrow as pa

from tabsafe.evaluate.runner import _noise_histogram, record_cells


def _dims():
    from tabsafe.model.hierarchy import Hierarchy
    from tabsafe.model.table import Dimension

    area = Dimension("area", Hierarchy.from_tree({"N": ["a1", "a2"], "S": ["a3"]}))
    sex = Dimension("sex", Hierarchy.flat(["1", "2"]))
    return [area, sex]


def test_record_cells_by_hand() -> None:
    records = pa.table({
        "area": pa.array(["a1", "a3", "a2", "a9", "a3"]).dictionary_encode(),
        "sex": pa.array([2, 1, 2, 1, 2]),  # integer codes are compared as text, as the engines do
        "age": pa.array([30, 70, 15, 40, 80]),
    })
    # inner cell = leaf place of area (a1 0, a2 1, a3 2) × 2 + leaf place of sex; a9 is no code
    assert record_cells(records, _dims()).tolist() == [1, 4, 3, -1, 5]
    # a sub-population: records outside it are in no cell of the table
    assert record_cells(records, _dims(), "age >= 40").tolist() == [-1, 4, -1, -1, 5]


def test_noise_histogram_bins_and_overflow() -> None:
    original = [0, 5, 5, 5, 40, 40]
    published = [0, 6, 4, 5, 10, 52]
    assert _noise_histogram(original, published) == {"<": 1, "-1": 1, "0": 2, "1": 1, ">": 1}


def test_default_labels_show_what_differs_from_the_defaults() -> None:
    from tabsafe.evaluate.config import _default_label
    from tabsafe.registry import build_method

    assert _default_label([build_method("ckm", {"max_noise": 3, "variance": 2})]) == "ckm (max_noise 3, variance 2)"
    assert _default_label([build_method("suppress", {"min_freq": 5}),
                           build_method("ckm", {"max_noise": 3, "variance": 2, "js": 1})]) == (
        "suppress (min_freq 5) + ckm (max_noise 3, variance 2, js 1)")
