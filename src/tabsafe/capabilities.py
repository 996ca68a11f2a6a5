"""What a method guarantees: declared, not guessed.

Every method states its :class:`Capabilities` (``Method.capabilities()``, from the class's
``declared`` value, refined by its parameters where they change a promise: rounding is consistent
in its ``consistent`` mode only). The surfaces read these promises instead of guessing from
attribute names:

* a release (:mod:`tabsafe.release.protect`) is protected in one problem by a ``joint`` method;
  table by table only by a ``consistent`` one (a shared cell then gets one value); any other
  method is refused before any work;
* the table builder (:mod:`tabsafe.service`) serves only chains whose every table step is
  ``consistent``: the same cell gets the same value in every table it appears in, so averaging
  rephrased or repeated queries cannot remove the noise (seed 002 §5, after Dinur and Nissim);
* evaluation and reports say what a protection promises from the same record;
* the contract suite (:mod:`tabsafe.testing.contract`) checks every declared promise on the
  method's examples: a method that says ``consistent`` or ``additive`` and is not, fails.

The declaration is the only source: ``Method.random`` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

__all__ = ["Capabilities", "Reading", "chain_capabilities"]


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What a method, with its parameters, promises about what it publishes.

    Attributes:
        stage: ``"micro"`` (changes records before tabulation) or ``"table"`` (changes a table).
            Set by the method's base class, never declared.
        random: the result depends on the seed (the seed is then as secret as the originals).
        consistent: the same cell gets the same published value in every table and every run
            — a function of the cell's own records (its count, its record keys), not of the table
            it sits in or of the seed. Repeating or rephrasing a query gives the same value, so
            noise cannot be averaged away (seed 000 §5.4; 001 §3).
        additive: every published table is additive: each margin equals the sum of the published
            cells below it.
        magnitudes: protects sums of a magnitude variable (``sum_<var>`` columns) as well as counts.
        joint: protects the tables of a release as one problem (``protect_release``): shared
            cells get one value or one status and the release is audited as a whole.
        publishes_unchanged: may publish every cell at its original value (restoration methods
            such as additivity on an additive table; small-cell rounding of a table without small
            cells). A method that does not declare it never publishes a whole column of originals.
        hides: publishes some cells as hidden (suppression); the release audit reads hidden cells
            as intervals (:meth:`Reading`).
        needs_grid: works on the whole grid of the table (implied zeros included), not only on
            the cells that exist; its memory grows with the grid.
    """

    stage: str = "table"
    random: bool = False
    consistent: bool = False
    additive: bool = False
    magnitudes: bool = False
    joint: bool = False
    publishes_unchanged: bool = False
    hides: bool = False
    needs_grid: bool = False

    def __post_init__(self) -> None:
        if self.stage not in ("micro", "table"):
            raise ValueError(f"stage must be 'micro' or 'table'; got {self.stage!r}")
        for f in fields(self):
            if f.name != "stage" and not isinstance(getattr(self, f.name), bool):
                raise TypeError(f"capability {f.name!r} must be True or False")

    def promises(self) -> list[str]:
        """The names of the capabilities that hold, in declaration order (for reports and help)."""
        return [f.name for f in fields(self) if f.name != "stage" and getattr(self, f.name)]

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, kw_only=True)
class Reading:
    """How an intruder reads a published value of the method — what the release audit of the
    published files may assume (seed 000 §5.2's intervals).

    Attributes:
        hidden_min: a hidden (suppressed) cell is known to be at least this (1: suppressed cells
            are never zero); None when the method hides no cell.
        base: published values are multiples of this base and a published ``r`` lies in
            ``[r-b+1, r+b-1]`` (rounding); None otherwise.
        excluded: published values ``1..excluded`` never occur (the cell key method's ``js``):
            a later step that changes values (additivity) keeps them out (issue #31).
    """

    hidden_min: float | None = None
    base: int | None = None
    excluded: int = 0


def chain_capabilities(steps: Any) -> Capabilities:
    """What a chain of methods (microdata steps first) promises as a whole.

    A chain is random if any step is; consistent, additive and free of originals only if its
    last table step says so (consistent: every table step must be, since one step's
    table-dependent value feeds the next); it protects magnitudes if a table step does; it is
    joint only as a single joint table step.
    """
    caps = [s.capabilities() for s in steps]
    table = [c for c in caps if c.stage == "table"]
    last = table[-1] if table else None
    return Capabilities(
        stage="table" if table else "micro",
        random=any(c.random for c in caps),
        consistent=bool(table) and all(c.consistent for c in table),
        additive=bool(last and last.additive),
        magnitudes=any(c.magnitudes for c in table),
        joint=len(table) == 1 and table[0].joint,
        publishes_unchanged=not table or all(c.publishes_unchanged for c in table),
        hides=any(c.hides for c in table),
        needs_grid=any(c.needs_grid for c in table),
    )
