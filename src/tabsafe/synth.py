"""A synthetic census: persons in households, with geography and the Eurostat hypercube variables.

The person file carries the variables of the Eurostat census hypercube used in seed 002 §2
(NUTS2 region 2 categories, sex 2, age 21 five-year bands, current activity status 5,
occupation 13, educational attainment 9, country of citizenship 5), a geography below the region
(about 200 areas and 5,000 small areas), single year of age, household id and size, and a record
key ``rkey`` (U[0,1) with 10 decimal digits, METHODS.md §2).

The joint distribution is built from conditional tables (activity given age and sex, occupation
given activity and sex, education given age and occupation, citizenship given age) chosen so
that the 7-variable hypercube at 1,500,000 persons has the skewed cell-size distribution of seed
002 Table 1 (about 92% zeros): structural zeros (children have no occupation) and thinly
populated rare categories produce it, as in a real census.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from tabsafe import progress
from tabsafe.errors import InputError, param
from tabsafe.model.hierarchy import Hierarchy

REGIONS = ("R1", "R2")
REGION_SHARE = (845_539 / 1_500_000, 645_461 / 1_500_000)  # seed 002 §2
SEX = ("1", "2")
AGE_BANDS = tuple(f"{5 * i:02d}-{5 * i + 4:02d}" for i in range(20)) + ("100+",)
BROAD_BANDS = {"B00-14": 3, "B15-29": 3, "B30-49": 4, "B50-64": 3, "B65-84": 4, "B85+": 4}
# Current activity status: employed, unemployed, pupil/student, pensioner, other inactive.
ACTIVITY = ("EMP", "UNE", "STU", "RET", "OTH")
# Occupation: ISCO-08 major groups 0-9, never worked, not stated, not applicable.
OCCUPATION = tuple(str(i) for i in range(10)) + ("NEV", "NS", "NA")
# Educational attainment: ISCED 0-6, not stated, not applicable.
EDUCATION = tuple(f"ED{i}" for i in range(7)) + ("NS", "NA")
# Citizenship: national, other EU, other Europe, rest of world, stateless / not stated.
CITIZENSHIP = ("NAT", "EU", "EUR", "ROW", "NS")
HOUSEHOLD_SIZE = ("1", "2", "3", "4", "5", "6+")

PERSON_COLUMNS = (
    "person_id", "household_id", "region", "area", "small_area", "sex", "age", "age_year",
    "activity", "occupation", "education", "citizenship", "household_size", "income", "rkey",
)


@dataclass(frozen=True)
class SynthResult:
    """Paths of what :func:`synth_census` wrote."""

    directory: Path
    persons: Path
    households: Path
    meta: Path
    n_persons: int
    n_households: int


def _draw(rng: np.random.Generator, probs: np.ndarray, group: np.ndarray) -> np.ndarray:
    """One categorical draw per unit from the row ``probs[group]`` (inverse CDF, vectorised).

    Units are drawn group by group with ``searchsorted`` (the number of CDF points at or below
    the uniform draw), so memory stays linear in the units however many categories there are.
    """
    cdf = np.cumsum(probs / probs.sum(axis=1, keepdims=True), axis=1)
    u = rng.random(group.size)
    return _inverse_cdf(u, cdf, group)


def _inverse_cdf(u: np.ndarray, cdf: np.ndarray, group: np.ndarray) -> np.ndarray:
    out = np.empty(u.size, dtype=np.int64)
    for g in np.unique(group):
        sel = group == g
        out[sel] = np.searchsorted(cdf[g], u[sel], side="right")
    return np.minimum(out, cdf.shape[1] - 1)


def _age_weights() -> np.ndarray:
    w = np.array([5.8, 5.9, 6.1, 6.3, 6.4, 6.5, 6.6, 6.9, 7.3, 7.4, 7.0, 6.4, 6.1, 5.4, 4.3, 3.4, 2.5, 1.5, 0.6, 0.15, 0.02])
    return w / w.sum()


def _activity_probs() -> np.ndarray:
    """P(activity | age band, sex): rows 2*band + sex."""
    rows = []
    for band in range(21):
        lo = 5 * band
        for sex in range(2):
            if lo < 5:
                p = [0, 0, 0.05, 0, 0.95]
            elif lo < 15:
                p = [0, 0, 1.0, 0, 0]
            elif lo < 20:
                p = [0.22, 0.05, 0.68, 0, 0.05]
            elif lo < 25:
                p = [0.62, 0.08, 0.22, 0, 0.08]
            elif lo < 60:
                emp = 0.80 - (0.08 if sex else 0.0)
                p = [emp, 0.05, 0.01, 0.005 * max(0, lo - 45), 0.14 - emp + 0.80]
            elif lo < 65:
                p = [0.45, 0.03, 0, 0.42, 0.10]
            elif lo < 75:
                p = [0.08, 0.003, 0, 0.87, 0.047]
            else:
                p = [0.006, 0, 0, 0.95, 0.044]
            rows.append(p)
    return np.array(rows, dtype=float)


def _occupation_probs() -> np.ndarray:
    """P(occupation | activity, sex): rows 2*activity + sex."""
    isco_m = np.array([0.6, 11, 14, 13, 6, 12, 2.5, 16, 12, 13])
    isco_f = np.array([0.1, 8, 20, 16, 17, 21, 1.0, 2, 2, 13])
    rows = []
    for act in range(5):
        for sex in range(2):
            isco = isco_f if sex else isco_m
            if act == 0:
                p = np.concatenate([isco / isco.sum() * 0.992, [0, 0.008, 0]])
            elif act == 1:
                p = np.concatenate([isco / isco.sum() * 0.7, [0.28, 0.02, 0]])
            else:
                p = np.array([0.0] * 12 + [1.0])
            rows.append(p)
    return np.array(rows)


def _education_probs() -> np.ndarray:
    """P(education | age group, occupation class): rows 4*agegroup + occclass.

    Age groups: 0-4, 5-14, 15-24, 25+. Occupation classes: managers/professionals (ISCO 1-2),
    technicians/clerks/services (3-5), manual (0, 6-9), none (NEV/NS/NA).
    """
    table = {
        0: [[0, 0, 0, 0, 0, 0, 0, 0, 1]] * 4,
        1: [[0.45, 0.55, 0, 0, 0, 0, 0, 0, 0]] * 4,
        2: [
            [0, 0, 0.05, 0.35, 0.1, 0.45, 0.05, 0, 0],
            [0, 0.02, 0.18, 0.60, 0.08, 0.12, 0, 0, 0],
            [0, 0.04, 0.36, 0.55, 0.03, 0.02, 0, 0, 0],
            [0, 0.06, 0.52, 0.38, 0.02, 0.02, 0, 0, 0],
        ],
        3: [
            [0, 0.002, 0.01, 0.12, 0.06, 0.62, 0.18, 0.008, 0],
            [0.002, 0.02, 0.12, 0.50, 0.12, 0.22, 0.008, 0.01, 0],
            [0.01, 0.10, 0.33, 0.47, 0.05, 0.03, 0.0, 0.01, 0],
            [0.03, 0.18, 0.34, 0.31, 0.04, 0.08, 0.005, 0.015, 0],
        ],
    }
    return np.array([row for g in range(4) for row in table[g]], dtype=float)


def _citizenship_probs() -> np.ndarray:
    """P(citizenship | age group 0-19, 20-44, 45-64, 65+)."""
    return np.array([
        [0.915, 0.035, 0.012, 0.036, 0.002],
        [0.855, 0.065, 0.018, 0.058, 0.004],
        [0.925, 0.032, 0.010, 0.030, 0.003],
        [0.972, 0.012, 0.004, 0.011, 0.001],
    ])


def _geography(rng: np.random.Generator, n_areas: int, n_small: int) -> tuple[list[tuple[str, str, str]], np.ndarray]:
    """(region, area, small area) codes and a population weight per small area."""
    areas_r1 = round(n_areas * REGION_SHARE[0])
    per_region = (areas_r1, n_areas - areas_r1)
    small_per_area = rng.multinomial(n_small - n_areas, np.full(n_areas, 1 / n_areas)) + 1
    # codes keep at least the digits of the default census (R1A001S01), more when needed
    area_digits = max(3, len(str(n_areas)))
    small_digits = max(2, len(str(int(small_per_area.max()))))
    out: list[tuple[str, str, str]] = []
    weights = []
    a = 0
    for r, n_a in zip(REGIONS, per_region):
        share = REGION_SHARE[REGIONS.index(r)]
        w_r = []
        for _ in range(n_a):
            area = f"{r}A{a + 1:0{area_digits}d}"
            k = small_per_area[a]
            w = rng.lognormal(0.0, 0.35, size=k)
            for s in range(k):
                out.append((r, area, f"{area}S{s + 1:0{small_digits}d}"))
            w_r.append(w)
            a += 1
        w_all = np.concatenate(w_r)
        weights.append(w_all / w_all.sum() * share)
    w = np.concatenate(weights)
    return out, w / w.sum()


def _sizes(n_persons: int, n_areas: int, n_small_areas: int) -> tuple[int, int]:
    """Check the requested sizes; small censuses get fewer areas (at least 20 persons each)."""
    if n_persons < 1:
        raise InputError(f"{param('persons')} must be at least 1, got {n_persons}")
    if n_areas < 2 or n_small_areas < n_areas:
        raise InputError(f"{param('areas')} must be at least 2 and {param('small_areas')} at least "
                         f"{param('areas')}; got {n_areas} and {n_small_areas}")
    n_areas = max(2, min(n_areas, n_persons // 20 or 2))
    n_small_areas = max(n_areas, min(n_small_areas, n_persons // 5 or n_areas))
    return n_areas, n_small_areas


def generate(n_persons: int, seed: int, *, n_areas: int = 200, n_small_areas: int = 5000) -> tuple[pa.Table, pa.Table, list[tuple[str, str, str]]]:
    """Generate persons and households in memory (see the module docstring)."""
    n_areas, n_small_areas = _sizes(n_persons, n_areas, n_small_areas)
    rng = np.random.default_rng(seed)
    geo, geo_w = _geography(rng, n_areas, n_small_areas)
    persons, households = _population(rng, n_persons, geo, geo_w)
    return persons, households, geo


def _households(rng: np.random.Generator, n_persons: int, geo_w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Household sizes (1..8, summing to ``n_persons``) and each household's small area."""
    size_p = np.array([0.30, 0.34, 0.155, 0.135, 0.045, 0.015, 0.007, 0.003])
    n_hh_guess = int(1.2 * n_persons / float((np.arange(1, 9) * size_p).sum())) + 10
    sizes = rng.choice(np.arange(1, 9), size=n_hh_guess, p=size_p)
    cum = np.cumsum(sizes)
    n_hh = int(np.searchsorted(cum, n_persons) + 1)
    sizes = sizes[:n_hh].copy()
    sizes[-1] -= int(cum[n_hh - 1] - n_persons)
    hh_geo = rng.choice(len(geo_w), size=n_hh, p=geo_w)
    return sizes, hh_geo


