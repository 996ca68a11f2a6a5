"""Evaluation helpers: what a method did, shown for the people who choose its parameters.

Modules here read protection results and p-tables and draw or summarise them; nothing here
protects anything, and nothing on the protection path imports this package.

* :mod:`~tabsafe.evaluate.ptable_plot` — a p-table's noise distribution, one panel per
  original value (matplotlib, imported when a plot is drawn).
"""
