"""Sensitive cells of magnitude tables: p%, prior p/q and (n,k) dominance, request, frequency, zero.

Source: the handbook of Hundepool et al., "Statistical Disclosure Control" (2012), ch. 4,
§4.2 ("Sensitive cells in magnitude tables", Table 4.x "Sensitivity rules" and "Upper protection
levels"); the tau-ARGUS manual's safety rules (``P``, ``NK``, ``FREQ``, ``REQ``, ``ZERO``,
``MIS``, ``WGT``). With ``x1 ≥ x2 ≥ …`` the contributions of a cell of value ``X`` (per
contributor, or per holding with ``holding=True``):

* p% rule ``P(p, n)`` — unsafe when ``X − x1 − … − x(n+1) < p/100 · x1`` (a coalition of the
  ``n`` next largest estimates the largest from above; ``n = 1``: the second largest alone). Its
  upper protection level is ``p/100 · x1 − (X − x1 − … − x(n+1))`` (Example 5 of §4.2);
* prior-posterior ``(p, q)`` rule — the same with ``p/q`` for ``p/100``;
* ``(n, k)`` dominance — unsafe when ``x1 + … + xn > k/100 · X``; protection level
  ``100/k · (x1 + … + xn) − X``;
* minimum frequency — unsafe when ``0 < contributors < n``; protection level ``range``% of ``X``
  (tau-ARGUS's frequency safety range; 0: only exact disclosure is prevented);
* request rule (foreign trade) — unsafe when a contributor that asked for protection contributes
  more than ``p``% of ``X`` (tau-ARGUS ``REQ``); protection level as for ``(1, p)``;
* zero rule — a cell with contributors and value 0 is unsafe (tau-ARGUS ``ZERO``), protection
  level the given range.

The lower protection level equals the upper one ("out of symmetry considerations", §4.2), at most
the cell's value when no contribution is negative (the intruder knows the cell is not negative).

**Negative values**: dominance is judged on absolute contributions and the sum of their absolute
values (GaussSuppression's documented choice; §4.2 "Negative contributions" advises a smaller
``p`` as well, which is the user's to choose).

**Sampling weights** (decimal), two readings of §4.2 "Sampling weights": ``"tauargus"`` — a
contribution ``x`` of weight ``w`` stands for ``w`` population units of value ``x`` (a fractional
weight a fraction of one unit), and the largest ``n`` "units" are the first ``n`` of mass in that
sorted expansion; ``"sample"`` — the largest sample contributions, unweighted, against the
weighted total ``X̂`` (eq. "p-percent-weighted"). Holdings and weights do not combine.

**Missing = safe**: cells with a missing code (given per variable) are never unsafe (tau-ARGUS
``MIS(1)``). A-priori statuses and given protection levels are production controls of the
suppression (:mod:`tabsafe.protect.magnitude`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tabsafe.errors import InputError, param
from tabsafe.model.contributions import Contributions
from tabsafe.params import Constraint

__all__ = ["DominanceAssessment", "DominanceRules", "NKRule", "PRule", "RuleList", "assess_dominance", "parse_rules",
           "top_sums"]

WEIGHTINGS = ("tauargus", "sample")


@dataclass(frozen=True)
class PRule:
    """The p% rule (``q = 100``) or the prior-posterior (p, q) rule against a coalition of ``n``.

    Attributes:
        p: the percentage within which no contribution may be estimated (0 < p).
        q: the a-priori accuracy in percent (100: the p% rule).
        n: the intruders in the coalition (1: the second largest contributor alone).
        holding: apply the rule to holdings rather than to contributors.
    """

    p: float
    q: float = 100.0
    n: int = 1
    holding: bool = False

    def __post_init__(self) -> None:
        if not (self.p > 0 and np.isfinite(self.p)):
            raise InputError(f"{param('p')} of the p% rule must be positive; got {self.p!r}")
        if not (0 < self.q <= 100):
            raise InputError(f"{param('q')} of the (p,q) rule must be in (0, 100]; got {self.q!r}")
        if int(self.n) != self.n or self.n < 1:
            raise InputError(f"the coalition {param('n')} of the p% rule must be a whole number >= 1; got {self.n!r}")

    @property
    def name(self) -> str:
        q = "" if self.q == 100 else f",q={self.q:g}"
        return f"p{self.p:g}{q}" + (f",n={self.n}" if self.n != 1 else "") + (" holding" if self.holding else "")


@dataclass(frozen=True)
class NKRule:
    """The (n, k) dominance rule: the ``n`` largest contributions exceed ``k``% of the cell.

    Attributes:
        n: how many largest contributions (>= 1).
        k: the percentage (0 < k < 100).
        holding: apply the rule to holdings.
    """

    n: int
    k: float
    holding: bool = False

    def __post_init__(self) -> None:
        if int(self.n) != self.n or self.n < 1:
            raise InputError(f"{param('n')} of the (n,k) rule must be a whole number >= 1; got {self.n!r}")
        if not (0 < self.k < 100):
            raise InputError(f"{param('k')} of the (n,k) rule must be in (0, 100); got {self.k!r}")

    @property
    def name(self) -> str:
        return f"nk{self.n},{self.k:g}" + (" holding" if self.holding else "")


@dataclass(frozen=True, kw_only=True)
class DominanceRules:
    """The primary rules of a magnitude table (module docstring); several of each may be given.

    Attributes:
        p: p% and (p, q) rules.
        nk: (n, k) dominance rules.
        min_freq: minimum number of contributors (0 < contributors < min_freq is unsafe).
        min_freq_holding: the same, counting holdings.
        freq_range: protection level of frequency-unsafe cells, in percent of the cell value.
        request: the request rule's percentage (cells where a contributor that asked for
            protection contributes more than this share).
        zero_range: the zero rule's protection level (a cell with contributors and value 0 is
            unsafe); None: zero cells are safe.
        missing: per variable, codes whose cells are always safe ("missing = safe").
        weighting: how sampling weights enter the rules: ``tauargus`` or ``sample``.
    """

    p: tuple[PRule, ...] = ()
    nk: tuple[NKRule, ...] = ()
    min_freq: int | None = None
    min_freq_holding: int | None = None
    freq_range: float = 0.0
    request: float | None = None
    zero_range: float | None = None
    missing: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    weighting: str = "tauargus"

    def __post_init__(self) -> None:
        object.__setattr__(self, "p", tuple(self.p))
        object.__setattr__(self, "nk", tuple(self.nk))
        if self.weighting not in WEIGHTINGS:
            raise InputError(f"{param('weighting')} must be one of {', '.join(WEIGHTINGS)}; got {self.weighting!r}")
        for name in ("min_freq", "min_freq_holding"):
            v = getattr(self, name)
            if v is not None and (int(v) != v or v < 0):
                raise InputError(f"{param(name)} must be a whole number >= 0; got {v!r}")
        if self.freq_range < 0 or (self.zero_range is not None and self.zero_range < 0):
            raise InputError(f"{param('freq_range')} and {param('zero_range')} must not be negative")
        if self.request is not None and not (0 < self.request < 100):
            raise InputError(f"{param('request')} must be a percentage in (0, 100); got {self.request!r}")
        if not self.names:
            raise InputError(f"no magnitude rule given: give a p% rule ({param('p')}), an (n,k) rule "
                             f"({param('nk')}), {param('min_freq')}, {param('request')} or {param('zero_range')}")

    @property
    def names(self) -> tuple[str, ...]:
        """The flag columns these rules produce, in order."""
        out = [r.name for r in self.p] + [r.name for r in self.nk]
        if self.min_freq:
            out.append("frequency")
        if self.min_freq_holding:
            out.append("frequency holding")
        if self.request is not None:
            out.append("request")
        if self.zero_range is not None:
            out.append("zero")
        return tuple(out)

    def params(self) -> dict[str, Any]:
        return {
            "p": [[r.p, r.q, r.n, r.holding] for r in self.p], "nk": [[r.n, r.k, r.holding] for r in self.nk],
            "min_freq": self.min_freq, "min_freq_holding": self.min_freq_holding, "freq_range": self.freq_range,
            "request": self.request, "zero_range": self.zero_range,
            "missing": {k: list(v) for k, v in self.missing.items()}, "weighting": self.weighting,
        }


def top_sums(c: Contributions, n: int, *, weighted: bool = True) -> np.ndarray:
    """Per cell, the sums of its ``1..n`` largest contributions by absolute value: ``(cells, n)``.

    ``weighted``: a contribution of weight ``w`` counts as ``w`` units (a fractional weight as a
    fraction of a unit), so the ``j`` largest are the first ``j`` of mass in the sorted expansion
    (tau-ARGUS, handbook §4.2 "Sampling weights"); otherwise each contribution is one unit.
    """
    amount = np.abs(c.amount)
    mass = c.weight if weighted else np.ones_like(amount)
    cells = np.repeat(np.arange(c.n_cells), np.diff(c.ptr))
    before = np.cumsum(mass) - mass
    start = np.repeat(c.ptr[:-1], np.diff(c.ptr))
    before = before - np.concatenate([[0.0], np.cumsum(mass)])[start]  # mass ahead of the entry in its cell
    out = np.zeros((c.n_cells, n))
    for j in range(1, n + 1):
        take = np.clip(j - before, 0.0, mass)  # how much of the entry falls in the first j units
        out[:, j - 1] = np.bincount(cells, weights=take * amount, minlength=c.n_cells)
    return out


@dataclass(frozen=True, eq=False)
class DominanceAssessment:
    """Which cells the rules flag and the protection each needs.

    Attributes:
        contributions: the assessed cells.
        rules: the rules.
        flags: rule name -> mask per grid cell.
        upper, lower: per cell, the upper and lower protection levels (0 where safe).
    """

    contributions: Contributions
    rules: DominanceRules
    flags: Mapping[str, np.ndarray]
    upper: np.ndarray
    lower: np.ndarray

    @property
    def unsafe(self) -> np.ndarray:
        out = np.zeros(self.contributions.n_cells, dtype=bool)
        for m in self.flags.values():
            out |= m
        return out

    def summary(self) -> dict[str, Any]:
        """Cells flagged per rule (private: the count of primary cells says which are small)."""
        return {"cells": self.contributions.n_cells, "unsafe": int(self.unsafe.sum()),
                "rules": {k: int(v.sum()) for k, v in self.flags.items()}, "params": self.rules.params()}


def _concentration(c: Contributions, rules: DominanceRules, holding: bool,
                   flags: dict[str, np.ndarray], level: np.ndarray) -> None:
    """The p%, (p,q) and (n,k) rules at one level (contributors or holdings)."""
    p_rules = [r for r in rules.p if r.holding == holding]
    nk_rules = [r for r in rules.nk if r.holding == holding]
    if not p_rules and not nk_rules:
        return
    n_max = max([r.n + 1 for r in p_rules] + [r.n for r in nk_rules])
    tauargus = rules.weighting == "tauargus"
    tops = top_sums(c, n_max, weighted=tauargus and c.weighted)
    cells = np.repeat(np.arange(c.n_cells), np.diff(c.ptr))
    total = np.bincount(cells, weights=np.abs(c.amount) * c.weight, minlength=c.n_cells)  # X (absolute values)
    nonempty = ~c.empty
    for r in p_rules:
        x1 = tops[:, 0]
        rest = total - tops[:, r.n]
        need = r.p / r.q * x1 - rest
        flag = nonempty & (need > 0) & (x1 > 0)
        flags[r.name] = flag
        np.maximum(level, np.where(flag, need, 0.0), out=level)
    for r in nk_rules:
        top = tops[:, r.n - 1]
        need = 100.0 / r.k * top - total
        flag = nonempty & (top > r.k / 100.0 * total) & (top > 0)
        flags[r.name] = flag
        np.maximum(level, np.where(flag, need, 0.0), out=level)


def _request(c: Contributions, percent: float) -> tuple[np.ndarray, np.ndarray]:
    """The request rule: the largest requesting contributor of each cell against ``percent``."""
    cells = np.repeat(np.arange(c.n_cells), np.diff(c.ptr))
    share = np.where(c.requested, np.abs(c.amount) * c.weight, 0.0)
    largest = np.zeros(c.n_cells)
    np.maximum.at(largest, cells, share)
    total = np.bincount(cells, weights=np.abs(c.amount) * c.weight, minlength=c.n_cells)
    flag = (largest > 0) & (largest > percent / 100.0 * total)
    return flag, np.where(flag, 100.0 / percent * largest - total, 0.0)


def _missing_cells(c: Contributions, missing: Mapping[str, Sequence[str]]) -> np.ndarray:
    out = np.zeros(c.n_cells, dtype=bool)
    table = c.table()
    for var, codes in missing.items():
        axis = table.axis(var)
        h = c.dimensions[axis].hierarchy
        unknown = [x for x in codes if x not in h.position]
        if unknown:
            raise InputError(f"missing code {unknown[0]!r} is not a code of {var!r}")
        pos = np.array([h.position[x] for x in codes], dtype=np.int64)
        out |= np.isin(np.asarray(table.positions(axis)), pos)
    return out


def assess_dominance(c: Contributions, rules: DominanceRules) -> DominanceAssessment:
    """Run the magnitude rules (module docstring) on every cell of ``c``'s grid.

    >>> import pandas as pd
    >>> from tabsafe.model.contributions import contributions
    >>> data = pd.DataFrame({"r": ["a", "a", "a", "b", "b"], "x": [300.0, 20, 10, 50, 60]})
    >>> a = assess_dominance(contributions(data, ["r"], value="x"), DominanceRules(nk=(NKRule(1, 85),)))
    >>> a.unsafe.tolist(), round(float(a.upper[1]), 2)  # Total, a, b: cell a is 300 of 330
    ([False, True, False], 22.94)
    """
    flags: dict[str, np.ndarray] = {}
    level = np.zeros(c.n_cells)
    _concentration(c, rules, False, flags, level)
    held = c.at_holdings()
    if any(r.holding for r in (*rules.p, *rules.nk)) or rules.min_freq_holding:
        if c.holdings.size == 0:
            raise InputError("a holding rule needs holdings: give the holding column")
        _concentration(held, rules, True, flags, level)
    x = np.abs(c.value)
    if rules.min_freq:
        flag = (c.contributors > 0) & (c.contributors < rules.min_freq)
        flags["frequency"] = flag
        np.maximum(level, np.where(flag, rules.freq_range / 100.0 * x, 0.0), out=level)
    if rules.min_freq_holding:
        flag = (held.contributors > 0) & (held.contributors < rules.min_freq_holding)
        flags["frequency holding"] = flag
        np.maximum(level, np.where(flag, rules.freq_range / 100.0 * x, 0.0), out=level)
    if rules.request is not None:
        flags["request"], need = _request(c, rules.request)
        np.maximum(level, need, out=level)
    if rules.zero_range is not None:
        flag = ~c.empty & (c.value == 0)
        flags["zero"] = flag
        np.maximum(level, np.where(flag, rules.zero_range, 0.0), out=level)
    if rules.missing:
        safe = _missing_cells(c, rules.missing)
        flags = {k: v & ~safe for k, v in flags.items()}
    unsafe = np.zeros(c.n_cells, dtype=bool)
    for m in flags.values():
        unsafe |= m
    upper = np.where(unsafe, level, 0.0)
    lower = upper if c.negative else np.minimum(upper, np.maximum(c.value, 0.0))
    return DominanceAssessment(c, rules, flags, upper, lower)


# ------------------------------------------------------------------ rules as text (the CLI's --rule)

#: rule kinds in text and the numbers each takes (at least, at most)
RULE_SYNTAX = {"p": (1, 2), "pq": (2, 3), "nk": (2, 2), "freq": (1, 2), "request": (1, 1), "zero": (1, 1)}
RULE_HELP = ("p:P[,N] (p%% rule against a coalition of N), pq:P,Q[,N] ((p,q) rule), nk:N,K ((n,k) dominance), "
             "freq:N[,RANGE] (minimum contributors; RANGE%% protection), request:PCT, zero:RANGE; add :holding to "
             "apply p, pq, nk or freq to holdings")


def _rule_texts(items: Sequence[str]) -> tuple[str, ...]:
    """Rules from comma-separated pieces: a piece that does not start with ``kind:`` continues the
    rule before it (``nk:2,85`` arrives as ``nk:2`` and ``85`` from a comma-separated option)."""
    out: list[str] = []
    for piece in (p.strip() for p in items):
        if ":" in piece and piece.split(":", 1)[0].strip().lower() in RULE_SYNTAX:
            out.append(piece)
        elif out and piece:
            out[-1] += "," + piece
        else:
            raise InputError(f"{param('rule')}: {piece!r} is not a rule; give {RULE_HELP.replace('%%', '%')}")
    return tuple(out)


def _one_rule(text: str) -> tuple[str, tuple[float, ...], bool]:
    """``nk:2,85:holding`` → ``("nk", (2.0, 85.0), True)``; one line naming ``--rule`` when wrong."""
    kind, _, rest = text.partition(":")
    kind = kind.strip().lower()
    holding = False
    body, sep, tail = rest.rpartition(":")
    if sep:
        if tail.strip().lower() != "holding":
            raise InputError(f"{param('rule')} {text!r}: {tail.strip()!r} is not ':holding'")
        rest, holding = body, True
    if holding and kind not in {"p", "pq", "nk", "freq"}:
        raise InputError(f"{param('rule')} {text!r}: only p, pq, nk and freq rules apply to holdings")
    lo, hi = RULE_SYNTAX[kind]
    parts = [x.strip() for x in rest.split(",")]
    values = []
    for x in parts:
        try:
            v = float(x)
        except ValueError:
            raise InputError(f"{param('rule')} {text!r}: {x!r} is not a number") from None
        if not np.isfinite(v):
            raise InputError(f"{param('rule')} {text!r}: {x!r} is not a finite number")
        values.append(v)
    if not lo <= len(values) <= hi:
        need = str(lo) if lo == hi else f"{lo} or {hi}"
        raise InputError(f"{param('rule')} {text!r}: a {kind} rule takes {need} numbers")
    return kind, tuple(values), holding


def parse_rules(texts: Sequence[str], *, missing: Mapping[str, tuple[str, ...]] | None = None,
                weighting: str = "tauargus") -> DominanceRules:
    """The :class:`DominanceRules` that rule texts (``p:15``, ``nk:2,85:holding``…; :data:`RULE_HELP`)
    state. Each error is one line naming ``--rule``.

    >>> r = parse_rules(["p:15", "nk:2,85:holding", "freq:3"])
    >>> r.names
    ('p15', 'nk2,85 holding', 'frequency')
    """
    p: list[PRule] = []
    nk: list[NKRule] = []
    kw: dict[str, Any] = {}
    for text in _rule_texts(texts):
        kind, v, holding = _one_rule(text)
        try:
            if kind in {"p", "pq"}:
                q = v[1] if kind == "pq" else 100.0
                if kind == "pq" and not v[0] < q:
                    # the intruder's prior is already within q%: a p at or above q asks more than ignorance
                    raise InputError(f"p must be less than q (the prior's accuracy); got p={v[0]:g}, q={q:g}")
                n = v[-1] if len(v) == (3 if kind == "pq" else 2) else 1.0
                p.append(PRule(v[0], q, _whole(n, text), holding))
            elif kind == "nk":
                nk.append(NKRule(_whole(v[0], text), v[1], holding))
        except InputError as exc:
            raise InputError(f"{param('rule')} {text!r}: {_bare(exc)}") from None
        if kind in {"p", "pq", "nk"}:
            continue
        if kind == "freq":
            name = "min_freq_holding" if holding else "min_freq"
            if name in kw:
                raise InputError(f"{param('rule')} {text!r}: a second freq rule{' for holdings' if holding else ''}")
            if not float(v[0]).is_integer() or v[0] < 1:
                raise InputError(f"{param('rule')} {text!r}: the number of contributors must be a whole number >= 1")
            kw[name] = int(v[0])
            rng = v[1] if len(v) > 1 else 0.0
            if kw.get("freq_range", rng) != rng:
                raise InputError(f"{param('rule')} {text!r}: the freq rules give two protection ranges")
            kw["freq_range"] = rng
        else:
            key = "request" if kind == "request" else "zero_range"
            if key in kw:
                raise InputError(f"{param('rule')} {text!r}: a second {kind} rule")
            kw[key] = v[0]
    return DominanceRules(p=tuple(p), nk=tuple(nk), missing=dict(missing or {}), weighting=weighting, **kw)


def _whole(x: float, text: str) -> int:
    if not float(x).is_integer() or x < 1:
        raise InputError(f"{param('rule')} {text!r}: {x:g} is not a whole number of contributors >= 1")
    return int(x)


def _bare(exc: InputError) -> str:
    """An error's text with its parameter marks removed (the rule's own fields are not options)."""
    return exc.render(lambda name: name)


class RuleList(Constraint):
    """The ``rule`` parameter: rule texts (:func:`parse_rules`), one per item or comma-separated
    with the option repeated (``--rule p:15 --rule nk:2,85``)."""

    allowed = "a list of magnitude rules"
    metavar = "RULE"

    def check(self, name: str, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = value.split(",")
        if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
            raise InputError(f"parameter {param(name)} must be {self.allowed} ({RULE_HELP.replace('%%', '%')}); "
                             f"got {value!r}")
        texts = _rule_texts([piece for v in value for piece in v.split(",")])
        for t in texts:
            _one_rule(t)
        return texts

    def to_json(self, value: Any) -> Any:
        return list(value)

    @property
    def repeatable(self) -> bool:
        return True