def _cat(values: np.ndarray, codes: Sequence[str]) -> pa.Array:
    """Codes as a dictionary array: an index per unit into the codes (no string per unit)."""
    return pa.DictionaryArray.from_arrays(pa.array(np.asarray(values, dtype=np.int32)), pa.array(list(codes)))


class _GeoCodes:
    """The geography's codes as dictionary columns, indexed by small area."""

    def __init__(self, geo: list[tuple[str, str, str]]) -> None:
        self.regions = sorted({r for r, _, _ in geo})
        self.areas = sorted({a for _, a, _ in geo})
        self.region_of = np.array([self.regions.index(r) for r, _, _ in geo], dtype=np.int32)
        area_pos = {a: i for i, a in enumerate(self.areas)}
        self.area_of = np.array([area_pos[a] for _, a, _ in geo], dtype=np.int32)
        self.small_codes = [s_ for _, _, s_ in geo]

    def columns(self, index: np.ndarray) -> dict[str, pa.Array]:
        return {"region": _cat(self.region_of[index], self.regions), "area": _cat(self.area_of[index], self.areas),
                "small_area": _cat(index, self.small_codes)}


def _household_table(sizes: np.ndarray, hh_geo: np.ndarray, codes: _GeoCodes, first_household: int) -> pa.Table:
    return pa.table({
        "household_id": pa.array(np.arange(first_household, first_household + sizes.size, dtype=np.int64)),
        **codes.columns(hh_geo),
        "household_size": _cat(np.minimum(sizes, 6) - 1, HOUSEHOLD_SIZE),
        "persons": pa.array(sizes.astype(np.int16)),
    })


