"""Targeted and random record swapping on Spark: the embedded engine's swaps, area by area
(issue #18; the procedure is :mod:`._swap`'s).

The same seed gives the same swapped geography for every record and the same report as the
embedded engine, because every draw and every decision is made by the same functions on the
same numbers:

1. **Checks** (distributed aggregations, in the embedded engine's order, so bad input gets the
   same one-line error): missing values, a geography that does not nest, a household in two
   areas or with two values of a carried variable.
2. **Households** (one range shuffle of the records' few variables by household id): per
   household, its top-level area, the count of its rarest risk combination there, and its
   first record's similarity values — the households sorted by identifier, so each range knows
   its households' positions and draws their keys from the population's stream
   (:func:`~._swap.top_level_draws`, the stream advanced to the range).
3. **Top level, on the driver** (:func:`~._swap.top_level`, the embedded engine's function):
   its input is the households at risk in a whole top-level area and, per similarity group
   with such households, the *head* of the donor list — the best keys, merged from each range's
   own best. The head is long enough when :func:`~._swap.heads_suffice` says so (about
   ``2·C + C_g`` households outside the candidates' areas; ``C`` candidates in all), else it is
   fetched four times longer. The driver holds ``C`` + a few times ``C`` households per group,
   whatever the population.
4. **Within top-level areas, in parallel** (``groupBy(top area).applyInArrow``): each area's
   records go to one task, which codes them (:func:`~._swap.household_codes`) and runs
   :func:`~._swap.swap_within` — the function the embedded engine runs on every area at once —
   with the area's own random stream and what the top level did to its households. Tasks give
   back one row per household swapped or at risk, and their report numbers
   (:class:`~._swap.Tally`, which add up).
5. **The swap**: the records joined with the swapped households' new geography (broadcast when
   they are few, so the records keep their order); nothing but the report reaches the driver.

What crosses the network: the records' swapping variables twice (step 2 by household, step 4
by top-level area), the households at risk and the heads once (to the driver), and the swapped
households once (broadcast). A geography of one level has no areas to split: step 4 runs in one
task. Every record its own household (no household variable) is not supported here.
"""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tabsafe.errors import InputError, param
from tabsafe.protect.swapping._swap import (
    ROLES,
    SwapSpec,
    Tally,
    TopLevel,
    TopLevelInput,
    check_spec,
    first_risky_level,
    heads_suffice,
    household_codes,
    household_tally,
    profile_name,
    report,
    roles,
    swap_within,
    top_level,
    top_level_draws,
)

#: record order (file, position): a household's first record gives its similarity values
_FILE, _ROW = "__tabsafe_file", "__tabsafe_row"
#: swapped households up to this many are broadcast to the records (which then keep their order)
BROADCAST_HOUSEHOLDS = 2_000_000


@dataclass(frozen=True)
class SparkSwap:
    """The swapped records and the report's numbers.

    Attributes:
        data: the records with swapped geography (a Spark DataFrame, the input's columns).
        flagged: the same with a ``swapped`` flag per record (what ``tabsafe swap`` writes).
        evaluation: per record, the household id and what happened to its household (swapped,
            level, role, profile, partner, highest risky level).
        figures, private, notes: the report's, as :func:`~._swap.report` makes them.
        cached: persisted frames the records are computed from.
        driver: what reached the driver for the top level (``candidates``: households at risk
            there; ``head_rows``: donor-list rows fetched in the last pass; ``passes``).
    """

    data: Any
    flagged: Any
    evaluation: Any
    figures: dict[str, Any]
    private: dict[str, Any]
    notes: tuple[str, ...]
    cached: tuple[Any, ...]
    driver: dict[str, int] = field(default_factory=dict)


def swap_on_spark(engine: Any, microdata: Any, spec: SwapSpec, seed: int) -> SparkSwap:
    """Swap the records of ``microdata`` on ``engine`` (a :class:`~tabsafe.engines.spark.SparkEngine`)
    as :func:`~._swap.swap_records` swaps them in one process."""

    where = microdata.source.describe()
    session = engine.open(microdata.source)
    frame = session.frame
    check_spec(frame.columns, spec, where)
    if spec.household is None:
        raise InputError(f"on Spark, {param('household')} must name a household variable (for every record its "
                         "own household, give a record identifier such as person_id)", where=where)
    with engine.errors("swapping failed", where=where):
        _check_household_type(frame, spec.household, where)
        records = _ordered(frame, microdata.source, spec)
        if on_driver(spec):
            return _swap_on_driver(frame, records, spec, seed, where)
        households = _households(records, spec)
        try:
            _check(frame, households, spec, where)
            top = _top_level(households, spec, seed) if spec.targeted else None
        finally:
            households.unpersist()
        out = _swap_areas(frame, records, spec, seed, top, where)
        if top is not None:
            out = replace(out, driver={"candidates": top.candidates, "head_rows": top.head_rows,
                                       "passes": top.passes})
        return out


