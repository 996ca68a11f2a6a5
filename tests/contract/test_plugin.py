"""A method added as ONE module in a throwaway package (declared by an entry point) is found by
the registry, gets its options on `tabsafe protect`, and is checked by the contract suite — with no
other edit anywhere."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

PLUGIN = textwrap.dedent('''
    """A plugin method: halve every count (rounded down)."""
    from dataclasses import dataclass
    from typing import ClassVar

    from tabsafe.method import Examples, Outcome, TableMethod
    from tabsafe.params import Int, parameter


    @dataclass(frozen=True, kw_only=True)
    class Halve(TableMethod):
        """Divide every count by a divisor, rounding down.

        Attributes:
            divisor: what every count is divided by (1 leaves the table as it is).
        """

        name: ClassVar[str] = "halve"
        divisor: int = parameter(2, check=Int(min=1, max=1000))

        @classmethod
        def examples(cls):
            return Examples(typical=(cls(),), identity=cls(divisor=1))

        def apply(self, table, seed):
            return Outcome(cells=table, release={"count": table.counts // self.divisor})
''')


def _install(tmp: Path) -> dict[str, str]:
    (tmp / "tabsafe_plugin_halve.py").write_text(PLUGIN)
    dist = tmp / "tabsafe_plugin_halve-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tabsafe-plugin-halve\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[tabsafe.methods]\nhalve = tabsafe_plugin_halve:Halve\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tmp) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_one_module_plugin_is_discovered_everywhere(tmp_path: Path, small_census) -> None:
    env = _install(tmp_path)
    root = Path(__file__).resolve().parents[2]
    names = subprocess.run([sys.executable, "-c", "import tabsafe; print(tabsafe.method_names())"],
                           env=env, capture_output=True, text=True, check=True).stdout
    assert "'halve'" in names
    helptext = subprocess.run([sys.executable, "-m", "tabsafe.cli", "protect", "--method", "halve", "--help"],
                              env=env, capture_output=True, text=True, check=True).stdout
    assert "--divisor" in helptext and "what every count is divided by" in helptext
    out = tmp_path / "halved.csv"
    run = subprocess.run([sys.executable, "-m", "tabsafe.cli", "protect", str(small_census.persons), "--by", "sex",
                          "--method", "halve", "--divisor", "4", "--out", str(out)],
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    total = int(out.read_text().splitlines()[1].split(",")[-1])
    assert total == 20_000 // 4
    suite = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "halve",
                            str(root / "tests" / "contract" / "test_methods_contract.py")],
                           env=env, capture_output=True, text=True, cwd=root)
    assert suite.returncode == 0, suite.stdout + suite.stderr
    # one item per applicable check, every one of them run and passed
    assert " passed" in suite.stdout and "failed" not in suite.stdout and " 0 passed" not in suite.stdout