def _population(rng: np.random.Generator, n_persons: int, geo: list[tuple[str, str, str]], geo_w: np.ndarray, *,
                first_person: int = 1, first_household: int = 1,
                codes: _GeoCodes | None = None) -> tuple[pa.Table, pa.Table]:
    """Persons and their households in the given geography, numbered from ``first_person`` and
    ``first_household`` (the Spark generator makes the census chunk by chunk)."""
    codes = codes or _GeoCodes(geo)
    # Households: sizes 1..8 (6+ coded together); persons are laid out household by household.
    sizes, hh_geo = _households(rng, n_persons, geo_w)
    n_hh = sizes.size
    hh_id = np.repeat(np.arange(n_hh), sizes)
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    member = np.arange(n_persons) - np.repeat(first, sizes)
    hh_size = np.repeat(sizes, sizes)

    # Age: household heads and partners are adults, further members mostly children.
    w_age = _age_weights()
    adult = w_age.copy()
    adult[:4] = 0
    adult /= adult.sum()
    child = w_age.copy()
    child[4:] = 0
    child /= child.sum()
    is_child = (member >= 2) & (rng.random(n_persons) < 0.82)
    cdf = np.cumsum(np.stack([adult, child]), axis=1)
    age = np.minimum(_inverse_cdf(rng.random(n_persons), cdf, is_child.astype(np.int64)), 20)
    # Keep the overall pyramid close to w_age by redrawing a share of adults from the full table.
    redraw = (~is_child) & (member >= 2) & (rng.random(n_persons) < 0.5)
    age[redraw] = rng.choice(21, size=int(redraw.sum()), p=w_age)
    age_year = np.where(age == 20, 100 + rng.integers(0, 5, n_persons), 5 * age + rng.integers(0, 5, n_persons))

    sex = np.where(member == 1, 1, rng.integers(0, 2, n_persons))
    head_sex = np.repeat(sex[first], sizes)
    sex = np.where(member == 1, 1 - head_sex, sex)

    activity = _draw(rng, _activity_probs(), 2 * age + sex)
    occupation = _draw(rng, _occupation_probs(), 2 * activity + sex)
    age_group = np.select([age < 1, age < 3, age < 5], [0, 1, 2], 3)
    occ_class = np.select(
        [np.isin(occupation, [1, 2]), np.isin(occupation, [3, 4, 5]), occupation <= 9], [0, 1, 2], 3
    )
    education = _draw(rng, _education_probs(), 4 * age_group + occ_class)
    cit_group = np.select([age < 4, age < 9, age < 13], [0, 1, 2], 3)
    # Citizenship is shared within a household more often than not.
    citizenship = _draw(rng, _citizenship_probs(), cit_group)
    share = rng.random(n_persons) < 0.7
    citizenship = np.where(share, np.repeat(citizenship[first], sizes), citizenship)

    income = np.round(np.where(activity == 0, rng.lognormal(10.2, 0.5, n_persons), rng.lognormal(8.5, 0.8, n_persons) * (age >= 3)), 2)
    rkey = rng.integers(0, 10**10, n_persons, dtype=np.int64) / 1e10

    person_geo = hh_geo[hh_id]
    persons = pa.table({
        "person_id": pa.array(np.arange(first_person, first_person + n_persons, dtype=np.int64)),
        "household_id": pa.array(hh_id + first_household),
        **codes.columns(person_geo),
        "sex": _cat(sex, SEX),
        "age": _cat(age, AGE_BANDS),
        "age_year": pa.array(age_year.astype(np.int16)),
        "activity": _cat(activity, ACTIVITY),
        "occupation": _cat(occupation, OCCUPATION),
        "education": _cat(education, EDUCATION),
        "citizenship": _cat(citizenship, CITIZENSHIP),
        "household_size": _cat(np.minimum(hh_size, 6) - 1, HOUSEHOLD_SIZE),
        "income": pa.array(income),
        "rkey": pa.array(rkey),
    })
    return persons, _household_table(sizes, hh_geo, codes, first_household)