# ------------------------------------------------------------------------------ 1. checks
def _check_household_type(frame: Any, household: str, where: str) -> None:
    kind = frame.schema[household].dataType.typeName()
    if kind not in {"byte", "short", "integer", "long", "string", "varchar", "char"}:
        raise InputError(f"on Spark, the household variable {household!r} must hold integers or text; it holds "
                         f"{kind} values", where=where)


def _check(frame: Any, households: Any, spec: SwapSpec, where: str) -> None:
    """The embedded engine's checks in its order (:func:`~._swap.household_codes`)."""
    from pyspark.sql import functions as F

    needed = list(dict.fromkeys([spec.household, *spec.geography, *spec.carry_along,
                                 *(v for p in spec.similar for v in p), *(spec.risk_vars or ())]))
    row = frame.select(F.count(F.lit(1)).alias("__n"),
                       *[F.sum(F.col(v).isNull().cast("long")).alias(v) for v in needed]).first()
    n = int(row["__n"])
    missing = {v: int(row[v] or 0) for v in needed}

    def no_nulls(name: str, option: str) -> None:
        if missing[name]:
            raise InputError(f"variable {name!r} in {param(option)} has {missing[name]:,} missing values", where=where)

    no_nulls(spec.household, "household")
    for v in spec.geography:
        no_nulls(v, "geography")
    for k in range(1, len(spec.geography)):
        child, parent = spec.geography[k], spec.geography[k - 1]
        bad = (frame.select(F.col(child).cast("string").alias("c"), F.col(parent).cast("string").alias("p"))
               .distinct().groupBy("c").agg(F.sort_array(F.collect_set("p")).alias("ps"))
               .filter(F.size("ps") > 1).orderBy("c").limit(1).collect())
        if bad:
            c, ps = bad[0]["c"], bad[0]["ps"]
            raise InputError(f"the geography in {param('geography')} does not nest: {child} {c!r} lies in "
                             f"{parent} {ps[0]!r} and in {ps[1]!r}", where=where)
    constant = [(spec.geography[-1], "has members in different areas")] if n else []
    first_bad = {}
    if constant or spec.carry_along:
        names = [v for v, _ in constant] + list(spec.carry_along)
        aggs = [F.min(F.when(F.col(f"__lo{i}") != F.col(f"__hi{i}"),
                             F.struct(F.col(spec.household).alias("h"), F.col(f"__lo{i}").alias("lo"),
                                      F.col(f"__hi{i}").alias("hi")))).alias(f"__bad{i}")
                for i in range(len(names))]
        got = households.agg(*aggs).first()
        first_bad = {name: got[f"__bad{i}"] for i, name in enumerate(names)}

    def one_value(name: str, what: str) -> None:
        bad = first_bad.get(name)
        if bad is not None:
            raise InputError(f"household {bad['h']} ({spec.household}) {what}: {name} {bad['lo']!r} and "
                             f"{bad['hi']!r}", where=where)

    if n:
        one_value(spec.geography[-1], "has members in different areas")
    for v in spec.carry_along:
        no_nulls(v, "carry_along")
    for v in spec.carry_along:
        one_value(v, "has two values of a variable carried along with the geography")
    for prof in spec.similar:
        for v in prof:
            no_nulls(v, "similar")
    if spec.targeted and n:
        for v in spec.risk_vars or ():
            no_nulls(v, "risk_vars")


