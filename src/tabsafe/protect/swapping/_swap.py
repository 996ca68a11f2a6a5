"""The swapping procedure shared by targeted and random record swapping.

Targeted record swapping, seed 000 §5.6.1 (METHODS.md §8), on households:

1. Risk. For each level ``k`` of the geography ``G1 ≻ … ≻ GK`` and each record, ``c_k`` is the
   number of records with the same values of the risk variables in the record's area at level
   ``k``, and its risk is ``r_k = 1/c_k``; a household's risk is the largest of its members' (the
   seed's rule for swapping whole dwellings). A household is *risky* at level ``k`` when a member
   has ``c_k < k`` (k-anonymity; ``r > 1/k``), or, with a threshold ``r_high``, when its risk is
   ``r_k ≥ r_high`` (the seed's step 2). The risk may instead be given with the data (a column of
   per-record risks, one for every level or one per level; sdcMicro's ``risk``), risky then at
   ``r_k ≥ r_high``; or a flag variable may mark the records of small cells (the ONS targeting),
   whose households are risky at the lowest level (risk 1 there, 0 elsewhere).
2. Top level. Every risky household at level 1 is swapped with a donor from a different level-1
   area (anywhere in the population) that has its similarity profile and was not swapped yet,
   sampled with probability proportional to the donor's risk at level 1. When no donor has the
   first profile, the next profile is tried, and so on.
3. Levels 2..K. Every risky household at level ``k`` not swapped yet (including one that found
   no donor above: it is protected as far down as a donor exists) is swapped likewise with a
   donor from a different level-``k`` area: from anywhere in the population (``donors =
   anywhere``, the seed's step 3 and sdcMicro's rule, the default), or from the same top-level
   area (``donors = same-top-area``: every top-level count stays exact and the work splits per
   top-level area, which Spark runs in parallel). Each top-level area draws from its own random
   stream (:mod:`._matching`) either way.
4. Top-up at level K. The *swap rate* ``p`` is the share of households swapped, both households
   of a pair counted (sdcMicro's ``swaprate``; seed 000: "``p×N`` overall swaps"): each
   top-level area needs ``ceil(p × its households / 2)`` pairs. The *pair rate* ``P`` (tabsafe's
   earlier meaning of the swap rate) is the share of households sampled, each with a partner, so
   about ``2P`` change geography (seed 002 §3.1: 5% sampled + their partners = 10%): the area
   needs ``ceil(P × its households)`` pairs. Pairs count for the top-level area of the household
   sampled (a donor does not count for its own area); when the targeted swaps fall short,
   further households are sampled with probability proportional to their risk at level K and
   swapped with a donor from a different level-K area (anywhere, or in the same top-level area,
   as in step 3), until the area has its share or no household left has a donor. With one level
   the top-up runs over the whole population. Targeted swaps are made whatever the rate: when
   they exceed twice the rate, the report says so and why.
5. Swap. The two households of a pair exchange every geography variable (and the carry-along
   variables), for all their members.

Donors are always free: a household is swapped at most once. Risky households without a donor at
a level are counted per level (and per profile tried); nothing is silent.

Random record swapping (seed 002 §3.1, seed 004 §3.1) is the same procedure without risk: no
targeted stages, the top-up samples households uniformly and pairs them uniformly within the
top-level area (the control stratum, with the similarity profile as the further control
variables) from a different lowest-level area.

**How the work splits** (what lets an engine run it area by area, issue #18). Step 2 is the only
step that looks across top-level areas: :func:`top_level` pairs the households risky at level 1,
drawing from the population's random stream. Steps 3–4 look inside one top-level area only and
draw from that area's stream, so :func:`swap_within` gives each area the same result whether it
is given every area at once (this module) or one area at a time (Spark,
:mod:`tabsafe.protect.swapping._spark`); its report numbers (:class:`Tally`) add up across
areas. :func:`report` turns the sum into the report's figures, the same for every engine.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from tabsafe._arrow import from_numpy, strings
from tabsafe.errors import InputError, param
from tabsafe.protect.swapping._matching import Donors, donors, draws_by_area, draws_global, es_key, match
from tabsafe.protect.swapping._population import (
    Codes,
    Households,
    check_columns,
    check_constant,
    check_nesting,
    column_codes,
    combine,
    group_counts,
    households,
)

#: the roles a swapped household plays, as the evaluation names them
TARGETED, TOP_UP, DONOR = "targeted", "top-up", "donor"
ROLES = (TARGETED, TOP_UP, DONOR)


#: donor scopes below the top level: any other area (seed 000 §5.6.1 step 3, sdcMicro) or the same top-level area
ANYWHERE, SAME_TOP_AREA = "anywhere", "same-top-area"
DONOR_SCOPES = (ANYWHERE, SAME_TOP_AREA)
#: donor weight of a household without risk: after every household with risk, in random order
_NO_RISK_WEIGHT = 1e-12


@dataclass(frozen=True)
class SwapSpec:
    """What to swap and how (the parameters of the swapping methods).

    Attributes:
        geography: geography variables, top level first.
        risk_vars: risk variables (None: random swapping, no targeting; empty: the risk comes
            from ``risk`` or ``flag``).
        k: a household is risky at a level when a member's risk-variable combination occurs
            fewer than ``k`` times in its area there (unless ``risk_threshold`` is given).
        swaprate: share of households swapped, both of a pair counted (sdcMicro's meaning).
        similar: similarity profiles in the order tried; () means any household matches.
        carry_along: variables that travel with the geography.
        household: the household variable (None: every record is its own household).
        donors: where donors below the top level come from (:data:`DONOR_SCOPES`).
        pairrate: when given, the share of households sampled for swapping, each with a partner
            (used instead of ``swaprate``).
        risk: per-record risk columns given with the data: one for every level or one per level.
        risk_threshold: ``r_high``: a household is risky at a level when its risk there is at
            least this (with ``risk``, required; with ``risk_vars``, instead of ``k``).
        flag: a variable marking records in small cells (true or 1): their households are risky
            at the lowest level.
    """

    geography: tuple[str, ...]
    risk_vars: tuple[str, ...] | None
    k: int
    swaprate: float
    similar: tuple[tuple[str, ...], ...] = ()
    carry_along: tuple[str, ...] = ()
    household: str | None = None
    donors: str = SAME_TOP_AREA
    pairrate: float | None = None
    risk: tuple[str, ...] = ()
    risk_threshold: float | None = None
    flag: str | None = None

    @property
    def targeted(self) -> bool:
        return self.risk_vars is not None

    @property
    def anywhere(self) -> bool:
        """Donors below the top level come from anywhere (the work does not split per top-level area)."""
        return self.donors == ANYWHERE

    @property
    def profiles(self) -> tuple[tuple[str, ...], ...]:
        """The similarity profiles tried, in order (one empty profile: any household)."""
        return self.similar or ((),)

    def target_pairs(self, households: np.ndarray) -> np.ndarray:
        """Pairs the rate asks for in scopes of ``households`` households (step 4)."""
        if self.pairrate is not None:
            return np.ceil(self.pairrate * households - 1e-9).astype(np.int64)
        return np.ceil(self.swaprate * households / 2 - 1e-9).astype(np.int64)

    def risk_rule(self) -> str:
        """What makes a household risky, in words (for notes)."""
        if self.flag is not None:
            return f"a member flagged by {self.flag} (at {self.geography[-1]})"
        if self.risk:
            return f"risk from {','.join(self.risk)} of at least {self.risk_threshold:g}"
        if self.risk_threshold is not None:
            return f"risk 1/count of {','.join(self.risk_vars or ())} of at least {self.risk_threshold:g}"
        return f"a combination of {','.join(self.risk_vars or ())} shared by fewer than {self.k} in the area"


@dataclass(frozen=True)
class SwapResult:
    """The swapped records, what happened to each, and the report's numbers."""

    data: pa.Table
    evaluation: pa.Table
    figures: dict[str, Any]
    private: dict[str, Any]
    notes: tuple[str, ...]


def profile_name(profile: Sequence[str]) -> str:
    return ",".join(profile) if profile else "(any)"


def check_spec(columns: Sequence[str], spec: SwapSpec, where: str) -> None:
    """The variables exist and play one role each (``columns``: the data's, in order)."""
    wanted = [(v, "geography") for v in spec.geography]
    wanted += [(v, "risk_vars") for v in spec.risk_vars or ()]
    wanted += [(v, "similar") for prof in spec.similar for v in prof]
    wanted += [(v, "carry_along") for v in spec.carry_along]
    wanted += [(v, "risk") for v in dict.fromkeys(spec.risk)]
    if spec.flag is not None:
        wanted.append((spec.flag, "flag"))
    if spec.household is not None:
        wanted.append((spec.household, "household"))
    check_columns(list(columns), wanted, where=where)
    check_risk_options(spec)
    geo = set(spec.geography)
    for prof in spec.similar:
        clash = geo.intersection(prof)
        if clash:
            raise InputError(f"{min(clash)!r} is a geography variable: it cannot be in {param('similar')} "
                             "(a pair must come from different areas)")
    clash = geo.intersection(spec.carry_along)
    if clash:
        raise InputError(f"{min(clash)!r} is a geography variable: it travels anyway; drop it from "
                         f"{param('carry_along')}")
    if spec.household is not None:
        for option, names in (("geography", spec.geography), ("risk_vars", spec.risk_vars or ()),
                              ("carry_along", spec.carry_along),
                              ("similar", tuple(v for p in spec.similar for v in p))):
            if spec.household in names:
                raise InputError(f"the household variable {spec.household!r} cannot be in {param(option)}")


def check_risk_options(spec: SwapSpec) -> None:
    """Exactly one source of risk for targeted swapping, with the threshold it needs."""
    if not spec.targeted:
        return
    sources = [name for name, given in (("risk_vars", bool(spec.risk_vars)), ("risk", bool(spec.risk)),
                                        ("flag", spec.flag is not None)) if given]
    if len(sources) != 1:
        raise InputError(f"targeted swapping needs exactly one source of risk: {param('risk_vars')} "
                         f"(k-anonymity), {param('risk')} (risk columns) or {param('flag')} (a small-cell flag)"
                         + (f"; got {', '.join(param(s) for s in sources)}" if sources else ""))
    if spec.risk and len(spec.risk) not in (1, len(spec.geography)):
        raise InputError(f"{param('risk')} gives one column for every level or one per level of "
                         f"{param('geography')} ({len(spec.geography)}); got {len(spec.risk)}")
    if spec.risk and spec.risk_threshold is None:
        raise InputError(f"{param('risk')} needs {param('risk_threshold')} (r_high: households whose risk is at "
                         "least this are swapped)")
    if spec.flag is not None and spec.risk_threshold is not None:
        raise InputError(f"{param('risk_threshold')} does not apply to {param('flag')} (flagged households are "
                         "the risky ones)")


# ------------------------------------------------------------------------------ households
@dataclass(frozen=True, eq=False)
class HouseholdCodes:
    """What the procedure knows of each household, households in identifier order: the whole
    population, or the households of some top-level areas.

    Attributes:
        geo: per level, each household's area (equal ids: the same area); ``geo[0]`` indexes
            ``top_labels``.
        top_labels: the top level's codes; they name the areas' random streams.
        profiles: per similarity profile, each household's combination (equal ids: the same
            profile; one all-zero array when any household matches).
        risk: per level, the household's risk there: the largest of its members' (``1/count`` of
            their risk-variable combination in the area, a given risk, or the flag); empty for
            random swapping and for no records. It orders candidates (most at risk first) and
            weights donors.
        at_risk: per level, whether the household is risky there (step 1's rule).
        size: records per household.
    """

    geo: tuple[np.ndarray, ...]
    top_labels: tuple[str, ...]
    profiles: tuple[np.ndarray, ...]
    risk: tuple[np.ndarray, ...]
    at_risk: tuple[np.ndarray, ...]
    size: np.ndarray

    @property
    def n(self) -> int:
        return int(self.size.size)


def household_codes(table: pa.Table, spec: SwapSpec, *, where: str) -> tuple[Households, HouseholdCodes]:
    """Check the records and code them per household (step 1: the risk counts per level).

    The checks, in this order (the first failing one is the error): missing household ids,
    missing geography codes, a geography that does not nest, a household in two areas, missing
    or varying carry-along values, missing similarity and risk values."""
    n = table.num_rows
    hh = households(table, spec.household, option="household", where=where)
    levels = [column_codes(table, v, option="geography", where=where) for v in spec.geography]
    check_nesting(levels, spec.geography, option="geography", where=where)
    if n:
        check_constant(table, hh, levels[-1], spec.geography[-1], what="has members in different areas", where=where)
    carried = [column_codes(table, v, option="carry_along", where=where) for v in spec.carry_along]
    for name, codes in zip(spec.carry_along, carried):
        check_constant(table, hh, codes, name, what="has two values of a variable carried along with the geography",
                       where=where)
    del carried
    H = hh.n
    profiles = []
    for prof in spec.profiles:
        codes = [column_codes(table, v, option="similar", where=where) for v in prof]
        ids, _ = combine([c.codes[hh.first] for c in codes], [c.n for c in codes], H)
        profiles.append(ids)
        del codes
    risk, at_risk = household_risk(table, hh, levels, spec, where=where) if spec.targeted and n else ((), ())
    geo = tuple(lv.codes[hh.first] for lv in levels)
    return hh, HouseholdCodes(geo=geo, top_labels=tuple(levels[0].labels), profiles=tuple(profiles),
                              risk=risk, at_risk=at_risk, size=hh.size)


def household_risk(table: pa.Table, hh: Households, levels: Sequence[Codes], spec: SwapSpec, *,
                   where: str) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """Step 1: per level, each household's risk (the largest of its members') and whether it is
    risky there."""
    K = len(levels)
    if spec.flag is not None:
        flagged = hh.reduce(np.maximum, _flag_values(table, spec.flag, where=where))
        zero = np.zeros(hh.n, dtype=np.float64)
        risk = tuple([zero] * (K - 1) + [flagged.astype(np.float64)])
        return risk, tuple(r > 0 for r in risk)
    if spec.risk:
        names = spec.risk if len(spec.risk) == K else spec.risk * K
        cache: dict[str, np.ndarray] = {}
        for name in names:
            if name not in cache:
                cache[name] = hh.reduce(np.maximum, _risk_values(table, name, where=where))
        risk = tuple(cache[name] for name in names)
        assert spec.risk_threshold is not None  # check_risk_options
        return risk, tuple(r >= spec.risk_threshold for r in risk)
    # k-anonymity: the smallest count among a household's members
    rv: list[Codes] = [column_codes(table, v, option="risk_vars", where=where) for v in spec.risk_vars or ()]
    combo, n_combo = combine([c.codes for c in rv], [c.n for c in rv], table.num_rows)
    del rv
    risks, risky = [], []
    for lv in levels:
        ids, n_ids = combine([lv.codes, combo], [lv.n, n_combo], table.num_rows)
        min_count = hh.reduce(np.minimum, group_counts(ids, n_ids))
        del ids
        r = 1.0 / min_count
        risks.append(r)
        risky.append(r >= spec.risk_threshold if spec.risk_threshold is not None else min_count < spec.k)
    return tuple(risks), tuple(risky)


def _risk_values(table: pa.Table, name: str, *, where: str) -> np.ndarray:
    """A risk column's values: numbers, none missing, none negative."""
    col = table.column(name)
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_decimal(col.type)):
        raise InputError(f"variable {name!r} in {param('risk')} must hold numbers (risks); it holds {col.type}",
                         where=where)
    if col.null_count:
        raise InputError(f"variable {name!r} in {param('risk')} has {col.null_count:,} missing values", where=where)
    values = np.asarray(col.cast(pa.float64()).to_numpy(), dtype=np.float64)
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        raise InputError(f"variable {name!r} in {param('risk')} must hold risks of 0 or more; row "
                         f"{int(np.flatnonzero(bad)[0]) + 1:,} has {values[bad][0]!r}", where=where)
    return values