def hierarchies(geo: list[tuple[str, str, str]]) -> dict[str, Hierarchy]:
    """The hierarchy files the synthetic census ships, keyed by file name."""
    small: dict[str, dict[str, list[str]]] = {}
    for r, a, s in geo:
        small.setdefault(r, {}).setdefault(a, []).append(s)
    broad: dict[str, list[str]] = {}
    years: dict[str, dict[str, list[str]]] = {}
    i = 0
    for code, k in BROAD_BANDS.items():
        broad[code] = list(AGE_BANDS[i:i + k])
        years[code] = {}
        for band in AGE_BANDS[i:i + k]:
            lo = int(band.rstrip("+").split("-")[0])
            hi = 104 if band.endswith("+") else lo + 4
            years[code][band] = [str(y) for y in range(lo, hi + 1)]
        i += k
    return {
        "small_area.hrc": Hierarchy.from_tree(small, source="small_area.hrc"),
        "area.hrc": Hierarchy.from_tree({r: list(v) for r, v in small.items()}, source="area.hrc"),
        "age.yaml": Hierarchy.from_tree(broad, source="age.yaml"),
        "age_year.hrc": Hierarchy.from_tree(years, source="age_year.hrc"),
    }


#: What ``synth_census`` writes in its folder (a folder holding only these may be written again).
#: every path a census folder holds (OutputFolder replaces these, and refuses a folder with more:
#: a file of the user's in ``hierarchies/`` is never deleted); Spark writes Parquet folders
SYNTH_ENTRIES = ("persons.parquet", "persons.parquet/", "households.parquet", "households.parquet/", "meta.yaml",
                 "hierarchies/small_area.hrc", "hierarchies/area.hrc", "hierarchies/age.yaml",
                 "hierarchies/age_year.hrc")