# ------------------------------------------------------------------------------ 2. households
def _ordered(frame: Any, source: Any, spec: SwapSpec) -> Any:
    """The swapping variables with each record's place in the data (``_FILE``, ``_ROW``), the
    order the embedded engine reads them in: files by path, rows in file order. Only the first
    record's similarity values depend on it; without similarity variables it is not computed."""
    from pyspark.sql import functions as F

    from tabsafe.model.microdata import FileSource

    names = list(dict.fromkeys([spec.household, *spec.geography, *(spec.risk_vars or ()), *spec.risk,
                                *([spec.flag] if spec.flag else []), *(v for p in spec.similar for v in p),
                                *spec.carry_along]))
    if not spec.similar:
        return frame.select(*names, F.lit(0).alias(_FILE), F.lit(0).cast("long").alias(_ROW))
    if isinstance(source, FileSource) and (source.is_folder or any(ch in source.path for ch in "*?[")):
        # several files: numbered in the order their local paths sort (Spark gives them as URIs)
        with_path = frame.select(*names, F.col("_metadata.file_path").alias("__path"),
                                 F.monotonically_increasing_id().alias(_ROW))
        paths = [r[0] for r in with_path.select("__path").distinct().collect()]
        ranked = sorted(paths, key=lambda p: urllib.parse.unquote(urllib.parse.urlparse(p).path))
        index = frame.sparkSession.createDataFrame([(p, i) for i, p in enumerate(ranked)],
                                                   f"__path string, {_FILE} int")
        return with_path.join(F.broadcast(index), "__path").drop("__path")
    # one file or an in-memory table: Spark's row ids grow in the data's order
    return frame.select(*names, F.lit(0).alias(_FILE), F.monotonically_increasing_id().alias(_ROW))


def _households(records: Any, spec: SwapSpec) -> Any:
    """One row per household, the households range-partitioned and sorted by identifier
    (persisted: the checks and the top level read it): its top-level area, the count of its
    rarest risk combination there (``__mc0``), its first record's similarity values (one JSON
    text per profile, ``__p{i}``), the smallest and largest value of each variable that must be
    constant in it (``__lo{i}``, ``__hi{i}``), and its first record's geography and carried
    values (``__new``: what its partner receives)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    spark = records.sparkSession
    hh = spec.household
    top = spec.geography[0]
    data = records
    if spec.targeted:
        combos = records.groupBy(top, *spec.risk_vars).agg(F.count(F.lit(1)).alias("__c0"))
        data = records.join(F.broadcast(combos), on=[top, *spec.risk_vars], how="inner")
    order = F.struct(F.col(_FILE), F.col(_ROW))
    checked = [spec.geography[-1], *spec.carry_along]
    aggs = [F.min(top).alias("__top")]
    aggs.append(F.min("__c0").alias("__mc0") if spec.targeted else F.lit(0).cast("long").alias("__mc0"))
    sim = list(dict.fromkeys(v for p in spec.similar for v in p))
    if sim:
        aggs.append(F.min_by(F.struct(*sim), order).alias("__sim"))
    for i, v in enumerate(checked):
        aggs += [F.min(F.col(v).cast("string")).alias(f"__lo{i}"), F.max(F.col(v).cast("string")).alias(f"__hi{i}")]
    aggs.append(F.min_by(F.struct(*spec.geography, *spec.carry_along), order).alias("__new"))
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    grouped = data.repartitionByRange(partitions, hh).groupBy(hh).agg(*aggs)
    profiles = [F.to_json(F.struct(*[F.col("__sim")[v].alias(v) for v in p])) if p else F.lit("")
                for p in spec.profiles]
    out = grouped.select("*", *[e.alias(f"__p{i}") for i, e in enumerate(profiles)])
    return out.sortWithinPartitions(hh).persist(StorageLevel.MEMORY_AND_DISK)


# ------------------------------------------------------------------------------ 3. the top level
def _task_partition() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return int(ctx.partitionId()) if ctx is not None else 0


class _Sizes:
    """Households per range (a Spark task)."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        n = sum(b.num_rows for b in batches)
        yield pa.RecordBatch.from_arrays([pa.array([_task_partition()], pa.int32()), pa.array([n], pa.int64())],
                                         names=["pid", "n"])


