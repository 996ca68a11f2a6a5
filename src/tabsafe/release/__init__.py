"""Releases: the tables an office publishes together, protected and audited as one.

* :mod:`.spec` — :class:`ReleaseSpec` (a YAML config: data, hierarchies, tables with filters,
  variables whose codes name the same populations) and :class:`ReleaseTable`;
* :class:`ReleaseCells` (:mod:`tabsafe.model.release_cells`, a value of the data model that
  methods read) — the union of the tables' cells and relations (a cell shared by several tables
  is one cell; alternative hierarchies of one variable allowed);
* :mod:`.protect` — :func:`protect_release` (jointly for methods that can, each table alone for
  methods consistent by construction), :func:`~.protect.protect_release_chain` (a chain: microdata
  methods once on the records, then table methods step by step) and :func:`tabulate_release`;
* :mod:`tabsafe.model.finest` — the release's finest cells: what the cell perturbation family
  perturbs once so that every table is their sum (one value per shared cell, every table additive).

The audit of a release as published is :mod:`tabsafe.release.audit`; of a perturbed release
(averaging, least-squares and LP intruders), :mod:`tabsafe.release.perturbed_audit`.
"""

from tabsafe.model.release_cells import Concept, ReleaseCells
from tabsafe.release.protect import JointMethod, ReleaseProtection, protect_release, tabulate_release
from tabsafe.release.spec import ReleaseSpec, ReleaseTable

__all__ = [
    "Concept",
    "JointMethod",
    "ReleaseCells",
    "ReleaseProtection",
    "ReleaseSpec",
    "ReleaseTable",
    "protect_release",
    "tabulate_release",
]