def synth_memory(n_persons: int) -> int:
    """Bytes :func:`synth_census` needs for ``n_persons`` by its memory model: about 265 bytes a
    person measured (peak RSS 184 MB at 100,000 persons, 314 MB at 600,000), 400 with margin."""
    return 150 * 2**20 + 400 * int(n_persons)


def synth_census(n_persons: int, seed: int, out: str | os.PathLike[str], *, n_areas: int = 200,
                 n_small_areas: int = 5000) -> SynthResult:
    """Write ``persons.parquet``, ``households.parquet``, ``meta.yaml`` and ``hierarchies/`` to
    ``out``: a new folder, an empty one, or one holding only an earlier census (anything else is
    refused). Everything is written to a temporary folder first and moved into place whole.

    ``n_areas`` and ``n_small_areas`` set the geography (200 and 5,000 by default; a national
    census, e.g. 10,000,000 persons in 180,000 small areas, uses larger values).
    """
    from tabsafe import memory
    from tabsafe.io import OutputFolder

    folder = OutputFolder(out, SYNTH_ENTRIES)
    # refused before any array is made (the memory model, not numpy's "Unable to allocate 3.68 TiB")
    memory.check(f"a synthetic census of {n_persons:,} persons", synth_memory(n_persons))
    out = Path(out)
    progress.report("synthesis", persons=n_persons, phase="records")
    persons, households, geo = generate(n_persons, seed, n_areas=n_areas, n_small_areas=n_small_areas)
    with folder as tmp:
        progress.report("synthesis", persons=n_persons, phase="writing")
        pq.write_table(persons, tmp / "persons.parquet", row_group_size=256_000)
        pq.write_table(households, tmp / "households.parquet")
        # the records stand for confidential microdata: private, like every evaluation file
        (tmp / "persons.parquet").chmod(0o600)
        (tmp / "households.parquet").chmod(0o600)
        _write_meta(tmp, geo, f"synthetic census, {n_persons} persons, seed {seed}")
    return SynthResult(out, out / "persons.parquet", out / "households.parquet", out / "meta.yaml",
                       persons.num_rows, households.num_rows)


