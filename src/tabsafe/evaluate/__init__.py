"""Evaluation: what a protection costs in information and leaves in risk, shown for the people
who choose a method and its parameters (METHODS.md §12).

Modules here read original tables, protection results and p-tables and summarise, measure or
draw them; nothing here protects anything, and nothing on the protection path imports this
package.

* :mod:`~tabsafe.evaluate.summary` — risk summaries of original tables (small cells, zeros).
* :mod:`~tabsafe.evaluate.differencing` — :func:`differencing_risk`, the probability that
  differencing two perturbed cells shows a small difference exactly (seed 001 §1, §4).
* :mod:`~tabsafe.evaluate.ptable_plot` — a p-table's noise distribution, one panel per original
  value (matplotlib, imported when a plot is drawn).
* :func:`differencing_risk` — the probability that differencing two perturbed cells shows a small
  difference exactly (seed 001 §1, §4).
"""

from tabsafe.evaluate.differencing import difference_distribution, differencing_risk

__all__ = ["difference_distribution", "differencing_risk"]
