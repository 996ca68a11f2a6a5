"""Pairing households with donors, vectorised; random streams keyed by area.

**Donor choice.** A household to be swapped (a *candidate*) needs a *donor*: a household that is
not swapped yet, has the candidate's similarity profile, lives in the same scope (the whole
population, or one top-level area) and in a *different* area at the level being swapped (seed
000 §5.6.1 steps 3–4). Donors are drawn with probability proportional to their risk by weighted
sampling without replacement in the Efraimidis–Spirakis form sdcMicro's ``recordSwap`` uses as
well: every household gets the key ``risk / E`` with ``E ~ Exp(1)``, and a donor list in
decreasing key order is a successive ∝-risk sample without replacement.

**Vectorised matching.** Candidates are taken in priority order within their group (scope ×
profile). In one *round* the candidate ranked ``r`` among its group's remaining candidates
proposes the ``(r mod n)``-th household of the group's free donors (key order) outside its own
area, ``n`` being how many there are; proposals are accepted in priority order when neither of
their two households was touched by an earlier proposal of the round; the others propose again
in the next round, from the donors still free. A candidate with no free donor outside its area
has none (donors only ever become fewer). Every round accepts at least the first proposal of
each group, so the matching ends; every accepted donor is, given the round, the next household
of a successive ∝-risk sample among the donors still free. Nothing in a group depends on another
group, so the result of one top-level area is the same whether it is matched alone or with
every other area.

**Random streams.** Draws for one top-level area come from ``SeedSequence(seed,
spawn_key=(AREA, key(area code)))`` (``key`` a fixed hash of the code), in household-identifier
order; draws for the whole population from ``spawn_key=(GLOBAL,)``. An engine that splits the
work per top-level area (Spark, issue #18) reproduces the same result area by area.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

#: spawn-key tags of the random streams (never change: results are reproduced from them)
GLOBAL = 1
AREA = 2


def area_key(code: str) -> int:
    """A fixed 63-bit number for an area code (BLAKE2b of its UTF-8 text): the same on every
    machine and every run, unlike Python's ``hash``."""
    return int.from_bytes(hashlib.blake2b(code.encode("utf-8"), digest_size=8).digest(), "little") >> 1


def stream(seed: int, *key: int) -> np.random.Generator:
    """The random stream of ``seed`` tagged by ``key`` (``(GLOBAL,)`` or ``(AREA, area_key)``)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=tuple(key))))


def draws_by_area(seed: int, area: np.ndarray, labels: list[str], row: int, *,
                  order: np.ndarray | None = None) -> np.ndarray:
    """The ``row``-th block of uniform draws in (0, 1], one per household, each from its
    top-level area's own stream.

    ``area`` is each household's top-level area code (households in identifier order). Block
    ``row`` of an area with ``n`` households is the stream's draws ``row·n .. row·n + n - 1``
    (the stream is advanced to it, so blocks can be made one at a time), assigned to the area's
    households in identifier order (``order``: ``argsort(area, kind="stable")``, if at hand).
    """
    out = np.empty(area.size, dtype=np.float64)
    if order is None:
        order = np.argsort(area, kind="stable")
    counts = np.bincount(area, minlength=len(labels))
    start = 0
    for a, n in enumerate(counts):
        if n == 0:
            continue
        idx = order[start:start + n]
        start += n
        gen = stream(seed, AREA, area_key(labels[a]))
        gen.bit_generator.advance(row * int(n))
        out[idx] = 1.0 - gen.random(int(n))
    return out


def draws_global(seed: int, n: int, row: int, start: int = 0, count: int | None = None) -> np.ndarray:
    """The ``row``-th block of ``n`` uniform draws in (0, 1] of the population's stream, one per
    household in identifier order; ``start``/``count``: only the draws of households
    ``start .. start+count-1`` (an engine that holds a range of households per task makes its
    share; the stream is advanced to it)."""
    count = n - start if count is None else count
    gen = stream(seed, GLOBAL)
    gen.bit_generator.advance(row * n + start)
    return 1.0 - gen.random(count)


def es_key(weight: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Efraimidis–Spirakis keys ``weight / E`` (``E = -log u``): a list in decreasing key order
    is a sample without replacement with probability proportional to ``weight``."""
    e = -np.log(u)
    with np.errstate(divide="ignore"):
        return np.where(e > 0, weight / np.where(e > 0, e, 1.0), np.inf)