def _flag_values(table: pa.Table, name: str, *, where: str) -> np.ndarray:
    """A flag column's values as 0/1: booleans, or integers 0 and 1."""
    col = table.column(name)
    if col.null_count:
        raise InputError(f"variable {name!r} in {param('flag')} has {col.null_count:,} missing values", where=where)
    if pa.types.is_boolean(col.type):
        return np.asarray(col.to_numpy(), dtype=np.int8)
    if pa.types.is_integer(col.type):
        values = np.asarray(col.to_numpy(), dtype=np.int64)
        if ((values != 0) & (values != 1)).any():
            raise InputError(f"variable {name!r} in {param('flag')} must hold 0 or 1 (or true/false); it holds "
                             f"{int(values[(values != 0) & (values != 1)][0])}", where=where)
        return values.astype(np.int8)
    raise InputError(f"variable {name!r} in {param('flag')} must hold true/false or 0/1; it holds {col.type}",
                     where=where)


# ------------------------------------------------------------------------------ the report's numbers
def _add(a: list[int], b: Sequence[int]) -> list[int]:
    return [x + y for x, y in zip(a, b)] if a else list(b)


@dataclass
class Tally:
    """The report's numbers for part of the population. Parts add up (:meth:`merge`): counts
    are summed, matching rounds (per step) take the largest — the areas' matchings run side by
    side, as they do when every area is matched at once.

    Attributes:
        households, records, records_swapped: sizes.
        ever_risky, risky_unswapped: households risky at some level, and those left unswapped.
        targeted_pairs, top_up_pairs: pairs made, by the role of the household sampled.
        levels: per level index (as text), the targeted stage's numbers: ``pairs``,
            ``candidates``, ``no_donor``, ``risky_households`` and per profile ``pairs_by_profile``,
            ``no_donor_under_profile`` (lists in profile order).
        top_up: the top-up's ``pairs_by_profile``, ``candidates``, ``no_donor``,
            ``no_donor_under_profile``.
        scopes: per top-level area (or ``(all)``), ``[swaps the rate asks for, swaps counted]``.
        rounds: per matching step, the rounds it took.
        moved: per level, records whose area at that level changed.
    """

    households: int = 0
    records: int = 0
    records_swapped: int = 0
    ever_risky: int = 0
    risky_unswapped: int = 0
    targeted_pairs: int = 0
    top_up_pairs: int = 0
    levels: dict[str, dict[str, Any]] = field(default_factory=dict)
    top_up: dict[str, Any] = field(default_factory=dict)
    scopes: dict[str, list[int]] = field(default_factory=dict)
    rounds: dict[str, int] = field(default_factory=dict)
    moved: list[int] = field(default_factory=list)

    def merge(self, other: Tally) -> Tally:
        """The numbers of both parts (a new tally)."""
        out = Tally(**{f: getattr(self, f) + getattr(other, f) for f in (
            "households", "records", "records_swapped", "ever_risky", "risky_unswapped", "targeted_pairs",
            "top_up_pairs")})
        out.levels = {k: dict(v) for k, v in self.levels.items()}
        for k, row in other.levels.items():
            mine = out.levels.get(k)
            out.levels[k] = dict(row) if mine is None else {
                name: (_add(mine[name], value) if isinstance(value, list) else mine[name] + value)
                for name, value in row.items()}
        out.top_up = dict(self.top_up)
        for name, value in other.top_up.items():
            mine = out.top_up.get(name)
            out.top_up[name] = value if mine is None else (_add(mine, value) if isinstance(value, list)
                                                          else mine + value)
        out.scopes = {k: list(v) for k, v in self.scopes.items()}
        for k, (target, counted) in other.scopes.items():
            t, c = out.scopes.get(k, (0, 0))
            out.scopes[k] = [t + target, c + counted]
        out.rounds = dict(self.rounds)
        for k, r in other.rounds.items():
            out.rounds[k] = max(out.rounds.get(k, 0), r)
        out.moved = _add(list(self.moved), other.moved) if other.moved else list(self.moved)
        return out

    @classmethod
    def total(cls, parts: Iterable[Tally]) -> Tally:
        out = cls()
        for part in parts:
            out = out.merge(part)
        return out

    def to_json(self) -> str:
        return json.dumps(self.__dict__, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Tally:
        return cls(**json.loads(text))


# ------------------------------------------------------------------------------ pairs
@dataclass
class _Log:
    """Pairs made so far and the rounds each matching took (mutable while the procedure runs)."""

    cand: list[np.ndarray] = field(default_factory=list)
    donor: list[np.ndarray] = field(default_factory=list)
    level: list[np.ndarray] = field(default_factory=list)
    kind: list[np.ndarray] = field(default_factory=list)
    profile: list[np.ndarray] = field(default_factory=list)
    rounds: dict[str, int] = field(default_factory=dict)

    def add(self, cand: np.ndarray, donor: np.ndarray, level: int, kind: int, profile: int) -> None:
        self.cand.append(cand)
        self.donor.append(donor)
        self.level.append(np.full(cand.size, level, dtype=np.int16))
        self.kind.append(np.full(cand.size, kind, dtype=np.int8))
        self.profile.append(np.full(cand.size, profile, dtype=np.int16))

    def pairs(self) -> Pairs:
        def cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
            return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)

        return Pairs(cat(self.cand, np.int64), cat(self.donor, np.int64), cat(self.level, np.int16),
                     cat(self.kind, np.int8), cat(self.profile, np.int16))


