"""The swapping procedure shared by targeted and random record swapping.

Targeted record swapping, seed 000 §5.6.1 (METHODS.md §8), on households:

1. Risk. For each level ``k`` of the geography ``G1 ≻ … ≻ GK`` and each record, ``c_k`` is the
   number of records with the same values of the risk variables in the record's area at level
   ``k``, and its risk is ``1/c_k``; a household's risk is the largest of its members' (the
   seed's rule for swapping whole dwellings). A household is *risky* at level ``k`` when a member
   has ``c_k < k`` (k-anonymity; ``r > 1/k``). Counts only shrink with the area, so a household
   risky at a level is risky at every level below.
2. Top level. Every risky household at level 1 is swapped with a donor from a different level-1
   area (anywhere in the population) that has its similarity profile and was not swapped yet,
   sampled with probability proportional to the donor's risk at level 1. When no donor has the
   first profile, the next profile is tried, and so on.
3. Levels 2..K, within each top-level area. Every risky household at level ``k`` not swapped
   yet (including one that found no donor above: it is protected as far down as a donor exists)
   is swapped likewise with a donor of the same top-level area in a different level-``k`` area.
   sdcMicro draws these donors from the whole population; keeping them inside the top-level area
   keeps every top-level count exact and lets the work split per top-level area with its own
   random stream (:mod:`._matching`).
4. Top-up at level K. The *swap rate* ``P`` is the share of households sampled for swapping,
   each with its partner, so about ``2P`` of households change geography (seed 002 §3.1: 5%
   sampled + their partners = 10%; seed 000: "``p×N`` overall swaps"). Each top-level area
   needs ``ceil(P × its households)`` swaps counted by the household sampled (a donor does not
   count for its own area); when the targeted swaps fall short, further households are sampled
   with probability proportional to their risk at level K and swapped within the top-level area
   with a donor from a different level-K area, until the area has its share or no household left
   has a donor. With one level the top-up runs over the whole population.
5. Swap. The two households of a pair exchange every geography variable (and the carry-along
   variables), for all their members.

Donors are always free: a household is swapped at most once. Risky households without a donor at
a level are counted per level (and per profile tried); nothing is silent.

Random record swapping (seed 002 §3.1, seed 004 §3.1) is the same procedure without risk: no
targeted stages, the top-up samples households uniformly and pairs them uniformly within the
top-level area (the control stratum, with the similarity profile as the further control
variables) from a different lowest-level area.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from tabsafe._arrow import from_numpy, strings
from tabsafe.errors import InputError, param
from tabsafe.protect.swapping._matching import Donors, donors, draws_by_area, draws_global, es_key, match
from tabsafe.protect.swapping._population import (
    Codes,
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


@dataclass(frozen=True)
class SwapSpec:
    """What to swap and how (the parameters of the swapping methods).

    Attributes:
        geography: geography variables, top level first.
        risk_vars: risk variables (None: random swapping, no targeting).
        k: a household is risky at a level when a member's risk-variable combination occurs
            fewer than ``k`` times in its area there.
        swaprate: share of households sampled for swapping (each with a partner).
        similar: similarity profiles in the order tried; () means any household matches.
        carry_along: variables that travel with the geography.
        household: the household variable (None: every record is its own household).
    """

    geography: tuple[str, ...]
    risk_vars: tuple[str, ...] | None
    k: int
    swaprate: float
    similar: tuple[tuple[str, ...], ...] = ()
    carry_along: tuple[str, ...] = ()
    household: str | None = None


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


def _check_spec(table: pa.Table, spec: SwapSpec, where: str) -> None:
    wanted = [(v, "geography") for v in spec.geography]
    wanted += [(v, "risk_vars") for v in spec.risk_vars or ()]
    wanted += [(v, "similar") for prof in spec.similar for v in prof]
    wanted += [(v, "carry_along") for v in spec.carry_along]
    if spec.household is not None:
        wanted.append((spec.household, "household"))
    check_columns(table, wanted, where=where)
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


@dataclass
class _Log:
    """Pairs made so far and the counts the report needs (mutable while the procedure runs)."""

    cand: list[np.ndarray] = field(default_factory=list)
    donor: list[np.ndarray] = field(default_factory=list)
    level: list[np.ndarray] = field(default_factory=list)
    kind: list[np.ndarray] = field(default_factory=list)
    profile: list[np.ndarray] = field(default_factory=list)
    rounds: int = 0

    def add(self, cand: np.ndarray, donor: np.ndarray, level: int, kind: int, profile: int) -> None:
        self.cand.append(cand)
        self.donor.append(donor)
        self.level.append(np.full(cand.size, level, dtype=np.int16))
        self.kind.append(np.full(cand.size, kind, dtype=np.int8))
        self.profile.append(np.full(cand.size, profile, dtype=np.int16))

    def arrays(self) -> tuple[np.ndarray, ...]:
        def cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
            return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

        return (cat(self.cand, np.int64), cat(self.donor, np.int64), cat(self.level, np.int16),
                cat(self.kind, np.int8), cat(self.profile, np.int16))


def _match_profiles(log: _Log, cand: np.ndarray, prepared: Sequence[Donors], free: np.ndarray, *, level: int,
                    kind: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Match ``cand`` profile by profile (fallbacks in order); returns the free mask, the
    candidates left without a donor and, per profile, how many had none under it."""
    unmatched_by_profile = []
    for p, d in enumerate(prepared):
        if cand.size == 0:
            unmatched_by_profile.append(0)
            continue
        m = match(cand, d, free)
        log.rounds += m.rounds
        got = m.donor >= 0
        log.add(cand[got], m.donor[got], level, kind, p)
        free = m.free
        cand = cand[~got & free[cand]]  # neither matched nor taken as someone's donor
        unmatched_by_profile.append(int(cand.size))
    return free, cand, unmatched_by_profile