@dataclass(frozen=True, eq=False)
class Donors:
    """Households ordered for donor choice at one level and profile (built once, used by every
    matching at that level).

    Attributes:
        order: households by group, best donor key first.
        group: per household, its group (scope × similarity profile), ids ``>= 0``.
        area: per household, its area at the level (ids ``>= 0``).
        cell: per household, its (group, area) id, ``0 <= cell < n_cells``.
        n_cells: bound of ``cell``.
        start: per group ``g``, where its households start in ``order`` (``start[g+1]``: end).
    """

    order: np.ndarray
    group: np.ndarray
    area: np.ndarray
    cell: np.ndarray
    n_cells: int
    start: np.ndarray


def donors(group: np.ndarray, area: np.ndarray, key: np.ndarray) -> Donors:
    """Order every household for donor choice: by group, then by decreasing ``key``."""
    from tabsafe.protect.swapping._population import combine

    n_groups = int(group.max()) + 1 if group.size else 1
    # best key first, then (stable) by group: lexsort's order at half its cost; a stable sort of
    # small integers is a radix sort
    order = np.argsort(-key)
    g = group[order]
    if n_groups < 2**15:
        g = g.astype(np.int16)
    order = order[np.argsort(g, kind="stable")]
    n_areas = int(area.max()) + 1 if area.size else 1
    cell, n_cells = combine([group, area], [n_groups, n_areas], group.size)
    start = np.searchsorted(group[order], np.arange(n_groups + 1), side="left")
    return Donors(order, group, area, cell, n_cells, start)


@dataclass(frozen=True)
class Matched:
    """The result of :func:`match`.

    Attributes:
        donor: per candidate (in the order given), its donor household, or -1.
        free: households still free after the matching.
        rounds: rounds the matching took.
    """

    donor: np.ndarray
    free: np.ndarray
    rounds: int


def _ranges(lo: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The concatenated index ranges ``lo[i] .. lo[i]+length[i]-1`` and, for each element, the
    offset of its range's first element in the result."""
    total = int(length.sum())
    first = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64)
    at = np.repeat(first, length)
    return np.repeat(lo, length) + (np.arange(total, dtype=np.int64) - at), at


def match(candidates: np.ndarray, d: Donors, free: np.ndarray) -> Matched:
    """Pair each candidate with a free donor of its group outside its area (module docstring).

    Args:
        candidates: households to swap, in priority order (each free, each once).
        d: the households ordered for donor choice (:func:`donors`).
        free: per household, whether it may still be swapped (not changed; see the result).

    A candidate that another candidate takes as its donor is swapped as a donor: its ``donor``
    stays -1 and it is no longer free.

    Only the head of each group's donor list is looked at (a window that grows when a candidate
    needs more): the ``j``-th free donor outside an area lies within the first ``j`` + (free
    donors of that area) free households of the list, so the result is the one the whole list
    would give, at a cost that follows the candidates rather than the population.
    """
    group, cell = d.group, d.cell
    free = free.copy()
    n_hh = group.size
    donor = np.full(candidates.size, -1, dtype=np.int64)
    if candidates.size == 0:
        return Matched(donor, free, 0)
    n_groups = d.start.size - 1
    group_free = np.bincount(group[free], minlength=n_groups)  # free households per group
    cell_free = np.bincount(cell[free], minlength=d.n_cells)  # … per (group, area)
    raw = np.zeros(n_groups, dtype=np.int64)  # per group: how far down its list to look (0: default)
    active = np.argsort(group[candidates], kind="stable")  # positions into `candidates`, grouped
    touched = np.full(n_hh, np.iinfo(np.int64).max, dtype=np.int64)
    rounds = 0
    while active.size:
        c = candidates[active]
        still = free[c]  # a candidate taken as someone's donor is done
        active, c = active[still], c[still]
        if active.size == 0:
            break
        gc = group[c]
        n_elig = group_free[gc] - cell_free[cell[c]]  # the own area (the candidate included) is out
        has = n_elig > 0
        if not has.all():  # no free donor outside the own area: none will come
            active, c, gc, n_elig = active[has], c[has], gc[has], n_elig[has]
            if active.size == 0:
                break
        rounds += 1
        # rank among the group's remaining candidates (grouped, priority order kept)
        first_of_group = np.searchsorted(gc, gc, side="left")
        j = (np.arange(gc.size) - first_of_group) % n_elig
        dn = _proposals(d, free, raw, c, gc, j)
        ok = _accepted(touched, c, dn)
        donor[active[ok]] = dn[ok]
        used = np.concatenate([c[ok], dn[ok]])
        free[used] = False
        np.subtract.at(cell_free, cell[used], 1)
        np.subtract.at(group_free, group[used], 1)
        active = active[~ok]
    return Matched(donor, free, rounds)


