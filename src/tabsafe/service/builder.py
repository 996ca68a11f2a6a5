"""The table builder: a query in, a protected table (or a refusal with a table that passes) out.

For each query (:mod:`tabsafe.service.query`) the builder

1. resolves it against the catalogue and checks the structural release rules (seed 002 §5:
   dimensions, cells, nested recodes) before any record is read;
2. counts the selected records of the prepared code matrix (:mod:`tabsafe.service.prepared`)
   into the table's inner categories with ``numpy.bincount`` — counts, exact cell keys (fixed-point
   sums, METHODS.md §2) and fixed-point magnitude sums — then adds up every margin and subtotal
   (:mod:`tabsafe.service.counting`);
3. protects the whole table, margins included, with the configured method chain
   (:class:`tabsafe.pipeline.Chain`; the cell key method by default: the same records give the
   same noise in every table, so the same query always gets the same answer and averaging
   repeated queries gains nothing, METHODS.md §11);
4. checks the release rules on numbers on the *protected* values (population, population of the
   user-defined area, mean cell size, share of small cells; :mod:`tabsafe.service.rules`), so a
   refusal tells nothing the table would not, and shows no figure of the refused population;
5. withholds the sums and means of cells with few persons or a dominant contribution
   (:mod:`tabsafe.service.magnitudes`); and
6. when a rule refuses the table, searches the nearest table that passes — coarser categories up
   the hierarchy, a larger area, fewer variables, no filter — by uniform-cost search, and offers
   it as a ready-to-send query (:mod:`tabsafe.service.suggest`).

Whether a table that passes may go to a given key now — the record of every population answered
so far — is decided per request by :mod:`tabsafe.service.defence`, after the (shared) answer.

Only a :class:`~tabsafe.model.result.Release` can be turned into a response
(:func:`release_payload` refuses anything else), so no original value can reach a user.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import numpy as np

from tabsafe.errors import InputError, TabsafeError
from tabsafe.pipeline import Chain, step_seeds
from tabsafe.registry import get_method
from tabsafe.service.counting import Counting, _LRU
from tabsafe.service.magnitudes import withheld, withhold
from tabsafe.service.payload import release_payload
from tabsafe.service.prepared import Prepared
from tabsafe.service.query import Query, Resolved, resolve
from tabsafe.service.rules import Check, Outcome, Refusal, Suggestion, data_checks, structural_checks
from tabsafe.service.suggest import moves, suggest


def warm_queries(data: Any) -> list[dict[str, Any]]:
    """One query of each kind a server answers (whole population, an area's margin, an area, a
    filter, a mean), for warming up: code loaded on first use and kept cubes are then in place."""
    plain = sorted((v for v in data.variables if v != data.geography),
                   key=lambda v: len(data.variables[v].hierarchy.order))[:3]
    dims = [{"variable": v} for v in plain]
    kinds: list[dict[str, Any]] = [{"dimensions": dims}]
    if data.geography is not None:
        geo = data.variables[data.geography].hierarchy
        kinds.append({"dimensions": [{"variable": data.geography, "level": 1}, *dims[:2]]})
        kinds.append({"dimensions": dims, "area": [geo.leaves[0]]})
    for name in list(data.numeric)[:1]:
        kinds.append({"dimensions": dims, "where": f"{name} >= 0"})
        kinds.append({"dimensions": dims, "measure": "mean", "variable": name})
    return kinds


class Builder(Counting):
    """Answers queries over prepared data with the configured protection (module docstring)."""

    #: answers are computed on the server's event loop (a few milliseconds of numpy each); a
    #: builder that waits on an engine says False and is run in a thread
    inline = True

    def __init__(self, settings: Any, data: Prepared) -> None:
        self.settings = settings
        self.data = data
        self.rules = settings.rules
        self.limits = settings.limits
        self._chains: dict[str | None, Chain] = {}
        self._chain_lock = threading.Lock()
        self._cache = _LRU(settings.limits.cache_entries)
        self._leaf_cubes = _LRU(settings.limits.cube_cache_cells)
        self._micro_cache: tuple[dict[str, int], dict[str, np.ndarray]] | None = None
        self._micro_lock = threading.Lock()
        self.chain(None)  # build (and validate) the configured chain at start

    # ------------------------------------------------------------------ protection
    def chain(self, numeric: str | None) -> Chain:
        """The configured chain; for sums and means each step that perturbs a magnitude gets the
        numeric variable and its flex point."""
        with self._chain_lock:
            if numeric in self._chains:
                return self._chains[numeric]
            methods = []
            for step in self.settings.chain:
                cls = get_method(step.method)
                params = dict(step.params)
                if numeric is not None and "magnitude" in {p.name for p in cls.parameters()}:
                    params.update(magnitude=numeric, flex_point=self.data.numeric[numeric].flex_point)
                methods.append(cls.from_params(params))
            chain = Chain(tuple(methods))
            if chain.microdata_steps:
                raise InputError("the service protects tables: microdata methods cannot be in its chain")
            if not chain.capabilities().consistent:
                # a value drawn per table or per query is averaged away by asking the same cells
                # in many tables (seed 002 §5); only a cell-level function of the records holds
                wrong = [m.name for m in chain.table_steps if not m.capabilities().consistent]
                raise InputError(
                    f"the table builder serves only methods consistent across tables (the same cell, the same "
                    f"value in every table), so that averaging many answers cannot remove the noise; "
                    f"{', '.join(repr(n) for n in wrong)} with these parameters is not (e.g. use ckm)")
            key = chain.needs().key
            if key is not None and key.scale != self.data.key_scale:
                raise InputError("the chain's record keys differ from the prepared ones: prepare the data again")
            self._chains[numeric] = chain
            return chain

    def _seeds(self, chain: Chain, query: Query) -> list[int | None]:
        if not chain.random:
            return [None] * len(chain.table_steps)
        # the same query gets the same seed, also after a restart: same query, same numbers
        digest = hashlib.sha256(f"{self.settings.seed}:{query.key()}".encode()).digest()
        return step_seeds(int.from_bytes(digest[:8], "big") >> 1, len(chain.table_steps))

    # ------------------------------------------------------------------ answering
    def warm(self) -> int:
        """Make ready before the first query: group the records (:meth:`_micro`, kept on disk)
        and answer one query of each kind (whole population, an area, a filter, a mean), so that
        code loaded on first use and kept cubes are in place. Without it a server's first queries
        take many times longer than the rest, and under load that wait queues every query behind
        them. Answers are deterministic, so the queries answered here change nothing. Returns how
        many warm-up queries were answered."""
        self._micro()
        kinds = warm_queries(self.data)
        answered = 0
        for raw in kinds:
            try:
                self.answer(Query.from_json(raw))
            except TabsafeError:  # a data set whose rules refuse a warm-up query: nothing to warm there
                continue
            answered += 1
        return answered

    def evaluate(self, query: Query) -> tuple[Outcome, Resolved]:
        """The outcome of one query, no suggestion search (cached by canonical query)."""
        r = resolve(query, self.data, self.limits)
        key = r.query.key()
        hit = self._cache.get(key)
        if hit is not None:
            return hit, r
        checks = structural_checks(self.rules, r)
        if not all(c.passed for c in checks):
            outcome = Outcome(r.query, tuple(checks))
        else:
            chain = self.chain(r.numeric)
            protection = chain.protect(self.tabulate(r), seeds=self._seeds(chain, r.query))
            area = self.area_table(r)
            area_release = None
            if area is not None:
                area_chain = self.chain(None)
                area_release = area_chain.protect(area, seeds=self._seeds(area_chain, r.query)).release.table
            checks += data_checks(self.rules, r, protection.release.table, area_release)
            payload = release_payload(protection.release, r) if all(c.passed for c in checks) else None
            if payload is not None:
                notes = list(dict.fromkeys(protection.report.notes))
                if r.numeric is not None:
                    notes.append(self._withhold(r, payload))
                payload["notes"] = notes
                payload["methods"] = [m.name for m in chain.methods]
            outcome = Outcome(r.query, tuple(checks), payload, r.grid_cells)
        self._cache.put(key, outcome)
        return outcome, r

    def _withhold(self, r: Resolved, payload: dict[str, Any]) -> str:
        """Null the sums and means the magnitude rules do not let out; the note saying so."""
        rules = self.settings.magnitudes
        counts = np.array([row[payload["columns"].index("count")] for row in payload["rows"]], dtype=float)
        mask = withheld(counts, self.contributions(r), rules)
        withhold(payload, r.numeric, mask)  # type: ignore[arg-type]
        return (f"sums and means are shown only for cells of at least {rules.min_count} (published count) whose "
                f"{rules.dominance_n} largest contribution(s) make at most {rules.dominance_k:g}% of the total and "
                f"whose total less the two largest is at least {rules.p_percent:g}% of the largest")

    def answer(self, query: Query) -> Outcome | Refusal:
        """The protected table, or a refusal with the nearest table that passes."""
        outcome, _ = self.evaluate(query)
        if outcome.passed:
            return outcome
        suggestion, tried = self.suggest(outcome.query)
        return Refusal(outcome, suggestion, tried)

    def suggest(self, query: Query, accept: Any = None, tries: int | None = None) -> tuple[Suggestion | None, int]:
        """The nearest table that passes (:func:`tabsafe.service.suggest.suggest`)."""
        return suggest(self, query, accept, tries)


__all__ = ["Builder", "Check", "Outcome", "Refusal", "Suggestion", "moves", "release_payload", "warm_queries"]