def swap_records(table: pa.Table, spec: SwapSpec, seed: int, *, where: str = "data") -> SwapResult:
    """Run the procedure of the module docstring on ``table``; ``seed`` names every draw."""
    _check_spec(table, spec, where)
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
    H = hh.n
    K = len(levels)
    geo = [lv.codes[hh.first] for lv in levels]
    top = geo[0]
    level_labels = [lv.labels for lv in levels]
    top_labels = level_labels[0]
    profiles = spec.similar or ((),)
    prof_ids = []
    for prof in profiles:
        codes = [column_codes(table, v, option="similar", where=where) for v in prof]
        ids, _ = combine([c.codes[hh.first] for c in codes], [c.n for c in codes], H)
        prof_ids.append(ids)
        del codes

    # 1. risk per level: the smallest count among a household's members
    targeted = spec.risk_vars is not None
    min_count: list[np.ndarray] = []
    if targeted and n:
        rv: list[Codes] = [column_codes(table, v, option="risk_vars", where=where) for v in spec.risk_vars or ()]
        combo, n_combo = combine([c.codes for c in rv], [c.n for c in rv], n)
        del rv
        for lv in levels:
            ids, n_ids = combine([lv.codes, combo], [lv.n, n_combo], n)
            min_count.append(hh.reduce(np.minimum, group_counts(ids, n_ids)))
            del ids
        del combo
    del levels, carried  # the records' codes are no longer needed: free them before the matching
    risky = [mc < spec.k for mc in min_count]

    # random streams: the top level over the whole population, the rest per top-level area
    # blocks of draws (fixed numbering: results are reproduced from it): the population's stream
    # has 0 = donors at level 1, 1 = tie-breaks at level 1, 2 = the top-up of a one-level
    # geography; each top-level area's stream has 2(k-1) = donors and 2(k-1)+1 = tie-breaks at
    # level k > 1, and 2(K-1) = the top-up
    by_top = np.argsort(top, kind="stable") if K > 1 else None

    def draw(block: int, scope_is_area: bool) -> np.ndarray:
        if scope_is_area:
            return draws_by_area(seed, top, top_labels, block, order=by_top)
        return draws_global(seed, H, block)

    def weight(k: int) -> np.ndarray:
        return 1.0 / min_count[k] if targeted and n else np.ones(H)

    def donor_key(k: int) -> np.ndarray:
        return es_key(weight(k), draw(0, False) if k == 0 else draw(2 * (k - 1), True))

    def tiebreak(k: int) -> np.ndarray:
        return draw(1, False) if k == 0 else draw(2 * (k - 1) + 1, True)

    cache: dict[int, list[Donors]] = {}

    def prepared(k: int) -> list[Donors]:
        """The households ordered for donor choice at level ``k``, one order per profile."""
        if k not in cache:
            key = donor_key(k)
            groups = prof_ids if k == 0 else [combine([top, p], [len(top_labels), int(p.max()) + 1 if p.size else 1], H)[0]
                                               for p in prof_ids]
            cache[k] = [donors(g, geo[k], key) for g in groups]
        return cache[k]

    log = _Log()
    free = np.ones(H, dtype=bool)
    level_rows: list[dict[str, Any]] = []
    level_private: list[dict[str, Any]] = []
    ever_risky = np.zeros(H, dtype=bool)
    if targeted and H:
        for k in range(K):
            ever_risky |= risky[k]
            cand = np.flatnonzero(free & risky[k])
            # most at risk first (fewest look-alikes), ties in random order
            cand = cand[np.lexsort((tiebreak(k)[cand], min_count[k][cand]))]
            before = len(log.cand)
            free, left, unmatched = _match_profiles(log, cand, prepared(k) if cand.size else [], free, level=k,
                                                    kind=0)
            unmatched = unmatched or [int(cand.size)] * len(profiles)
            if k != K - 1:
                cache.pop(k, None)  # the top-up needs only the lowest level's order
            by_profile = {profile_name(profiles[p]): 0 for p in range(len(profiles))}
            for c, p in zip(log.cand[before:], log.profile[before:]):
                if c.size:
                    by_profile[profile_name(profiles[int(p[0])])] += int(c.size)
            level_rows.append({"level": spec.geography[k], "pairs": sum(by_profile.values()),
                               "pairs_by_profile": by_profile})
            level_private.append({
                "level": spec.geography[k],
                "risky_households": int(risky[k].sum()),
                "candidates": int(cand.size),
                "no_donor_under_profile": {profile_name(profiles[p]): u for p, u in enumerate(unmatched)},
                "no_donor": int(left.size),
            })

    # 4. top-up at the lowest level to the swap rate
    last = K - 1
    if K == 1:
        scope = np.zeros(H, dtype=np.int64)
        scope_labels = ["(all)"]
        u_top = draw(2, False)
    else:
        scope = top
        scope_labels = top_labels
        u_top = draw(2 * (K - 1), True)
    n_scopes = max(len(scope_labels), 1)
    households_in = np.bincount(scope, minlength=n_scopes)
    target = np.ceil(spec.swaprate * households_in - 1e-9).astype(np.int64)
    cand_all, *_ = log.arrays()
    counted = np.bincount(scope[cand_all], minlength=n_scopes) if cand_all.size else np.zeros(n_scopes, np.int64)
    sample_key = es_key(weight(last), u_top)
    del u_top
    # each scope's households, most likely first (lexsort's order: by key, then stably by scope)
    order = np.argsort(-sample_key)
    order = order[np.argsort(scope[order], kind="stable")]
    scope_sorted = scope[order]
    scope_start = np.searchsorted(scope_sorted, np.arange(n_scopes), side="left")
    tried = np.zeros(H, dtype=bool)
    top_pairs_by_profile = {profile_name(profiles[p]): 0 for p in range(len(profiles))}
    top_no_donor = 0
    top_no_donor_profile = [0] * len(profiles)
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
        tried[cand] = True
        before = len(log.cand)
        free, left, unmatched = _match_profiles(log, cand, prepared(last), free, level=last, kind=1)
        top_no_donor += int(left.size)
        top_no_donor_profile = [a + b for a, b in zip(top_no_donor_profile, unmatched)]
        for c, p in zip(log.cand[before:], log.profile[before:]):
            if c.size:
                counted += np.bincount(scope[c], minlength=n_scopes)
                top_pairs_by_profile[profile_name(profiles[int(p[0])])] += int(c.size)
    shortfall = np.maximum(target - counted, 0)

    # 5. the swap itself
    cand, donor, lvl, kind, prof = log.arrays()
    partner = np.full(H, -1, dtype=np.int64)
    partner[cand] = donor
    partner[donor] = cand
    role = np.full(H, -1, dtype=np.int8)
    role[cand] = kind
    role[donor] = 2
    swap_level = np.full(H, -1, dtype=np.int16)
    swap_level[cand] = lvl
    swap_level[donor] = lvl
    swap_profile = np.full(H, -1, dtype=np.int16)
    swap_profile[cand] = prof
    swap_profile[donor] = prof
    data = table
    swapped_hh = partner >= 0
    if cand.size:
        rec_hh = hh.of_record
        src = np.arange(n, dtype=np.int64)
        moved = swapped_hh[rec_hh]
        src[moved] = hh.first[partner[rec_hh[moved]]]
        src_arr = from_numpy(src)
        for name in (*spec.geography, *spec.carry_along):
            i = data.schema.get_field_index(name)
            data = data.set_column(i, data.schema.field(i), data.column(name).take(src_arr))

    evaluation = _evaluation(table, hh, spec, swapped_hh, partner, role, swap_level, swap_profile,
                             risky if targeted and H else [], profiles)
    n_pairs = int(cand.size)
    figures: dict[str, Any] = {
        "records": n,
        "households": H,
        "swaprate": spec.swaprate,
        "target_pairs": int(target.sum()),
        "pairs": n_pairs,
        "households_swapped": 2 * n_pairs,
        "records_swapped": int(hh.size[swapped_hh].sum()),
        "achieved_rate": round(n_pairs / H, 6) if H else 0.0,
        "share_households_swapped": round(2 * n_pairs / H, 6) if H else 0.0,
        "targeted_pairs": int((kind == 0).sum()),
        "top_up_pairs": int((kind == 1).sum()),
        "levels": level_rows,
        "top_up": {"level": spec.geography[last], "pairs": int((kind == 1).sum()),
                   "pairs_by_profile": top_pairs_by_profile},
        "shortfall_pairs": int(shortfall.sum()),
        "matching_rounds": log.rounds,
    }
    short_areas = [scope_labels[i] for i in np.flatnonzero(shortfall)]
    private: dict[str, Any] = {
        "levels": level_private,
        "risky_households": int(ever_risky.sum()),
        "risky_unswapped": int((ever_risky & ~swapped_hh).sum()),
        "top_up": {"candidates": int(tried.sum()), "no_donor": top_no_donor,
                   "no_donor_under_profile": {profile_name(profiles[p]): u for p, u in enumerate(top_no_donor_profile)}},
        "short_areas": {scope_labels[i]: {"target": int(target[i]), "pairs": int(counted[i])}
                        for i in np.flatnonzero(shortfall)},
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
    if short_areas:
        where_short = (f"top-level area {short_areas[0]}" if len(short_areas) == 1
                       else f"{len(short_areas)} top-level areas")
        notes.append(f"the swap rate asks for {int(target.sum()):,} swaps, {n_pairs:,} were made: no further household "
                     f"in {where_short} had a donor")
    return SwapResult(data, evaluation, figures, private, tuple(notes))


def _evaluation(table: pa.Table, hh: Any, spec: SwapSpec, swapped_hh: np.ndarray, partner: np.ndarray,
                role: np.ndarray, swap_level: np.ndarray, swap_profile: np.ndarray, risky: list[np.ndarray],
                profiles: Sequence[Sequence[str]]) -> pa.Table:
    """Per record: swapped, at which level, in which role, on which profile, with whom, and the
    highest level at which its household was risky (evaluation only: it tells who was swapped).
    Built per household and spread to the records by Arrow (no record-sized numpy copies)."""
    missing = ~swapped_hh
    rec = from_numpy(hh.of_record)

    def labelled(codes: np.ndarray, labels: Sequence[str], mask: np.ndarray) -> pa.Array:
        dictionary = strings(list(labels))  # built from buffers: pa.array would import pandas
        small = np.int8 if len(labels) < 128 else np.int32
        idx = from_numpy(np.where(mask, 0, codes).astype(small), mask=mask)
        return pa.DictionaryArray.from_arrays(idx, dictionary).take(rec)

    cols: dict[str, pa.Array] = {"swapped": from_numpy(swapped_hh).take(rec)}
    cols["swap_level"] = labelled(swap_level, spec.geography, missing)
    cols["swap_role"] = labelled(role, (TARGETED, TOP_UP, DONOR), missing)
    cols["swap_profile"] = labelled(swap_profile, [profile_name(p) for p in profiles], missing)
    partner_row = np.where(swapped_hh, hh.first[np.maximum(partner, 0)], 0)
    if hh.column is not None:
        ids = table.column(hh.column).take(from_numpy(partner_row, mask=missing))
        ids = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    else:
        ids = from_numpy(partner_row + 1, mask=missing)  # record number, 1-based
    cols["partner"] = ids.take(rec)
    if risky:
        first_risky = np.full(hh.n, -1, dtype=np.int64)
        for k in range(len(risky) - 1, -1, -1):
            first_risky[risky[k]] = k
        cols["risk_level"] = labelled(first_risky, spec.geography, first_risky < 0)
    return pa.Table.from_arrays(list(cols.values()), names=list(cols))