class _TopRows:
    """A Spark task over one range of households (identifier order): their donor keys and
    tie-breaks from the population's stream, and either the households at risk at the top
    level (``heads`` None) or, per profile and group, the range's ``heads[p][group]`` best keys."""

    def __init__(self, spec: SwapSpec, seed: int, n_households: int, offsets: dict[int, int],
                 heads: list[dict[str, int]] | None) -> None:
        self.spec, self.seed, self.n, self.offsets, self.heads = spec, seed, n_households, offsets, heads

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from tabsafe._arrow import to_numpy

        batches = list(batches)
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        if table.num_rows == 0:
            return
        pid = _task_partition()
        start = self.offsets[pid]
        mc0 = to_numpy(table.column("__mc0")).astype(np.int64)
        key, tiebreak = top_level_draws(self.seed, self.n, 1.0 / np.maximum(mc0, 1), start)
        keep = np.zeros(table.num_rows, dtype=bool)
        head_bits = np.zeros(table.num_rows, dtype=np.int64)
        if self.heads is None:
            keep = mc0 < self.spec.k
        else:
            for p, wanted in enumerate(self.heads):
                if not wanted:
                    continue
                groups = pc.dictionary_encode(table.column(f"__p{p}")).combine_chunks()
                labels = groups.dictionary.to_pylist()
                codes = to_numpy(groups.indices).astype(np.int64)
                for g, label in enumerate(labels):
                    m = wanted.get(label, 0)
                    if not m:
                        continue
                    members = np.flatnonzero(codes == g)
                    best = members[np.argsort(-key[members], kind="stable")[:m]]
                    keep[best] = True
                    head_bits[best] |= 1 << p
        rows = np.flatnonzero(keep)
        idx = pa.array(rows)
        top = table.column("__top").take(idx)
        cols = {
            "pid": pa.array(np.full(rows.size, pid, dtype=np.int32)),
            "rank": pa.array(start + rows),
            "hh": table.column(self.spec.household).take(idx),
            "top": pc.cast(top, pa.string()),
            "mc0": pa.array(mc0[rows]),
            "key": pa.array(key[rows]),
            "tiebreak": pa.array(tiebreak[rows]),
            "heads": pa.array(head_bits[rows]),
        }
        for p in range(len(self.spec.profiles)):
            cols[f"p{p}"] = table.column(f"__p{p}").take(idx)
        out = pa.Table.from_arrays([c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in cols.values()],
                                   names=list(cols))
        yield from out.to_batches()


@dataclass(frozen=True)
class _TopOnDriver:
    """The top level's pairs as the areas need them.

    Attributes:
        result: :func:`~._swap.top_level`'s result on the reduced input.
        hh: per household of the reduced input, its id (Python values).
        top: per household, its top-level area's code.
        heads_fetched: households the heads held in all (for the report of where work ran).
        candidates, head_rows, passes: rows the driver received (the households at risk at the
            top level, the heads' rows of the last pass) and the passes over the households.
    """

    result: TopLevel
    hh: list[Any]
    top: list[str]
    heads_fetched: int
    candidates: int = 0
    head_rows: int = 0
    passes: int = 1


def _top_level(households: Any, spec: SwapSpec, seed: int) -> _TopOnDriver:
    """Step 3 on the driver, from the households at risk and the heads of their groups' donor
    lists (:func:`~._swap.heads_suffice` decides how long)."""
    sizes = households.mapInArrow(_Sizes(), "pid int, n long").collect()
    by_pid = {int(r["pid"]): int(r["n"]) for r in sizes}
    offsets, total = {}, 0
    for pid in sorted(by_pid):
        offsets[pid] = total
        total += by_pid[pid]
    schema = _top_schema(households, spec)
    n_profiles = len(spec.profiles)
    cands = households.mapInArrow(_TopRows(spec, seed, total, offsets, None), schema).toArrow()
    if cands.num_rows == 0:
        t, hh, top, _, _ = _reduced(cands, None, n_profiles, spec.k)
        return _TopOnDriver(top_level(t, spec), hh, top, 0, 0, 0, 1)
    n_cand = cands.num_rows
    # a first guess of each head's length: the bound of heads_suffice, twice over (half the
    # group may live in the candidates' area), grown fourfold for the groups it falls short
    wanted: list[dict[str, int]] = []
    for p in range(n_profiles):
        labels, counts = np.unique(np.array(cands.column(f"p{p}").to_pylist(), dtype=object), return_counts=True)
        wanted.append({str(g): 2 * (2 * n_cand + int(c)) + 64 for g, c in zip(labels.tolist(), counts.tolist())})
    passes = 1
    while True:
        passes += 1
        fetched = households.mapInArrow(_TopRows(spec, seed, total, offsets, wanted), schema).toArrow()
        heads, complete = _merge_heads(fetched, wanted)
        t, hh, top, in_head, group_labels = _reduced(cands, (fetched, heads), n_profiles, spec.k)
        complete_by_group = [np.array([complete[p].get(g, False) for g in group_labels[p]], dtype=bool)
                             for p in range(n_profiles)]
        short = heads_suffice(t, spec, in_head, complete_by_group)
        if not any(s.size for s in short):
            return _TopOnDriver(top_level(t, spec), hh, top, int(sum(h.sum() for h in heads)), n_cand,
                                fetched.num_rows, passes)
        for p, groups in enumerate(short):
            for g in groups.tolist():
                wanted[p][group_labels[p][g]] *= 4