def _write_meta(tmp: Path, geo: list[tuple[str, str, str]], description: str) -> None:
    """``meta.yaml`` (codelists, record key, hierarchy files) and ``hierarchies/``."""
    (tmp / "hierarchies").mkdir()
    for name, h in hierarchies(geo).items():
        path = tmp / "hierarchies" / name
        if name.endswith(".hrc"):
            path.write_text(h.to_hrc(), encoding="utf-8")
        else:
            path.write_text(yaml.safe_dump(h.to_tree(), sort_keys=False), encoding="utf-8")
    meta = {
        "description": description,
        "record_key": "rkey",
        "variables": {
            "region": {"codes": sorted({r for r, _, _ in geo})},
            "area": {"codes": sorted({a for _, a, _ in geo})},
            "small_area": {"codes": [s for _, _, s in geo]},
            "sex": {"codes": list(SEX), "labels": {"1": "male", "2": "female"}},
            "age": {"codes": list(AGE_BANDS)},
            "age_year": {"codes": [str(y) for y in range(105)]},
            "activity": {"codes": list(ACTIVITY)},
            "occupation": {"codes": list(OCCUPATION)},
            "education": {"codes": list(EDUCATION)},
            "citizenship": {"codes": list(CITIZENSHIP)},
            "household_size": {"codes": list(HOUSEHOLD_SIZE)},
        },
        "hierarchies": {
            "small_area": "hierarchies/small_area.hrc",
            "area": "hierarchies/area.hrc",
            "age": "hierarchies/age.yaml",
            "age_year": "hierarchies/age_year.hrc",
        },
    }
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    (tmp / "meta.yaml").write_text(yaml.dump(meta, Dumper=dumper, sort_keys=False), encoding="utf-8")


# ------------------------------------------------------------------------------ on Spark
#: Persons per chunk of the Spark generator. Fixed, so the census depends on the seed and the
#: sizes only, never on the cluster's parallelism.
SPARK_CHUNK = 1_000_000

_PERSON_SCHEMA = (
    "person_id BIGINT, household_id BIGINT, region STRING, area STRING, small_area STRING, sex STRING, "
    "age STRING, age_year SMALLINT, activity STRING, occupation STRING, education STRING, citizenship STRING, "
    "household_size STRING, income DOUBLE, rkey DOUBLE"
)
_HOUSEHOLD_SCHEMA = ("household_id BIGINT, region STRING, area STRING, small_area STRING, household_size STRING, "
                     "persons SMALLINT")


def _plain(table: pa.Table) -> pa.RecordBatch:
    """Dictionary columns as plain strings (Spark takes Arrow batches of its own types)."""
    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in table.columns]
    return pa.Table.from_arrays(cols, names=table.column_names).combine_chunks().to_batches()[0]


