"""Controlled rounding: an additive table of multiples of the base, as close as possible.

Seed 000 §5.5 "Controlled rounding" and §5.5.1; METHODS.md §4. The package, by strategy:

:mod:`.steps`
    the values a cell may take (zero-restricted or ``K`` steps) and existence intervals;
:mod:`.grid`
    the dense grid and its additive families;
:mod:`.program`
    one integer program over some free cells (value objects :class:`Problem`, :class:`Part`);
:mod:`.work`
    the deterministic work budget, the optional time limit, the tuning of the strategies;
:mod:`.relaxation`
    the LP relaxation (bound, proof of infeasibility, guide);
:mod:`.sequential`
    slice-by-slice rounding guided by the LP;
:mod:`.partition`
    tables above ``part_cells`` part by part;
:mod:`.improve`
    the neighbourhood search;
:mod:`.solve`
    :func:`controlled_round` (the strategies put together), :func:`rapid_round`;
:mod:`.method`
    :class:`ControlledRounding`, the method ``controlled-round`` of the registry.
"""

from tabsafe.protect.controlled_rounding.method import ControlledRounding
from tabsafe.protect.controlled_rounding.solve import (
    DEFAULT_PART_CELLS,
    ControlledResult,
    SolutionKind,
    controlled_round,
    rapid_round,
)
from tabsafe.protect.controlled_rounding.steps import existence_intervals
from tabsafe.protect.controlled_rounding.work import DEFAULT_WORK_LIMIT, Limits, Tuning

__all__ = [
    "DEFAULT_PART_CELLS",
    "DEFAULT_WORK_LIMIT",
    "ControlledResult",
    "ControlledRounding",
    "Limits",
    "SolutionKind",
    "Tuning",
    "controlled_round",
    "existence_intervals",
    "rapid_round",
]