def _top_schema(households: Any, spec: SwapSpec) -> Any:
    from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType, StructField, StructType

    fields = [StructField("pid", IntegerType()), StructField("rank", LongType()),
              StructField("hh", households.schema[spec.household].dataType), StructField("top", StringType()),
              StructField("mc0", LongType()), StructField("key", DoubleType()), StructField("tiebreak", DoubleType()),
              StructField("heads", LongType())]
    fields += [StructField(f"p{p}", StringType()) for p in range(len(spec.profiles))]
    return StructType(fields)


def _merge_heads(fetched: pa.Table, wanted: list[dict[str, int]]) -> tuple[list[np.ndarray], list[dict[str, bool]]]:
    """Per profile, which fetched rows are in the population's head of their group (the best
    keys among the ranges' best), and whether each head is its whole group (no range gave as
    many as asked: each gave all it had)."""
    key = fetched.column("key").to_numpy()
    bits = fetched.column("heads").to_numpy()
    pid = fetched.column("pid").to_numpy()
    heads, complete = [], []
    for p, asked in enumerate(wanted):
        group = np.array(fetched.column(f"p{p}").to_pylist(), dtype=object)
        mine = (bits >> p) & 1 == 1
        head = np.zeros(fetched.num_rows, dtype=bool)
        whole: dict[str, bool] = {}
        for label, m in asked.items():
            rows = np.flatnonzero(mine & (group == label))
            per_range = np.bincount(pid[rows]) if rows.size else np.zeros(1, np.int64)
            whole[label] = bool(per_range.max() < m)
            head[rows[np.argsort(-key[rows], kind="stable")[:m]]] = True
        heads.append(head)
        complete.append(whole)
    return heads, complete


def _reduced(cands: pa.Table, fetched: tuple[pa.Table, list[np.ndarray]] | None, n_profiles: int, k: int) -> tuple[
        TopLevelInput, list[Any], list[str], list[np.ndarray], list[list[str]]]:
    """The top level's reduced input from the candidates and the heads (``fetched``: the rows
    and, per profile, which of them are in the head), each household once, in identifier order
    (rank). Also returns per household its id and top-level area code, per profile which
    households are in the head, and the profile groups' labels (the ids' meaning)."""
    if fetched is None:
        table, flags = cands, [np.zeros(cands.num_rows, dtype=bool)] * n_profiles
    else:
        rows, heads = fetched
        table = pa.concat_tables([cands, rows.select(cands.column_names)])
        pad = np.zeros(cands.num_rows, dtype=bool)
        flags = [np.concatenate([pad, h]) for h in heads]
    needed = np.logical_or.reduce(flags) if flags else np.zeros(table.num_rows, bool)
    needed[:cands.num_rows] = True
    rows_needed = np.flatnonzero(needed)
    rank = table.column("rank").to_numpy()[rows_needed]
    uniq, first, inverse = np.unique(rank, return_index=True, return_inverse=True)
    in_head = []
    for f in flags:
        h = np.zeros(uniq.size, dtype=bool)
        np.logical_or.at(h, inverse.reshape(-1), f[rows_needed])
        in_head.append(h)
    sub = table.take(pa.array(rows_needed[first]))
    top = sub.column("top").to_pylist()
    areas = {label: i for i, label in enumerate(dict.fromkeys(top))}
    profiles, group_labels = [], []
    for p in range(n_profiles):
        values = sub.column(f"p{p}").to_pylist()
        groups = {label: i for i, label in enumerate(dict.fromkeys(values))}
        profiles.append(np.array([groups[x] for x in values], dtype=np.int64))
        group_labels.append(list(groups))
    mc0 = sub.column("mc0").to_numpy().astype(np.int64)
    t = TopLevelInput(area=np.array([areas[x] for x in top], dtype=np.int64), profiles=tuple(profiles),
                      risk=1.0 / mc0, at_risk=mc0 < k, key=sub.column("key").to_numpy(),
                      tiebreak=sub.column("tiebreak").to_numpy())
    return t, sub.column("hh").to_pylist(), top, in_head, group_labels


# ------------------------------------------------------------------------------ 4-5. areas, the swap
@dataclass(frozen=True)
class _LevelZero:
    """What the top level did to households, for the areas' tasks: per household id, its role,
    partner, profile and the geography (and carried values) it receives."""

    ids: list[Any]
    role: list[int]
    partner: list[Any]
    profile: list[int]
    new: list[tuple[Any, ...]]
    counted: dict[str, int]


