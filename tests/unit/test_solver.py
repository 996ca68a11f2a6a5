"""The door to HiGHS: programs of every kind run one after another in one process."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import numpy as np, scipy.sparse as sp
from tabsafe.solver import ExtremeSolver, LinearProgram, solve
A = sp.csr_matrix(np.array([[1.0, 1.0, -1.0]]))
lp = LinearProgram(c=np.array([1.0, 2.0, 0.0]), A=A, row_lower=np.zeros(1), row_upper=np.zeros(1),
                   col_lower=np.zeros(3), col_upper=np.full(3, 5.0), integer=np.ones(3, dtype=bool))
assert solve(lp, time_limit=10).status == "optimal"
box = ExtremeSolver(A, np.zeros(1), np.zeros(3), np.full(3, 5.0))
print(box.optimum(np.array([1.0, 0.0, 0.0]), maximize=True).value)
"""


def test_an_interval_audit_after_an_integer_program_in_one_process():
    """HiGHS sizes its thread pool at a process's first run: an integer program with its
    defaults, then an interval audit (one thread) made the audit fail ("Not Set")."""
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "5.0"
