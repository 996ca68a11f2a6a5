"""Pre-tabular protection: record swapping and PRAM (seed 000 §5.6, seed 001 §6, seed 002 §3.1,
seed 004 §3.1; METHODS.md §8–9).

* :class:`TargetedSwap` (``targeted-swap``) — households at risk swap geography with similar
  households elsewhere, top level first, topped up to the swap rate (:mod:`.targeted`).
* :class:`RandomSwap` (``random-swap``) — random pairs within control strata (:mod:`.random_swap`).
* :class:`Pram` (``pram``) — a categorical variable changed by an invariant transition matrix
  (:mod:`.pram`).

The procedures: :mod:`._population` (households, codes, input checks), :mod:`._matching`
(vectorised donor matching, random streams keyed by area), :mod:`._swap` (the swapping
procedure and its report).
"""

from tabsafe.protect.swapping.pram import Pram
from tabsafe.protect.swapping.random_swap import RandomSwap
from tabsafe.protect.swapping.targeted import TargetedSwap

__all__ = ["Pram", "RandomSwap", "TargetedSwap"]