def _level_zero(top: _TopOnDriver | None, households_new: dict[Any, tuple[Any, ...]], spec: SwapSpec) -> _LevelZero:
    if top is None:
        return _LevelZero([], [], [], [], [], {})
    p = top.result.pairs
    ids, role, partner, profile, new = [], [], [], [], []
    counted: dict[str, int] = {}
    for c, d, prof in zip(p.cand.tolist(), p.donor.tolist(), p.profile.tolist()):
        a, b = top.hh[c], top.hh[d]
        ids += [a, b]
        role += [0, 2]
        partner += [b, a]
        profile += [prof, prof]
        new += [households_new[b], households_new[a]]
        label = top.top[c] if len(spec.geography) > 1 else "(all)"
        counted[label] = counted.get(label, 0) + 1
    return _LevelZero(ids, role, partner, profile, new, counted)


class _AreaSwap:
    """A Spark task over one top-level area's records (every record, for a one-level
    geography): :func:`~._swap.swap_within` as the embedded engine runs it, then one row per
    household swapped or at risk and one row with the area's :class:`~._swap.Tally`."""

    def __init__(self, spec: SwapSpec, seed: int, level0: _LevelZero, schema: pa.Schema) -> None:
        self.spec, self.seed, self.level0, self.schema = spec, seed, level0, schema

    def __call__(self, table: pa.Table) -> pa.Table:
        from tabsafe._arrow import to_numpy

        spec = self.spec
        if spec.similar:
            table = table.sort_by([(_FILE, "ascending"), (_ROW, "ascending")])
        data = table.drop_columns([_FILE, _ROW])
        hh, codes = household_codes(data, spec, where="data")
        H = codes.n
        K = len(spec.geography)
        ids = data.column(spec.household).take(pa.array(hh.first)).combine_chunks()
        lz = self.level0
        if lz.ids:
            at = pc.index_in(ids, value_set=pa.array(lz.ids, type=ids.type))
            used = to_numpy(pc.is_valid(at)).astype(bool)
            at = to_numpy(pc.fill_null(at, -1)).astype(np.int64)
        else:
            used = np.zeros(H, dtype=bool)
            at = np.full(H, -1, dtype=np.int64)
        scope = codes.top_labels[0] if K > 1 else "(all)"
        counted = np.array([lz.counted.get(scope, 0)], dtype=np.int64)
        within = swap_within(codes, spec, self.seed, free=~used, counted=counted)
        r = roles(H, within.pairs)
        swapped = r.swapped | used
        tally = within.tally.merge(household_tally(codes, swapped, r.partner, everywhere=used))
        risk = first_risky_level(codes) if spec.targeted else np.full(H, -1, dtype=np.int64)
        local = np.flatnonzero((r.swapped | (risk >= 0)) & ~used)
        first_level = np.flatnonzero(used)
        names = list(self.schema.names)
        parts = [self._rows(data, hh.first, ids, local, r, risk, names),
                 self._level_zero_rows(ids, first_level, at[first_level], risk, names)]
        tally_row = {n: pa.nulls(1, self.schema.field(n).type) for n in names}
        tally_row["__tally"] = pa.array([tally.to_json()], pa.string())
        parts.append(pa.Table.from_arrays([tally_row[n] for n in names], schema=self.schema))
        return pa.concat_tables(parts)

    def _rows(self, data: pa.Table, first: np.ndarray, ids: pa.Array, idx: np.ndarray, r: Any, risk: np.ndarray,
              names: list[str]) -> pa.Table:
        spec = self.spec
        swapped = r.swapped[idx]
        missing = ~swapped
        partner = np.where(swapped, r.partner[idx], 0)
        source_rows = pa.array(first[partner], mask=missing)
        cols: dict[str, Any] = {spec.household: ids.take(pa.array(idx)), "__swapped": pa.array(swapped)}
        for i, v in enumerate((*spec.geography, *spec.carry_along)):
            col = data.column(v).take(source_rows)
            cols[f"__new{i}"] = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        cols["__swap_level"] = _names(r.level[idx], spec.geography)
        cols["__swap_role"] = _names(r.role[idx], ROLES)
        cols["__swap_profile"] = _names(r.profile[idx], [profile_name(p) for p in spec.profiles])
        cols["__partner"] = ids.take(pa.array(partner, mask=missing))
        cols["__risk_level"] = _names(risk[idx], spec.geography)
        cols["__tally"] = pa.nulls(idx.size, pa.string())
        return pa.Table.from_arrays([cols[n].cast(self.schema.field(n).type) for n in names], schema=self.schema)

    def _level_zero_rows(self, ids: pa.Array, idx: np.ndarray, at: np.ndarray, risk: np.ndarray,
                         names: list[str]) -> pa.Table:
        spec = self.spec
        lz = self.level0
        take = at.tolist()
        cols: dict[str, Any] = {spec.household: ids.take(pa.array(idx)),
                                "__swapped": pa.array(np.ones(idx.size, dtype=bool))}
        for i in range(len(spec.geography) + len(spec.carry_along)):
            cols[f"__new{i}"] = pa.array([lz.new[j][i] for j in take], type=self.schema.field(f"__new{i}").type)
        cols["__swap_level"] = _names(np.zeros(idx.size, dtype=np.int64), spec.geography)
        cols["__swap_role"] = _names(np.array([lz.role[j] for j in take], dtype=np.int64), ROLES)
        cols["__swap_profile"] = _names(np.array([lz.profile[j] for j in take], dtype=np.int64),
                                        [profile_name(p) for p in spec.profiles])
        cols["__partner"] = pa.array([lz.partner[j] for j in take], type=ids.type)
        cols["__risk_level"] = _names(risk[idx], spec.geography)
        cols["__tally"] = pa.nulls(idx.size, pa.string())
        return pa.Table.from_arrays([cols[n].cast(self.schema.field(n).type) for n in names], schema=self.schema)


