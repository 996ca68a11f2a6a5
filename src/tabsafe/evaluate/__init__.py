"""Evaluation: what a protection costs in information and leaves in risk, shown for the people
who choose a method and its parameters (METHODS.md §12).

Modules here read original tables, protection results and p-tables and summarise, measure or
draw them; nothing here protects anything, and nothing on the protection path imports this
package.

* :mod:`~tabsafe.evaluate.summary` — risk summaries of original tables (small cells, zeros).
* :mod:`~tabsafe.evaluate.differencing` — :func:`differencing_risk`, the probability that
  differencing two cell-key-perturbed cells shows a small difference exactly (seed 001 §1, §4).
* :mod:`~tabsafe.evaluate.distribution` — exact figures of any method that states
  ``P(published | n)`` (:class:`~tabsafe.method.CellDistribution`): expected information gain
  (001 §5), the differenced value of two cells and its risk (001 §4).
* :mod:`~tabsafe.evaluate.measures` — information loss of a release against the original:
  distances per row with standard errors, variance ratio, decile changes (004 §5.2), χ², Cramér's
  V, Spearman, signed-rank and binomial tests, ANOVA R² (000 §5.8); inner cells, margins,
  marginal tables.
* :mod:`~tabsafe.evaluate.risk` — DR (004 §5.2), small and directly disclosive cells, entropy
  risk r and r# (000 §5.9), risky households left unswapped.
* :mod:`~tabsafe.evaluate.config`, :mod:`~tabsafe.evaluate.runner`, :mod:`~tabsafe.evaluate.html`
  — ``tabsafe evaluate``: settings × tables from a YAML file, measured, as one self-contained
  HTML report with an R-U map; :mod:`~tabsafe.evaluate.demo` — the demo's report.
* :mod:`~tabsafe.evaluate.ptable_plot` — a p-table's noise distribution, one panel per original
  value (matplotlib, imported when a plot is drawn).
"""

from tabsafe.evaluate.differencing import difference_distribution, differencing_risk
from tabsafe.evaluate.distribution import differenced_distribution, information_gain

__all__ = ["difference_distribution", "differenced_distribution", "differencing_risk", "information_gain"]
