"""Measures of risk and utility for protected tables (METHODS.md §12).

* :func:`differencing_risk` — the probability that differencing two perturbed cells shows a small
  difference exactly (seed 001 §1, §4).
"""

from tabsafe.evaluate.differencing import difference_distribution, differencing_risk

__all__ = ["difference_distribution", "differencing_risk"]