def _names(codes: np.ndarray, labels: Sequence[str]) -> pa.Array:
    """``labels[code]`` per element, null where the code is negative."""
    dictionary = pa.array(list(labels), pa.string())
    mask = codes < 0
    return pa.DictionaryArray.from_arrays(pa.array(np.where(mask, 0, codes).astype(np.int32), mask=mask),
                                          dictionary).cast(pa.string())


def _swap_areas(frame: Any, records: Any, spec: SwapSpec, seed: int, top: _TopOnDriver | None, where: str) -> SparkSwap:
    """Steps 4 and 5: the areas' tasks, the report, the records with their new geography."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import BooleanType, StringType, StructField, StructType

    hh = spec.household
    moved = (*spec.geography, *spec.carry_along)
    new_values: dict[Any, tuple[Any, ...]] = {}
    if top is not None and top.result.pairs.cand.size:
        involved = sorted({top.hh[i] for i in (*top.result.pairs.cand.tolist(), *top.result.pairs.donor.tolist())})
        wanted = frame.sparkSession.createDataFrame([(x,) for x in involved],
                                                    StructType([StructField(hh, frame.schema[hh].dataType)]))
        rows = (records.join(F.broadcast(wanted), on=hh).groupBy(hh)
                .agg(F.min_by(F.struct(*moved), F.struct(F.col(_FILE), F.col(_ROW))).alias("v")).collect())
        new_values = {r[hh]: tuple(r["v"]) for r in rows}
    level0 = _level_zero(top, new_values, spec)
    fields = [StructField(hh, frame.schema[hh].dataType), StructField("__swapped", BooleanType())]
    fields += [StructField(f"__new{i}", frame.schema[v].dataType) for i, v in enumerate(moved)]
    fields += [StructField(n, StringType()) for n in ("__swap_level", "__swap_role", "__swap_profile")]
    fields += [StructField("__partner", frame.schema[hh].dataType), StructField("__risk_level", StringType()),
               StructField("__tally", StringType())]
    schema = StructType(fields)
    area = F.col(spec.geography[0]) if len(spec.geography) > 1 else F.lit(0)
    task = _AreaSwap(spec, seed, level0, to_arrow_schema(schema))
    with _quiet_udf_warnings():
        # a plain function without type hints: pyspark 4 fails on a callable object's hints
        households = (records.groupBy(area).applyInArrow(lambda table: task(table), schema)
                      .persist(StorageLevel.MEMORY_AND_DISK))
    tallies = [Tally.from_json(r[0]) for r in households.filter(F.col("__tally").isNotNull()).select("__tally").collect()]
    parts = [top.result.tally] if top is not None else []
    figures, private, notes = report(Tally.total([*parts, *tallies]), spec)
    rows = households.filter(F.col("__tally").isNull())
    return _joined(frame, rows, spec, figures, private, notes, (households,))


def _joined(frame: Any, rows: Any, spec: SwapSpec, figures: dict[str, Any], private: dict[str, Any],
            notes: tuple[str, ...], cached: tuple[Any, ...]) -> SparkSwap:
    """Step 5: the records with their households' new geography, and the evaluation, from one
    row per household swapped or at risk (``rows``: the household id, ``__swapped``, ``__new{i}``
    and the evaluation's ``__swap_*``, ``__partner``, ``__risk_level``)."""
    from pyspark.sql import functions as F

    hh = spec.household
    moved = (*spec.geography, *spec.carry_along)
    changes = rows.filter(F.col("__swapped")).select(hh, *[F.col(f"__new{i}") for i in range(len(moved))],
                                                     F.lit(True).alias("__moved"))
    if figures["households_swapped"] <= BROADCAST_HOUSEHOLDS:
        changes = F.broadcast(changes)
    joined = frame.join(changes, on=hh, how="left")
    out_cols = []
    for c in frame.columns:
        if c in moved:
            out_cols.append(F.coalesce(F.col(f"__new{moved.index(c)}"), F.col(c)).alias(c))
        else:
            out_cols.append(F.col(c))
    flag = F.coalesce(F.col("__moved"), F.lit(False)).alias("swapped")
    data = joined.select(*out_cols)
    flagged = joined.select(*[e for e, name in zip(out_cols, frame.columns) if name != "swapped"], flag)
    ev_cols = [F.col(hh), F.coalesce(F.col("__swapped"), F.lit(False)).alias("swapped"),
               F.col("__swap_level").alias("swap_level"), F.col("__swap_role").alias("swap_role"),
               F.col("__swap_profile").alias("swap_profile"), F.col("__partner").alias("partner")]
    if spec.targeted:
        ev_cols.append(F.col("__risk_level").alias("risk_level"))
    per_household = rows.drop("__tally")
    if rows.count() <= BROADCAST_HOUSEHOLDS:  # (persisted) broadcast: the records keep their order
        per_household = F.broadcast(per_household)
    evaluation = frame.select(hh).join(per_household, on=hh, how="left").select(*ev_cols)
    return SparkSwap(data=data, flagged=flagged, evaluation=evaluation, figures=figures, private=private,
                     notes=notes, cached=cached)


# ------------------------------------------------------------------------------ the whole population on the driver
def on_driver(spec: SwapSpec) -> bool:
    """Whether the swap cannot split per top-level area: donors from anywhere below the top
    level, or a risk other than k-anonymity (given risks, a threshold, a flag)."""
    return spec.targeted and (spec.anywhere or bool(spec.risk) or spec.flag is not None
                              or spec.risk_threshold is not None)


def _swap_on_driver(frame: Any, records: Any, spec: SwapSpec, seed: int, where: str) -> SparkSwap:
    """Swapping whose donors come from anywhere looks at the whole population at every level:
    the swapping variables (not the other columns) come to the driver in the embedded engine's
    record order, :func:`~._swap.swap_records` swaps them there — the same function, so the
    same swaps — and only the swapped households' new geography goes back to the records. The
    driver holds the swapping variables of every record (what the embedded engine holds)."""
    from tabsafe.protect.swapping._population import households as group_households
    from tabsafe.protect.swapping._swap import swap_records

    table = records.orderBy(_FILE, _ROW).toArrow().drop_columns([_FILE, _ROW])
    result = swap_records(table, spec, seed, where=where)
    hh = group_households(result.data, spec.household, option="household", where=where)
    first = pa.array(hh.first)
    ev = result.evaluation.take(first)
    at_risk = pc.is_valid(ev.column("risk_level")) if "risk_level" in ev.column_names else None
    keep = pc.or_(ev.column("swapped"), at_risk) if at_risk is not None else ev.column("swapped")
    moved = (*spec.geography, *spec.carry_along)
    cols: dict[str, Any] = {spec.household: result.data.column(spec.household).take(first),
                            "__swapped": ev.column("swapped")}
    for i, v in enumerate(moved):
        cols[f"__new{i}"] = result.data.column(v).take(first)
    for name in ("swap_level", "swap_role", "swap_profile"):
        cols[f"__{name}"] = pc.cast(ev.column(name), pa.string())
    cols["__partner"] = ev.column("partner")
    cols["__risk_level"] = (pc.cast(ev.column("risk_level"), pa.string()) if "risk_level" in ev.column_names
                            else pa.nulls(ev.num_rows, pa.string()))
    per_household = pa.table(cols).filter(keep)
    rows = frame.sparkSession.createDataFrame(per_household)
    for i, v in enumerate(moved):
        rows = rows.withColumn(f"__new{i}", rows[f"__new{i}"].cast(frame.schema[v].dataType))
    rows = rows.withColumn(spec.household, rows[spec.household].cast(frame.schema[spec.household].dataType))
    rows = rows.withColumn("__partner", rows["__partner"].cast(frame.schema[spec.household].dataType))
    return _joined(frame, rows, spec, result.figures, result.private, result.notes, ())


@contextlib.contextmanager
def _quiet_udf_warnings() -> Iterator[None]:
    """pyspark warns when it cannot read a function's type hints (it then takes the table form
    the task is written for)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
