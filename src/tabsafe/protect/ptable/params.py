"""The parameters of a generated count p-table (seed 000 §5.4; METHODS.md §2).

A value object declared like a method's parameters (:mod:`tabsafe.params`): every field carries
its constraint, so a bad value fails with one sentence naming the field, what is allowed and
what was given, and ``tabsafe ptable`` builds its options from the same declarations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tabsafe import params as _params
from tabsafe.params import Bool, Int, Optional, Real, parameter

__all__ = ["PTableParams"]


@dataclass(frozen=True, kw_only=True)
class PTableParams:
    """Parameters of a count p-table made by maximum entropy (seed 000 §5.4; METHODS.md §2).

    Attributes:
        max_noise: D, the largest absolute noise |v| a count may get.
        variance: V, the noise variance each row aims at; an upper bound: a row whose targets
            cannot spread that far at maximum entropy stays below it (and says so).
        js: perturbed values 1..js never occur (0 blocks nothing).
        pstay: lower bound of the probability that a count stays unchanged (none: the plain
            maximum entropy solution); as in R ptable it is lowered in steps of 0.05 for rows
            that cannot otherwise reach V.
        monotony: probabilities do not decrease towards v = 0 on the negative side.

    >>> PTableParams(max_noise=5, variance=3, js=2).i_max
    8
    """

    max_noise: int = parameter(check=Int(min=1, max=100))
    variance: float = parameter(check=Real(min=0, min_open=True))
    js: int = parameter(0, check=Int(min=0, max=100))
    pstay: float | None = parameter(None, check=Optional(Real(min=0, max=1, min_open=True, max_open=True)))
    monotony: bool = parameter(True, check=Bool())

    def __post_init__(self) -> None:
        # a value object, not a method: it validates itself when built (check_all normalises
        # numpy scalars to plain Python values, so parameters print and compare as such)
        _params.check_all(self)
        object.__setattr__(self, "variance", float(self.variance))
        if self.pstay is not None:
            object.__setattr__(self, "pstay", float(self.pstay))

    @property
    def i_max(self) -> int:
        """Largest original value with a row of its own: ``D`` if ``js = 0``, else ``D+js+1``."""
        return self.max_noise if self.js == 0 else self.max_noise + self.js + 1

    def params(self) -> dict[str, Any]:
        """Every field's value as JSON (what a report records; :meth:`from_params` reads it)."""
        return _params.to_params(self)

    @classmethod
    def from_params(cls, values: Any) -> PTableParams:
        """Build from JSON values (a report, a config file)."""
        return _params.from_params(cls, values, where="PTableParams")
