"""Cell suppression (seed 000 §5.3): primary cells by the risk rules, secondary cells so that no
primary cell can be recomputed, every pattern checked by the intruder's interval LP.

The package, part by part:

* :mod:`.problem` — :class:`Settings` (mode, cost, zeros, protection, limits), the cells and
  their relations (:class:`CellSystem`: one table's grid or a release's union of tables) and the
  :class:`Problem` every algorithm works on;
* :mod:`.primary` — primary suppression from :mod:`tabsafe.risk.rules`;
* :mod:`.elimination` — the fast mode's sparse Gaussian elimination (GaussSuppression's
  principle, with the frequency-table singleton rule);
* :mod:`.audit` — the interval audit and its repair loop (the fast mode);
* :mod:`.optimal` — the optimal mode: integer program with audit cuts from the fast pattern;
* :mod:`.hypercube` — the hypercube mode: a move per primary cell (Repsilber's hypercubes), each
  checked as the certificate of its protection, for tables too large for the other modes;
* :mod:`.secondary` — :func:`secondary_suppression`, which runs a mode and reports it
  (publishable figures apart from private ones);
* :mod:`.footprint` — the memory model, from the table's shape, checked before any work;
* :mod:`.linked` — tables embedded in the table of all their variables;
* :mod:`.method` — :class:`CellSuppression`, the registered method ``suppress``.
"""

from tabsafe.protect.suppression.linked import JointTable, joint_table
from tabsafe.protect.suppression.method import CellSuppression, suppression_columns
from tabsafe.protect.suppression.primary import primary_suppression
from tabsafe.protect.suppression.problem import CellSystem, Cost, Mode, Problem, Settings, ZeroPolicy
from tabsafe.protect.suppression.secondary import SuppressionResult, secondary_suppression, suppress_problem

__all__ = [
    "CellSuppression",
    "CellSystem",
    "Cost",
    "JointTable",
    "Mode",
    "Problem",
    "Settings",
    "SuppressionResult",
    "ZeroPolicy",
    "joint_table",
    "primary_suppression",
    "secondary_suppression",
    "suppress_problem",
    "suppression_columns",
]