@dataclass(frozen=True, eq=False)
class Pairs:
    """Pairs made: the household sampled (``cand``) and its donor (indices of the households
    given), the level index, the kind (0 targeted, 1 top-up) and the profile index."""

    cand: np.ndarray
    donor: np.ndarray
    level: np.ndarray
    kind: np.ndarray
    profile: np.ndarray

    @classmethod
    def concat(cls, parts: Sequence[Pairs]) -> Pairs:
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("cand", "donor", "level", "kind",
                                                                              "profile")))



def _match_profiles(log: _Log, cand: np.ndarray, prepared: Sequence[Donors], free: np.ndarray, *, level: int,
                    kind: int, step: str) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Match ``cand`` profile by profile (fallbacks in order); returns the free mask, the
    candidates left without a donor and, per profile, how many had none under it. The rounds
    of profile ``p`` are logged as step ``{step}P{p}``."""
    unmatched_by_profile = []
    for p, d in enumerate(prepared):
        if cand.size == 0:
            unmatched_by_profile.append(0)
            continue
        m = match(cand, d, free)
        if m.rounds:
            log.rounds[f"{step}P{p}"] = m.rounds
        got = m.donor >= 0
        log.add(cand[got], m.donor[got], level, kind, p)
        free = m.free
        cand = cand[~got & free[cand]]  # neither matched nor taken as someone's donor
        unmatched_by_profile.append(int(cand.size))
    return free, cand, unmatched_by_profile


def _level_tally(profile: np.ndarray, n_profiles: int, *, risky: int, candidates: int, unmatched: list[int],
                 left: int) -> dict[str, Any]:
    """A targeted stage's numbers (``profile``: the profile of each pair it made)."""
    return {"pairs_by_profile": np.bincount(profile, minlength=n_profiles).astype(np.int64).tolist(), "risky_households": risky, "candidates": candidates,
            "no_donor_under_profile": unmatched, "no_donor": left}