def _proposals(d: Donors, free: np.ndarray, raw: np.ndarray, c: np.ndarray, gc: np.ndarray,
               j: np.ndarray) -> np.ndarray:
    """One round's proposals (module docstring): for each candidate ``c`` (grouped by its group
    ``gc``, priority order kept), the ``j``-th free donor of its group outside its own area.

    Only the head of each group's list is looked at (:func:`_window`); a group whose head holds
    too few donors for a candidate is looked at further down, and ``raw`` (per group, how far
    down to look) keeps the longer head for the next rounds."""
    stride = d.group.size + 1
    heads = np.flatnonzero(np.r_[True, gc[1:] != gc[:-1]])  # the first candidate of each group
    per_group = np.diff(np.append(heads, gc.size))
    head_of = np.repeat(np.arange(heads.size), per_group)  # each candidate's group, as a head index
    g_heads = gc[heads]
    seg_lo = d.start[g_heads]
    seg_len = d.start[g_heads + 1] - seg_lo
    cc = d.cell[c]
    while True:
        wanted = raw[g_heads]
        size = np.minimum(seg_len, np.where(wanted > 0, wanted, 2 * per_group + 64))
        w, n_win, w_start, w_pos = _window(d, free, seg_lo, size)
        composite, seg_start, s, s_ok, own = _area_runs(d.cell[w], w_pos, cc, stride)
        # the whole list never falls short (it holds n_elig donors outside the own area)
        short = (j >= n_win[head_of] - own) & (size[head_of] < seg_len[head_of])
        if not short.any():
            break
        grow = np.unique(head_of[short])  # look further down these groups' lists
        raw[g_heads[grow]] = np.minimum(seg_len[grow], 4 * size[grow])
    before = np.zeros(c.size, dtype=np.int64)
    if s_ok.any():
        q = s[s_ok]
        before[s_ok] = np.searchsorted(composite, q * stride + j[s_ok], side="right") - seg_start[q]
    return w[w_start[head_of] + j + before]


def _window(d: Donors, free: np.ndarray, seg_lo: np.ndarray,
            size: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The window: the free households among the first ``size[h]`` of each group's list (the list
    starting at ``seg_lo[h]`` in ``d.order``), in order. Returns them, how many each group has,
    where each group starts in them, and each one's position among its group's free donors."""
    idx, _ = _ranges(seg_lo, size)
    w = d.order[idx]
    keep = free[w]
    w = w[keep]  # the window: each group's best free donors, in order
    w_head = np.repeat(np.arange(size.size), size)[keep]
    n_win = np.bincount(w_head, minlength=size.size)
    w_start = np.concatenate([[0], np.cumsum(n_win)[:-1]]).astype(np.int64)
    w_pos = np.arange(w.size, dtype=np.int64) - w_start[w_head]  # position among the group's free
    return w, n_win, w_start, w_pos


def _area_runs(w_cell: np.ndarray, w_pos: np.ndarray, cc: np.ndarray,
               stride: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The window's donors by (group, area) cell ``w_cell``: per cell's run, ``u`` = the free
    donors of other areas before each one, as the sorted key ``run * stride + u`` (``composite``),
    with each run's start; and for each candidate's cell ``cc``, its run (``s``, valid where
    ``s_ok``) and how many window donors share its area (``own``)."""
    o = np.lexsort((w_pos, w_cell))
    wc_sorted = w_cell[o]
    seg_change = np.r_[True, wc_sorted[1:] != wc_sorted[:-1]] if o.size else np.zeros(0, bool)
    seg_start = np.flatnonzero(seg_change)
    seg_no = np.cumsum(seg_change) - 1
    u = w_pos[o] - (np.arange(o.size) - seg_start[seg_no])
    composite = seg_no * stride + u
    seg_key = wc_sorted[seg_start]
    seg_n = np.diff(np.append(seg_start, o.size))
    s = np.searchsorted(seg_key, cc)
    s_ok = s < seg_key.size
    s_ok[s_ok] = seg_key[s[s_ok]] == cc[s_ok]
    own = np.zeros(cc.size, dtype=np.int64)
    own[s_ok] = seg_n[s[s_ok]]
    return composite, seg_start, s, s_ok, own


def _accepted(touched: np.ndarray, c: np.ndarray, dn: np.ndarray) -> np.ndarray:
    """Which proposals (candidate ``c`` with donor ``dn``) are accepted: in priority order, when
    neither household was touched by an earlier proposal of the round. ``touched`` (per household,
    all at the largest int64 between rounds) is used as scratch and left as found."""
    prop = np.arange(c.size, dtype=np.int64)
    np.minimum.at(touched, c, prop)
    np.minimum.at(touched, dn, prop)
    ok = (touched[c] == prop) & (touched[dn] == prop)
    touched[c] = np.iinfo(np.int64).max
    touched[dn] = np.iinfo(np.int64).max
    return ok