class _ChunkGenerator:
    """What a Spark task runs: the persons (or only the households) of the chunks it is given.

    Chunk ``i`` draws from its own generator seeded with ``(seed, i)``, so every chunk is the same
    whichever task, executor or run makes it. Household numbers start at the chunk's first person
    number (a chunk has at most as many households as persons), so they are unique without any
    coordination between tasks.
    """

    def __init__(self, seed: int, n_persons: int, chunk: int, geo: list[tuple[str, str, str]],
                 geo_w: np.ndarray, households_only: bool) -> None:
        self.seed, self.n_persons, self.chunk = seed, n_persons, chunk
        self.geo, self.geo_w, self.households_only = geo, geo_w, households_only

    def __call__(self, batches: Any) -> Any:
        codes = _GeoCodes(self.geo)
        for batch in batches:
            for i in batch.column(0).to_pylist():
                first = i * self.chunk + 1
                n = min(self.chunk, self.n_persons - i * self.chunk)
                rng = np.random.default_rng([self.seed, i])
                if self.households_only:
                    sizes, hh_geo = _households(rng, n, self.geo_w)
                    yield _plain(_household_table(sizes, hh_geo, codes, first))
                else:
                    persons, _ = _population(rng, n, self.geo, self.geo_w, first_person=first,
                                             first_household=first, codes=codes)
                    yield _plain(persons)


def synth_census_spark(n_persons: int, seed: int, out: str | os.PathLike[str], *, n_areas: int = 200,
                       n_small_areas: int = 5000, engine: Any = None, chunk: int = SPARK_CHUNK) -> SynthResult:
    """The synthetic census generated on Spark, chunk by chunk: a national census (60M persons)
    without holding it in one process's memory.

    The geography is drawn on the driver exactly as :func:`generate` draws it (same seed, same
    areas and weights); the persons of chunk ``i`` (``chunk`` persons each) are drawn in a Spark
    task from a generator seeded with ``(seed, i)``. The output is therefore deterministic — the
    same seed and sizes give the same census on any cluster — but it is **not** the census
    :func:`synth_census` writes for the same seed (that one draws every person from one
    generator); its distributions are the same. ``persons.parquet`` and ``households.parquet``
    are Parquet folders (one file per task), which every engine reads as one data set.
    """
    from tabsafe.engines.spark import SparkEngine, spark_errors
    from tabsafe.io import OutputFolder

    folder = OutputFolder(out, SYNTH_ENTRIES)
    out = Path(out)
    n_areas, n_small_areas = _sizes(n_persons, n_areas, n_small_areas)
    if chunk < 1:
        raise InputError(f"chunk must be at least 1, got {chunk}")
    geo, geo_w = _geography(np.random.default_rng(seed), n_areas, n_small_areas)
    spark = (engine if engine is not None else SparkEngine()).spark()
    n_chunks = -(-n_persons // chunk)
    ids = spark.range(0, n_chunks, 1, numPartitions=n_chunks)
    with folder as tmp, spark_errors("the Spark job failed", where=str(out)):
        persons = ids.mapInArrow(_ChunkGenerator(seed, n_persons, chunk, geo, geo_w, False), _PERSON_SCHEMA)
        persons.write.parquet(str(tmp / "persons.parquet"))
        households = ids.mapInArrow(_ChunkGenerator(seed, n_persons, chunk, geo, geo_w, True), _HOUSEHOLD_SCHEMA)
        households.write.parquet(str(tmp / "households.parquet"))
        n_households = spark.read.parquet(str(tmp / "households.parquet")).count()
        _write_meta(tmp, geo, f"synthetic census, {n_persons} persons, seed {seed}, generated on Spark in chunks "
                              f"of {chunk} persons")
    return SynthResult(out, out / "persons.parquet", out / "households.parquet", out / "meta.yaml",
                       n_persons, int(n_households))