# ------------------------------------------------------------------------------ step 2: the top level
@dataclass(frozen=True, eq=False)
class TopLevelInput:
    """The households the top level's matching looks at, in identifier order: the whole
    population, or (Spark) the risky ones with the heads of their groups' donor lists, which
    give the same pairs (:func:`heads_suffice`).

    Attributes:
        area: each household's top-level area.
        profiles: per similarity profile, each household's combination (the same ids across the
            population: the top level pairs households of different areas).
        risk: the household's risk at the top level (``1/count`` of its rarest risk combination
            there, or the risk given).
        at_risk: whether the household is risky at the top level.
        key: the donor key, ``es_key(donor_weight(risk), u)`` with ``u`` from block 0 of the
            population's stream (:func:`top_level_draws`).
        tiebreak: block 1 of the population's stream: candidates with equal counts are taken in
            this order.
    """

    area: np.ndarray
    profiles: tuple[np.ndarray, ...]
    risk: np.ndarray
    at_risk: np.ndarray
    key: np.ndarray
    tiebreak: np.ndarray


def donor_weight(risk: np.ndarray) -> np.ndarray:
    """Donors are drawn with probability proportional to their risk (seed 000 §5.6.1 step 4);
    households without risk come after every household with some, in random order."""
    return np.maximum(risk, _NO_RISK_WEIGHT)


