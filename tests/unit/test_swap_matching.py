"""The vectorised donor matching against a plain reading of its definition (tabsafe.protect.
swapping._matching): the windows it looks through must give exactly what the whole donor lists
give, also when a group's best donors are mostly in the candidates' own areas or already used."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tabsafe.protect.swapping._matching import donors, match


def reference(candidates: np.ndarray, group: np.ndarray, area: np.ndarray, free: np.ndarray,
              key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rounds over whole lists: the candidate ranked r among its group's remaining candidates
    (those with a donor left) proposes the (r mod n)-th free household of its group outside its
    area, best key first; proposals are accepted in order when neither household was touched by
    an earlier proposal of the round."""
    free = free.copy()
    donor = np.full(candidates.size, -1)
    lists = {g: sorted(np.flatnonzero(group == g), key=lambda h: -key[h]) for g in np.unique(group)}
    remaining = sorted(range(candidates.size), key=lambda p: group[candidates[p]])  # stable: priority kept
    while remaining:
        remaining = [p for p in remaining if free[candidates[p]]]
        proposals = []
        rank: dict[int, int] = {}
        kept = []
        for p in remaining:
            c = candidates[p]
            eligible = [h for h in lists[group[c]] if free[h] and area[h] != area[c]]
            if not eligible:
                continue  # never again: donors only become fewer
            kept.append(p)
            r = rank.get(group[c], 0)
            rank[group[c]] = r + 1
            proposals.append((p, eligible[r % len(eligible)]))
        remaining = kept
        if not proposals:
            break
        touched: set[int] = set()
        accepted = set()
        for p, d in proposals:
            c = candidates[p]
            if c not in touched and d not in touched:
                accepted.add(p)
                donor[p] = d
            touched.update((c, d))
        for p in accepted:
            free[candidates[p]] = free[donor[p]] = False
        remaining = [p for p in remaining if p not in accepted]
    return donor, free


@settings(max_examples=30)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(50, 900), groups=st.integers(1, 3),
       areas=st.integers(2, 6), share=st.sampled_from([0.02, 0.2, 0.6]), used=st.sampled_from([0.0, 0.5, 0.9]))
def test_windowed_matching_is_the_whole_list_matching(seed, n, groups, areas, share, used) -> None:
    rng = np.random.default_rng(seed)
    group = rng.integers(0, groups, n)
    # area 0 is large and holds the best keys, so the heads of the lists are mostly one area
    area = np.where(rng.random(n) < 0.7, 0, rng.integers(1, areas, n))
    key = rng.random(n) + np.where(area == 0, 1.0, 0.0)
    free = rng.random(n) >= used * (key > 1)  # many of the best households are already used
    pool = np.flatnonzero(free)
    candidates = rng.permutation(pool)[: max(1, int(share * pool.size))] if pool.size else pool
    got = match(candidates, donors(group, area, key), free)
    want_donor, want_free = reference(candidates, group, area, free, key)
    assert np.array_equal(got.donor, want_donor)
    assert np.array_equal(got.free, want_free)
