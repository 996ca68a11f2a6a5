"""A method registered by a throwaway plugin package appears in the evaluation report — with its
measures, and with the exact information gain and differencing risk of the distribution it
states — with no change to the evaluation code (the registry and ``from_params`` find it)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

PLUGIN = textwrap.dedent('''
    """A plugin method: every non-zero cell moves one down or one up, with equal chances."""
    from dataclasses import dataclass
    from typing import ClassVar

    import numpy as np

    from tabsafe.method import Examples, Outcome, TableMethod
    from tabsafe.params import Int, parameter


    @dataclass(frozen=True, kw_only=True)
    class Coin(TableMethod):
        """Move every non-zero cell by one step, down or up at random.

        Attributes:
            step: how far a cell moves (0 leaves the table as it is).
        """

        name: ClassVar[str] = "coin"
        random: ClassVar[bool] = True
        step: int = parameter(1, check=Int(min=0, max=10))

        @classmethod
        def examples(cls):
            return Examples(typical=(cls(),), identity=cls(step=0))

        def published_distribution(self, n):
            if n == 0 or self.step == 0:
                return {n: 1.0}
            return {n - self.step: 0.5, n + self.step: 0.5}

        def apply(self, table, seed):
            rng = np.random.default_rng(seed)
            move = np.where(rng.random(table.n_stored) < 0.5, -self.step, self.step)
            counts = np.where(table.counts > 0, table.counts + move, 0)
            return Outcome(cells=table, release={"count": counts})
''')


def _install(tmp: Path) -> dict[str, str]:
    (tmp / "tabsafe_plugin_coin.py").write_text(PLUGIN)
    dist = tmp / "tabsafe_plugin_coin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tabsafe-plugin-coin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[tabsafe.methods]\ncoin = tabsafe_plugin_coin:Coin\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tmp) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_plugin_method_appears_in_the_report(tmp_path: Path, small_census) -> None:
    env = _install(tmp_path)
    config = {
        "data": str(small_census.persons),
        "seed": 3,
        "tables": {"region_age_sex": ["region", "age", "sex"]},
        "settings": [{"method": "coin", "params": {"step": 1}},
                     {"method": "ckm", "params": {"max_noise": 3, "variance": 2, "js": 1}}],
    }
    cfg = tmp_path / "eval.yaml"
    cfg.write_text(yaml.safe_dump(config))
    run = subprocess.run([sys.executable, "-m", "tabsafe.cli", "evaluate", str(cfg), "--out", str(tmp_path / "r.html"),
                          "--json", str(tmp_path / "m.json")], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    page = (tmp_path / "r.html").read_text()
    assert '<td class="l"><b>coin</b></td>' in page  # its row in the settings table
    data = json.loads((tmp_path / "m.json").read_text())
    coin = next(s for s in data["settings"] if s["method"] == "coin")
    assert coin["params"] == {"step": 1} and coin["seed"] == 3
    # the plugin's stated distribution gives its exact information gain, worked out by hand:
    # X uniform on 0..5; Y = 0 from X = 0 (1/6) or 1 (1/12): H = h(1/3); Y = 2, 3, 4 from two
    # equally likely X: H = log 2; Y = 1, 5, 6 from one X: H = 0 (entropy in base 6)
    h = -(1 / 3 * math.log(1 / 3) + 2 / 3 * math.log(2 / 3))
    h_x_y = (1.5 / 6 * h + 3 / 6 * math.log(2)) / math.log(6)
    assert coin["method_measures"]["information_gain"]["value"] == pytest_approx(1 - h_x_y)
    # and the measures of its release are there, like any built-in method's
    result = next(r for r in data["results"] if r["setting"] == "coin")
    assert result["measures"]["utility"]["inner"]["hellinger"]["mean"] > 0
    assert result["checker"]["cells_perturbed"] > 0
    assert result["measures"]["utility"]["binomial"]["impossible"] == 0


def pytest_approx(value: float):
    import pytest

    return pytest.approx(value, abs=1e-12)