def top_level_draws(seed: int, n_households: int, risk: np.ndarray, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The donor keys and tie-breaks of households ``start .. start+len(risk)-1`` (identifier
    order) of a population of ``n_households``: blocks 0 and 1 of the population's stream."""
    count = int(risk.size)
    key = es_key(donor_weight(risk), draws_global(seed, n_households, 0, start, count))
    return key, draws_global(seed, n_households, 1, start, count)


def top_level_input(codes: HouseholdCodes, seed: int) -> TopLevelInput:
    """The top level's input from every household."""
    key, tiebreak = top_level_draws(seed, codes.n, codes.risk[0])
    return TopLevelInput(area=codes.geo[0], profiles=codes.profiles, risk=codes.risk[0], at_risk=codes.at_risk[0], key=key,
                         tiebreak=tiebreak)


@dataclass(frozen=True, eq=False)
class TopLevel:
    """Step 2's result: pairs (indices of the input's households), which households are still
    free, and the level's numbers."""

    pairs: Pairs
    free: np.ndarray
    tally: Tally


def top_level(t: TopLevelInput, spec: SwapSpec) -> TopLevel:
    """Step 2: every household risky at the top level, most at risk first, is paired with a
    donor of its profile from another top-level area (fallback profiles in order)."""
    n_profiles = len(spec.profiles)
    cand = np.flatnonzero(t.at_risk)
    # most at risk first (fewest look-alikes), ties in random order
    cand = cand[np.lexsort((t.tiebreak[cand], -t.risk[cand]))]
    log = _Log()
    free = np.ones(t.area.size, dtype=bool)
    prepared = [donors(p, t.area, t.key) for p in t.profiles] if cand.size else []
    free, left, unmatched = _match_profiles(log, cand, prepared, free, level=0, kind=0, step="L0")
    unmatched = unmatched or [int(cand.size)] * n_profiles
    pairs = log.pairs()
    level = _level_tally(pairs.profile, n_profiles, risky=int(cand.size), candidates=int(cand.size), unmatched=unmatched,
                         left=int(left.size))
    tally = Tally(targeted_pairs=int(pairs.cand.size), levels={"0": level}, rounds=log.rounds)
    return TopLevel(pairs, free, tally)


def heads_suffice(t: TopLevelInput, spec: SwapSpec, in_head: Sequence[np.ndarray],
                  complete: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Whether a reduced input gives the pairs the whole population gives.

    A reduced input holds every household risky at the top level and, per profile, the *head*
    of each group's donor list (the households with the best keys: ``in_head[p]`` marks them;
    ``complete[p][g]`` says whether group ``g``'s head is its whole list). It is enough when
    every group with candidates has a complete head or, for every area a candidate of the group
    lives in, at least ``2·C + C_g`` head households outside that area (``C`` candidates in
    all, ``C_g`` in the group).

    Why: a candidate ranked ``r < C_g`` among its group's remaining candidates takes the
    ``r``-th free donor outside its area (there are more than ``r`` of them, so the modulo of
    :func:`match` is ``r`` itself, in the reduced input as in the whole list); the matchings
    before it used at most ``2·C`` households, so that donor lies in the head, whose order is
    the whole list's. Returns, per profile, the groups whose head is too short (to be fetched
    longer)."""
    risky = t.at_risk
    n_cand = int(risky.sum())
    n_areas = int(t.area.max()) + 1 if t.area.size else 1
    short: list[np.ndarray] = []
    for p, prof in enumerate(t.profiles):
        if n_cand == 0:
            short.append(np.zeros(0, dtype=np.int64))
            continue
        n_groups = int(prof.max()) + 1
        head = in_head[p]
        cand_g = np.bincount(prof[risky], minlength=n_groups)
        per_group = np.bincount(prof[head], minlength=n_groups)
        per_cell = np.bincount(prof[head] * n_areas + t.area[head], minlength=n_groups * n_areas)
        cells = np.unique(prof[risky] * n_areas + t.area[risky])
        g = cells // n_areas
        outside = per_group[g] - per_cell[cells]
        bad = (outside < 2 * n_cand + cand_g[g]) & ~np.asarray(complete[p], dtype=bool)[g]
        short.append(np.unique(g[bad]))
    return short


# ------------------------------------------------------------------------------ steps 3-4: within areas
@dataclass(frozen=True, eq=False)
class Within:
    """Steps 3–4's result: pairs (indices of the households given) and their numbers."""

    pairs: Pairs
    tally: Tally


def swap_within(codes: HouseholdCodes, spec: SwapSpec, seed: int, *, free: np.ndarray,
                counted: np.ndarray) -> Within:
    """Steps 3–4 on the households of some top-level areas (every one, or one at a time: the
    result of an area is the same).

    Args:
        codes: the households (identifier order), whole areas.
        spec: the swapping.
        seed: the run's seed; each top-level area draws from its own stream.
        free: per household, not swapped at the top level.
        counted: per top-level area (``codes.top_labels``; one scope when the geography has one
            level), the top level's swaps counted towards the swap rate there.
    """
    n_profiles = len(spec.profiles)
    streams = _Streams(codes, spec, seed)
    log = _Log()
    # 3. levels 2..K within each top-level area
    free, levels = _targeted_levels(codes, spec, streams, log, free)
    # 4. top-up at the lowest level to the swap rate
    up = _top_up(codes, spec, streams, log, free, counted)
    pairs = log.pairs()
    tally = Tally(
        targeted_pairs=int((pairs.kind == 0).sum()),
        top_up_pairs=int((pairs.kind == 1).sum()),
        levels=levels,
        top_up={"pairs_by_profile": np.bincount(pairs.profile[pairs.kind == 1], minlength=n_profiles).tolist(),
                "candidates": int(up.tried.sum()),
                "no_donor": up.no_donor, "no_donor_under_profile": up.no_donor_profile},
        scopes={label: [int(up.target[i]), int(up.counted[i])] for i, label in enumerate(up.scope_labels)},
        rounds=log.rounds,
    )
    return Within(pairs, tally)


class _Streams:
    """The random draws of steps 3–4 and the donor orders made from them.

    Random streams: the top level over the whole population, the rest per top-level area. Blocks
    of draws (fixed numbering: results are reproduced from it): the population's stream has 0 =
    donors at level 1, 1 = tie-breaks at level 1, 2 = the top-up of a one-level geography; each
    top-level area's stream has 2(k-1) = donors and 2(k-1)+1 = tie-breaks at level k > 1, and
    2(K-1) = the top-up (:func:`draws_global`, :func:`draws_by_area`; seed 000 §5.6.1: donors
    sampled with probability proportional to their risk, :func:`es_key`).
    """

    def __init__(self, codes: HouseholdCodes, spec: SwapSpec, seed: int) -> None:
        self.codes = codes
        self.spec = spec
        self.seed = seed
        self.H = codes.n
        self.top = codes.geo[0]
        self.top_labels = list(codes.top_labels)
        self.weighted = bool(codes.risk)
        self.by_top = np.argsort(self.top, kind="stable") if len(codes.geo) > 1 else None
        self.cache: dict[int, list[Donors]] = {}

    def draw(self, block: int, scope_is_area: bool) -> np.ndarray:
        """Block ``block`` of the draws: of each household's top-level area's stream, or of the
        population's."""
        if scope_is_area:
            return draws_by_area(self.seed, self.top, self.top_labels, block, order=self.by_top)
        return draws_global(self.seed, self.H, block)

    def weight(self, k: int) -> np.ndarray:
        """Each household's weight as a donor (or sampled one) at level ``k``: its risk there, or
        1 when the swapping is random."""
        return donor_weight(self.codes.risk[k]) if self.weighted else np.ones(self.H)

    def donor_key(self, k: int) -> np.ndarray:
        """The sampling keys of donor choice at level ``k``."""
        return es_key(self.weight(k), self.draw(0, False) if k == 0 else self.draw(2 * (k - 1), True))

    def tiebreak(self, k: int) -> np.ndarray:
        """The random tie-breaks among equally risky candidates at level ``k``."""
        return self.draw(1, False) if k == 0 else self.draw(2 * (k - 1) + 1, True)

    def prepared(self, k: int) -> list[Donors]:
        """The households ordered for donor choice at level ``k``, one order per profile."""
        codes, top, top_labels, H = self.codes, self.top, self.top_labels, self.H
        if k not in self.cache:
            key = self.donor_key(k)
            groups = codes.profiles if k == 0 or self.spec.anywhere else [
                combine([top, p], [len(top_labels), int(p.max()) + 1 if p.size else 1], H)[0] for p in codes.profiles]
            self.cache[k] = [donors(g, codes.geo[k], key) for g in groups]
        return self.cache[k]


def _targeted_levels(codes: HouseholdCodes, spec: SwapSpec, streams: _Streams, log: _Log,
                     free: np.ndarray) -> tuple[np.ndarray, dict[str, dict[str, Any]]]:
    """Step 3 (seed 000 §5.6.1): at each level ``k`` = 2..K, every household risky there and still
    free, most at risk first, is paired with a free donor of its profile from another level-``k``
    area. Pairs go to ``log``; returns the households still free and each level's numbers."""
    K = len(codes.geo)
    n_profiles = len(spec.profiles)
    risk = codes.risk
    risky = codes.at_risk
    levels: dict[str, dict[str, Any]] = {}
    if spec.targeted and codes.n:
        for k in range(1, K):
            cand = np.flatnonzero(free & risky[k])
            # most at risk first (fewest look-alikes), ties in random order
            cand = cand[np.lexsort((streams.tiebreak(k)[cand], -risk[k][cand]))]
            before = len(log.cand)
            free, left, unmatched = _match_profiles(log, cand, streams.prepared(k) if cand.size else [], free,
                                                    level=k, kind=0, step=f"L{k}")
            unmatched = unmatched or [int(cand.size)] * n_profiles
            if k != K - 1:
                streams.cache.pop(k, None)  # the top-up needs only the lowest level's order
            made = np.concatenate(log.profile[before:]) if len(log.cand) > before else np.zeros(0, np.int16)
            levels[str(k)] = _level_tally(made, n_profiles, risky=int(risky[k].sum()), candidates=int(cand.size),
                                          unmatched=unmatched, left=int(left.size))
    return free, levels


@dataclass(frozen=True, eq=False)
class _TopUp:
    """Step 4's numbers: per scope (a top-level area, or the whole population with one level) its
    label, the pairs it needs and the pairs counted for it; which households were sampled; how
    many found no donor (in all, and under each profile tried)."""

    scope_labels: list[str]
    target: np.ndarray
    counted: np.ndarray
    tried: np.ndarray
    no_donor: int
    no_donor_profile: list[int]


def _top_up(codes: HouseholdCodes, spec: SwapSpec, streams: _Streams, log: _Log, free: np.ndarray,
            counted: np.ndarray) -> _TopUp:
    """Step 4 (seed 000 §5.6.1, seed 002 §3.1): while a scope has fewer pairs than the swap rate
    asks, sample its free households not tried yet, most likely first (probability proportional to
    the risk at level K, :func:`es_key`), and pair them with donors from another level-K area.
    Pairs go to ``log``; ``counted``: the pairs already counted per scope (not changed)."""
    H = codes.n
    K = len(codes.geo)
    last = K - 1
    if K == 1:
        scope = np.zeros(H, dtype=np.int64)
        scope_labels = ["(all)"]
        u_top = streams.draw(2, False)
    else:
        scope = streams.top
        scope_labels = streams.top_labels
        u_top = streams.draw(2 * (K - 1), True)
    n_scopes = max(len(scope_labels), 1)
    households_in = np.bincount(scope, minlength=n_scopes)
    target = spec.target_pairs(households_in)
    counted = np.asarray(counted, dtype=np.int64).copy()
    if log.cand:
        counted += np.bincount(scope[np.concatenate(log.cand)], minlength=n_scopes)
    sample_key = es_key(streams.weight(last), u_top)
    del u_top
    order, scope_sorted, scope_start = _scope_order(scope, sample_key, n_scopes)
    tried = np.zeros(H, dtype=bool)
    top_no_donor = 0
    top_no_donor_profile = [0] * len(spec.profiles)
    iteration = 0
    while True:
        short = np.maximum(target - counted, 0)
        if not short.any():
            break
        open_ = free[order] & ~tried[order]
        # rank among the open households of the same scope, most likely first
        running = np.cumsum(open_)
        before_scope = np.concatenate([[0], running])[scope_start]
        rank = running - 1 - before_scope[scope_sorted]
        pick = open_ & (rank < short[scope_sorted])
        cand = order[pick]
        if cand.size == 0:
            break
        # most likely first across scopes (scopes are numbered in the data's order; with donors
        # from anywhere, candidates of different scopes compete for the same donors)
        cand = cand[np.argsort(-sample_key[cand], kind="stable")]
        tried[cand] = True
        before = len(log.cand)
        free, left, unmatched = _match_profiles(log, cand, streams.prepared(last), free, level=last, kind=1,
                                                step=f"T{iteration}")
        iteration += 1
        top_no_donor += int(left.size)
        top_no_donor_profile = [a + b for a, b in zip(top_no_donor_profile, unmatched)]
        for c in log.cand[before:]:
            if c.size:
                counted += np.bincount(scope[c], minlength=n_scopes)
    return _TopUp(scope_labels, target, counted, tried, top_no_donor, top_no_donor_profile)


def _scope_order(scope: np.ndarray, sample_key: np.ndarray,
                 n_scopes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each scope's households, most likely first (lexsort's order: by key, then stably by scope),
    their scopes in that order, and where each scope starts in it."""
    order = np.argsort(-sample_key)
    order = order[np.argsort(scope[order], kind="stable")]
    scope_sorted = scope[order]
    scope_start = np.searchsorted(scope_sorted, np.arange(n_scopes), side="left")
    return order, scope_sorted, scope_start


# ------------------------------------------------------------------------------ step 5 and the report
@dataclass(frozen=True, eq=False)
class Roles:
    """Per household: its partner (index, -1: not swapped), role (index of :data:`ROLES`), the
    level and the profile it was swapped at (-1: not swapped)."""

    partner: np.ndarray
    role: np.ndarray
    level: np.ndarray
    profile: np.ndarray

    @property
    def swapped(self) -> np.ndarray:
        return self.role >= 0


def roles(n: int, pairs: Pairs) -> Roles:
    partner = np.full(n, -1, dtype=np.int64)
    partner[pairs.cand] = pairs.donor
    partner[pairs.donor] = pairs.cand
    role = np.full(n, -1, dtype=np.int8)
    role[pairs.cand] = pairs.kind
    role[pairs.donor] = 2
    level = np.full(n, -1, dtype=np.int16)
    level[pairs.cand] = pairs.level
    level[pairs.donor] = pairs.level
    profile = np.full(n, -1, dtype=np.int16)
    profile[pairs.cand] = pairs.profile
    profile[pairs.donor] = pairs.profile
    return Roles(partner, role, level, profile)


def first_risky_level(codes: HouseholdCodes) -> np.ndarray:
    """Per household, the highest level (index) at which it is risky, or -1."""
    first = np.full(codes.n, -1, dtype=np.int64)
    risky = codes.at_risk
    for lvl in range(len(risky) - 1, -1, -1):
        first[risky[lvl]] = lvl
    return first


def household_tally(codes: HouseholdCodes, swapped: np.ndarray, partner: np.ndarray,
                    everywhere: np.ndarray | None = None) -> Tally:
    """The numbers that need each household's final state. ``partner``: per household its
    partner among ``codes`` (-1: none there); ``everywhere``: households swapped with a partner
    not among ``codes`` (at the top level: they moved across every level)."""
    ever = first_risky_level(codes) >= 0
    has = partner >= 0
    other = np.maximum(partner, 0)
    moved = []
    for g in codes.geo:
        across = has & (g != g[other])
        if everywhere is not None:
            across |= everywhere
        moved.append(int(codes.size[across].sum()))
    return Tally(households=codes.n, records=int(codes.size.sum()), records_swapped=int(codes.size[swapped].sum()),
                 ever_risky=int(ever.sum()), risky_unswapped=int((ever & ~swapped).sum()), moved=moved)


def report(t: Tally, spec: SwapSpec) -> tuple[dict[str, Any], dict[str, Any], tuple[str, ...]]:
    """The report's figures (published), private figures and notes from the whole population's
    :class:`Tally` — the same code for every engine."""
    profiles = spec.profiles
    names = [profile_name(p) for p in profiles]
    K = len(spec.geography)
    H = t.households

    def by_name(values: Sequence[int] | None) -> dict[str, int]:
        values = list(values) if values else [0] * len(names)
        return dict(zip(names, (int(v) for v in values)))

    level_rows, level_private = [], []
    for k in sorted(t.levels, key=int):
        row = t.levels[k]
        name = spec.geography[int(k)]
        by_profile = by_name(row["pairs_by_profile"])
        level_rows.append({"level": name, "pairs": sum(by_profile.values()), "pairs_by_profile": by_profile})
        level_private.append({"level": name, "risky_households": row["risky_households"],
                              "candidates": row["candidates"],
                              "no_donor_under_profile": by_name(row["no_donor_under_profile"]),
                              "no_donor": row["no_donor"]})
    n_pairs = t.targeted_pairs + t.top_up_pairs
    target = sum(v[0] for v in t.scopes.values())
    short = {label: {"target": v[0], "pairs": v[1]} for label, v in sorted(t.scopes.items()) if v[1] < v[0]}
    figures: dict[str, Any] = {
        "records": t.records,
        "households": H,
        "swaprate": spec.swaprate if spec.pairrate is None else None,
        "pairrate": spec.pairrate,
        "donors": spec.donors,
        "target_pairs": target,
        "pairs": n_pairs,
        "households_swapped": 2 * n_pairs,
        "records_swapped": t.records_swapped,
        "achieved_rate": round(n_pairs / H, 6) if H else 0.0,
        "share_households_swapped": round(2 * n_pairs / H, 6) if H else 0.0,
        "targeted_pairs": t.targeted_pairs,
        "top_up_pairs": t.top_up_pairs,
        "levels": level_rows,
        "top_up": {"level": spec.geography[K - 1], "pairs": t.top_up_pairs,
                   "pairs_by_profile": by_name(t.top_up.get("pairs_by_profile"))},
        "shortfall_pairs": sum(v["target"] - v["pairs"] for v in short.values()),
        "matching_rounds": sum(t.rounds.values()),
        "records_moved_across": {name: int(v) for name, v in zip(spec.geography, t.moved or [0] * K)},
    }
    private: dict[str, Any] = {
        "levels": level_private,
        "risky_households": t.ever_risky,
        "risky_unswapped": t.risky_unswapped,
        "top_up": {"candidates": t.top_up.get("candidates", 0), "no_donor": t.top_up.get("no_donor", 0),
                   "no_donor_under_profile": by_name(t.top_up.get("no_donor_under_profile"))},
        "short_areas": short,
    }
    notes = []
    for i, row in enumerate(level_private):
        if row["no_donor"]:
            again = "; they were tried again at the levels below" if i < K - 1 else ""
            notes.append(f"risky households at level {row['level']} found no donor under any similarity profile there"
                         f"{again} (counts in the report's private figures)")
    if private["risky_unswapped"]:
        notes.append("some risky households stay unswapped: no level had a donor for them (count in the report's "
                     "private figures)")
    over = over_rate_note(t, spec, target)
    if over:
        notes.append(over)
    if short:
        where_short = (f"top-level area {next(iter(short))}" if len(short) == 1
                       else f"{len(short)} top-level areas")
        notes.append(f"the swap rate asks for {target:,} swaps, {n_pairs:,} were made: no further household "
                     f"in {where_short} had a donor")
    return figures, private, tuple(notes)


def over_rate_note(t: Tally, spec: SwapSpec, target_pairs: int) -> str | None:
    """A warning when targeted swapping swaps more than twice the households the rate asks for
    (issue #25), with the reason: every risky household is swapped whatever the rate."""
    H = t.households
    asked = 2 * target_pairs
    done = 2 * (t.targeted_pairs + t.top_up_pairs)
    if not spec.targeted or not H or done <= 2 * asked or not t.targeted_pairs:
        return None
    rate = f"the pair rate {spec.pairrate:g}" if spec.pairrate is not None else f"the swap rate {spec.swaprate:g}"
    return (f"targeted swapping swapped {done:,} households ({100 * done / H:.1f}%), more than twice the "
            f"{asked:,} ({100 * asked / H:.1f}%) that {rate} asks for: {2 * t.targeted_pairs:,} of them are the "
            f"risky households ({spec.risk_rule()}) and their donors, which are swapped whatever the rate; fewer "
            "risk variables, a smaller k or a higher risk threshold target fewer")


def swap_records(table: pa.Table, spec: SwapSpec, seed: int, *, where: str = "data") -> SwapResult:
    """Run the procedure of the module docstring on ``table``; ``seed`` names every draw."""
    check_spec(table.column_names, spec, where)
    n = table.num_rows
    hh, codes = household_codes(table, spec, where=where)
    H = codes.n
    K = len(codes.geo)
    free = np.ones(H, dtype=bool)
    n_scopes = max(len(codes.top_labels), 1) if K > 1 else 1
    counted = np.zeros(n_scopes, dtype=np.int64)
    parts: list[Pairs] = []
    tallies: list[Tally] = []
    if spec.targeted and H:
        first = top_level(top_level_input(codes, seed), spec)
        free = first.free
        parts.append(first.pairs)
        tallies.append(first.tally)
        scope = codes.geo[0] if K > 1 else np.zeros(H, dtype=np.int64)
        counted += np.bincount(scope[first.pairs.cand], minlength=n_scopes)
    within = swap_within(codes, spec, seed, free=free, counted=counted)
    parts.append(within.pairs)
    pairs = Pairs.concat(parts)
    r = roles(H, pairs)
    tally = Tally.total([*tallies, within.tally, household_tally(codes, r.swapped, r.partner)])
    figures, private, notes = report(tally, spec)

    # 5. the swap itself
    data = table
    if pairs.cand.size:
        rec_hh = hh.of_record
        src = np.arange(n, dtype=np.int64)
        moved = r.swapped[rec_hh]
        src[moved] = hh.first[r.partner[rec_hh[moved]]]
        src_arr = from_numpy(src)
        for name in (*spec.geography, *spec.carry_along):
            i = data.schema.get_field_index(name)
            data = data.set_column(i, data.schema.field(i), data.column(name).take(src_arr))
    risk_level = first_risky_level(codes) if spec.targeted and H else None
    evaluation = _evaluation(table, hh, spec, r, risk_level)
    return SwapResult(data, evaluation, figures, private, notes)


def _evaluation(table: pa.Table, hh: Households, spec: SwapSpec, r: Roles, risk_level: np.ndarray | None) -> pa.Table:
    """Per record: swapped, at which level, in which role, on which profile, with whom, and the
    highest level at which its household was risky (evaluation only: it tells who was swapped).
    Built per household and spread to the records by Arrow (no record-sized numpy copies)."""
    swapped_hh = r.swapped
    missing = ~swapped_hh
    rec = from_numpy(hh.of_record)

    def labelled(codes: np.ndarray, labels: Sequence[str], mask: np.ndarray) -> pa.Array:
        dictionary = strings(list(labels))  # built from buffers: pa.array would import pandas
        small = np.int8 if len(labels) < 128 else np.int32
        idx = from_numpy(np.where(mask, 0, codes).astype(small), mask=mask)
        return pa.DictionaryArray.from_arrays(idx, dictionary).take(rec)

    cols: dict[str, pa.Array] = {"swapped": from_numpy(swapped_hh).take(rec)}
    cols["swap_level"] = labelled(r.level, spec.geography, missing)
    cols["swap_role"] = labelled(r.role, ROLES, missing)
    cols["swap_profile"] = labelled(r.profile, [profile_name(p) for p in spec.profiles], missing)
    partner_row = np.where(swapped_hh, hh.first[np.maximum(r.partner, 0)], 0)
    if hh.column is not None:
        ids = table.column(hh.column).take(from_numpy(partner_row, mask=missing))
        ids = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    else:
        ids = from_numpy(partner_row + 1, mask=missing)  # record number, 1-based
    cols["partner"] = ids.take(rec)
    if risk_level is not None:
        cols["risk_level"] = labelled(risk_level, spec.geography, risk_level < 0)
    return pa.Table.from_arrays(list(cols.values()), names=list(cols))
