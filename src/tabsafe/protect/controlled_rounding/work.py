"""How much work one controlled rounding may do, and what stopped it (hardening issue #12).

A time limit makes the result depend on the machine: the same table and parameters gave
objectives 51,876 and 51,900 on two runs. So the default limit is *work*, counted in
branch-and-bound nodes of HiGHS summed over every integer program of the rounding (a program
settled at its root node counts one). Every program runs on one thread with a fixed random seed
under a node limit, and the strategies spend a fixed number of programs (the sequential rounding
one per slice; the neighbourhood search until the budget, its stall limit or the bound stops it),
so the same table and parameters give the same rounding on any machine. One solve has a time
cap of its own: the presolve that looks for a proof that no rounding exists (it may take minutes
on a million-cell program with steps); it can only turn a rounding into an error, never change a
rounding that is returned. A time limit may be added as an extra cap; when it is what stopped the
search, the result says it is not reproducible.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tabsafe.progress import report
from tabsafe.solver import Solution

__all__ = ["DEFAULT_WORK_LIMIT", "Effort", "Limits", "Tuning", "Work"]

#: The default budget of branch-and-bound nodes (measured: see the ControlledRounding docstring).
DEFAULT_WORK_LIMIT = 5_000


@dataclass(frozen=True)
class Limits:
    """The limits of one rounding.

    Attributes:
        work: branch-and-bound nodes, summed over all integer programs (deterministic).
        time: seconds of wall time, or None (the default: results are then reproducible).
    """

    work: int = DEFAULT_WORK_LIMIT
    time: float | None = None


@dataclass(frozen=True)
class Tuning:
    """How the strategies spend the work (measured defaults; tests shrink them to force a path).

    Attributes:
        direct_vars: programs with at most this many variables go to the solver whole.
        joint_direct_vars: the same for a cell vector without a grid (a release): the crossing
            relations of several tables make the solver's branch and bound much slower than on
            one table (two tables of a 20,000-person census sharing area × age, 3,182
            variables: 500 nodes took 85 s and ended 0.4% above the bound; its first rounding
            and the neighbourhood search took 12 s and ended 1.5% above).
        sequential_slice: larger programs are rounded slice by slice along their longest
            dimension when its slices have at most this many cells.
        group: the sequential rounding's last group of children solved together.
        horizon: children that join a sequential program as a continuous look-ahead.
        pull: λ, the weight of the pull towards the LP relaxation.
        slice_nodes: node cap of an exact sequential program (a top unit, a last group).
        lookahead_nodes: node cap of a sequential program with a look-ahead.
        neighbourhood_cells: cells freed by one neighbourhood of the improvement search.
        neighbourhood_nodes: node cap of one neighbourhood.
        stall: the improvement search stops after this many neighbourhoods in a row without
            a better rounding.
        part_nodes: node cap of one part of a partitioned table.
        probe_seconds: time cap of the presolve that looks for a proof that no rounding exists
            (presolving a million-cell program with steps can take minutes).
        search_seed: seed of the improvement search's choice of neighbourhoods (fixed: the
            rounding is a deterministic function of the table and the parameters).
    """

    direct_vars: int = 4_000
    joint_direct_vars: int = 500
    sequential_slice: int = 5_000
    group: int = 8
    horizon: int = 16
    pull: float = 1.0
    slice_nodes: int = 100
    lookahead_nodes: int = 100
    neighbourhood_cells: int = 2_000
    neighbourhood_nodes: int = 10
    stall: int = 200
    part_nodes: int = 500
    probe_seconds: float = 10.0
    search_seed: int = 0


@dataclass(frozen=True)
class Effort:
    """What one integer program may spend.

    Attributes:
        nodes: its node limit (0: presolve only).
        seconds: its time limit, or None.
        gap: the relative gap at which it may stop (HiGHS' default when None).
        first_feasible: stop at its first solution.
    """

    nodes: int
    seconds: float | None = None
    gap: float | None = None
    first_feasible: bool = False


class Work:
    """The work left to one rounding, and which limit stopped it.

    Not a value object: the strategies of one rounding draw on one budget, in turn. Create one
    per rounding.
    """

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.started = time.monotonic()
        self.nodes = 0
        self.programs = 0
        #: "work" or "time" once a limit has stopped a program or the search, else None
        self.stopped_by: str | None = None

    # -- what is left ---------------------------------------------------------------------
    @property
    def nodes_left(self) -> int:
        return max(0, self.limits.work - self.nodes)

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started

    @property
    def seconds_left(self) -> float | None:
        if self.limits.time is None:
            return None
        return self.limits.time - self.seconds

    def spent(self) -> bool:
        """Whether no program can be started any more; records which limit says so."""
        if self.nodes_left <= 0:
            self.stopped_by = self.stopped_by or "work"
            return True
        left = self.seconds_left
        if left is not None and left <= 0.05:
            self.stopped_by = "time"
            return True
        return False

    def effort(self, cap: int | None = None, *, gap: float | None = None, first_feasible: bool = False) -> Effort | None:
        """The effort of the next program: at most ``cap`` nodes (all that is left when None);
        None when the budget is spent."""
        if self.spent():
            return None
        nodes = self.nodes_left if cap is None else min(cap, self.nodes_left)
        return Effort(nodes=nodes, seconds=self.seconds_left, gap=gap, first_feasible=first_feasible)

    def probe(self, seconds: float) -> Effort:
        """Presolve only, for at most ``seconds``: it proves many programs infeasible at once, for
        no nodes. Its time cap never changes a rounding that is returned (the probe can only say
        that none exists), so it does not count as a limit that stopped the search."""
        left = self.seconds_left
        return Effort(nodes=0, seconds=seconds if left is None else max(0.01, min(seconds, left)))

    # -- what was spent -------------------------------------------------------------------
    def charge(self, sol: Solution, effort: Effort) -> None:
        """Count a program's nodes (its root at least, unless it was a presolve probe) and note
        which limit cut it short."""
        self.programs += 1
        if effort.nodes > 0:
            self.nodes += max(1, sol.nodes)
        self.note(sol)
        report("controlled rounding", done=min(self.nodes, self.limits.work), total=self.limits.work,
               programs=self.programs)

    def note(self, sol: Solution) -> None:
        """Record a time limit that cut a solve short, or a node limit that was all the budget
        had left (a program's own smaller node cap is a choice of the strategy, not a stop)."""
        if sol.limit == "time":
            self.stopped_by = "time"
        elif sol.limit == "nodes" and self.nodes_left <= 0:
            self.stopped_by = self.stopped_by or "work"

    @property
    def reproducible(self) -> bool:
        """Whether the result is the same on any machine (no time limit cut the search)."""
        return self.stopped_by != "time"
