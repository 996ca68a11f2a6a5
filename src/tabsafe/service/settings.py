"""Settings of the table builder service, read from a YAML file; unsafe combinations refused.

Every field has a safe default, and the combinations that would expose data are refused when the
settings are built (full-stack-fastapi-template's ``core/config.py`` refuses default secrets the
same way): the service never listens beyond loopback without API keys, and never runs in debug
mode in production. The release rules (seed 002 §5) and the protection chain (the cell key
method on every cell by default, METHODS.md §11) are settings too.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tabsafe.errors import InputError

#: the cell key method of the demo: D = 5, V = 3, perturbed values 1 and 2 never occur
DEFAULT_CHAIN: tuple[dict[str, Any], ...] = (
    {"method": "ckm", "params": {"max_noise": 5, "variance": 3.0, "js": 2}},
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Rules(_Model):
    """Release rules for user-defined tables (seed 002 §5). ``None`` switches a rule off.

    Rules on numbers are checked on the *protected* values, so a refusal reveals nothing that
    the table itself would not have shown.
    """

    max_dimensions: int | None = Field(3, ge=1, description="most spanning variables in a table")
    max_cells: int | None = Field(2_500, ge=1, description="most cells in a table, margins included")
    min_population: int | None = Field(30, ge=0, description="least protected population of a table")
    min_area_population: int | None = Field(100, ge=0, description="least protected population of a user-defined area")
    min_mean_cell_size: float | None = Field(2.0, ge=0, description="least protected population per inner cell")
    small_cell: int = Field(5, ge=1, description="inner cells with a protected count in 1..small_cell-1 are small")
    max_small_cell_share: float | None = Field(0.6, ge=0, le=1, description="largest share of small inner cells")
    nested_recodes: bool = Field(True, description="groups must be unions of whole categories of the variable's "
                                                   "recode level (consistent, nested categories)")


class Limits(_Model):
    """Hard limits (not release rules): a query past them is too large to compute."""

    max_grid_cells: int = Field(200_000, ge=1)
    max_area_blocks: int = Field(10_000, ge=1)
    max_groups: int = Field(500, ge=1)
    max_filter_length: int = Field(2_000, ge=1)
    max_filter_depth: int = Field(32, ge=1, le=200, description="deepest nesting of brackets in a filter")
    max_body_bytes: int = Field(200_000, ge=1_000)
    rate_per_minute: int = Field(600, ge=1, description="default queries per minute of a key")
    quota_per_day: int = Field(20_000, ge=1, description="default queries per UTC day of a key")
    suggestion_tries: int = Field(40, ge=1, description="most candidate tables tried for a suggestion")
    cache_entries: int = Field(4_096, ge=0)
    cube_cache_cells: int = Field(3_000_000, ge=0, description="cells of whole-population cubes kept in memory "
                                  "per process (least recently used go first)")
    answers_kept: int = Field(50_000, ge=0, description="answers kept on disk for every process (oldest go first)")


class Differencing(_Model):
    """The differencing defence (:mod:`tabsafe.service.population`): a record of every population
    answered to any key, so that no combination of answered tables isolates a population the
    release rules would refuse. ``None`` takes the release rule's minimum."""

    enabled: bool = Field(True, description="keep the record and refuse what it forbids")
    min_population: int | None = Field(None, ge=1, description="populations under this many records are "
                                       "never isolated by a combination (default rules.min_population)")
    min_area_population: int | None = Field(None, ge=1, description="areas under this many records are never "
                                            "isolated by a combination of areas (default "
                                            "rules.min_area_population)")
    populations_per_key: int = Field(2_000, ge=1, description="distinct populations a key is answered per UTC day")


class Magnitudes(_Model):
    """Rules for sums and means (seed 000 §5.7; seed 003's dominance). A cell's sum and mean are
    published (perturbed) only when its published count is at least ``min_count`` and its
    contributions pass both rules; otherwise they are null."""

    min_count: int = Field(5, ge=1, description="least published count of a cell with a sum or mean")
    dominance_n: int = Field(1, ge=1, le=2, description="(n, k) dominance: the n largest contributions …")
    dominance_k: float = Field(60.0, gt=0, le=100, description="… may make at most k% of the cell's total")
    p_percent: float = Field(10.0, ge=0, le=100, description="p% rule: the total less the two largest "
                             "contributions must be at least p% of the largest")


class Step(_Model):
    method: str
    params: dict[str, Any] = Field(default_factory=dict)


class NumericVariable(_Model):
    """A numeric variable that tables may sum or average (magnitude noise of the cell key
    method)."""

    flex_point: float = Field(gt=0)
    label: str | None = None


class Settings(_Model):
    """Everything ``tabsafe serve`` needs; build with :meth:`load`.

    Attributes:
        data: the data folder (``persons.parquet`` and ``meta.yaml``, as ``tabsafe synth`` writes).
        records: the microdata file inside ``data``.
        prepared: where the prepared form is kept (default ``data/.tabsafe-prepared``).
        store: the SQLite file of users, keys and the audit log (default ``data/service.sqlite``).
        host, port: where to listen.
        environment: ``production`` (the default) or ``development``.
        debug: tracebacks in responses; refused in production.
        auth: require API keys; refused off unless listening on loopback only.
        workers: server processes (the prepared data are shared through the page cache).
        chain: the protection methods, in order (default: the cell key method).
        seed: seed of random methods in the chain (each query's seed is derived from it).
        numeric: variables that may be summed or averaged.
        geography: the variable whose codes are the building blocks of user-defined areas.
        levels: names of each variable's hierarchy levels, top first.
        recode_level: the level whose whole categories groups must be unions of.
        labels: labels of codes, per variable (in addition to meta.yaml's).
        rules, limits: see :class:`Rules`, :class:`Limits`.
        differencing: the record of answered populations (:class:`Differencing`).
        magnitudes: rules for sums and means (:class:`Magnitudes`).
        audit_key: the file of the audit log's secret key (kept outside the log).
        engine: how tables are counted: ``prepared`` (the default: the memory-mapped code matrix
            of :mod:`tabsafe.service.prepared`), or a registered engine (``duckdb``, ``spark``)
            counting each table from the records file through the shared planner
            (:mod:`tabsafe.service.planned`: no preparation, for records too large for one
            machine). The answers are the same; a query the planner cannot express is refused.
    """

    data: Path
    records: str = "persons.parquet"
    prepared: Path | None = None
    store: Path | None = None
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    environment: Literal["production", "development"] = "production"
    debug: bool = False
    auth: bool = True
    workers: int = Field(1, ge=1, le=64)
    chain: tuple[Step, ...] = tuple(Step(**s) for s in DEFAULT_CHAIN)
    seed: int = Field(0, ge=0, le=2**63 - 1)
    numeric: dict[str, NumericVariable] = Field(default_factory=dict)
    geography: str | None = None
    levels: dict[str, list[str]] = Field(default_factory=dict)
    recode_level: dict[str, int] = Field(default_factory=dict)
    labels: dict[str, dict[str, str]] = Field(default_factory=dict)
    rules: Rules = Rules()
    limits: Limits = Limits()
    access_log: bool = False
    engine: str = "prepared"
    differencing: Differencing = Differencing()
    magnitudes: Magnitudes = Magnitudes()
    #: where the keyed audit chain's secret is kept (default: beside the store, ``.audit-key``, 0600)
    audit_key: Path | None = None

    @field_validator("chain")
    @classmethod
    def _chain(cls, value: tuple[Step, ...]) -> tuple[Step, ...]:
        if not value:
            raise ValueError("the protection chain may not be empty: every output must be protected")
        return value

    @field_validator("engine")
    @classmethod
    def _engine(cls, value: str) -> str:
        from tabsafe.registry import engine_names

        known = ["prepared", *engine_names()]
        if value not in known:
            raise ValueError(f"must be one of {', '.join(known)}; got {value!r}")
        return value

    @model_validator(mode="after")
    def _safe(self) -> Settings:
        if self.debug and self.environment == "production":
            raise ValueError("debug mode is refused in production (set environment: development)")
        if not self.auth and not _loopback(self.host):
            raise ValueError(f"auth may only be switched off on a loopback address, not on host {self.host!r}")
        return self

    # ------------------------------------------------------------------ derived paths
    @property
    def records_path(self) -> Path:
        return self.data / self.records

    @property
    def prepared_path(self) -> Path:
        return self.prepared or self.data / ".tabsafe-prepared"

    @property
    def store_path(self) -> Path:
        return self.store or self.data / "service.sqlite"

    @property
    def audit_key_path(self) -> Path:
        return self.audit_key or self.store_path.with_name(self.store_path.name + ".audit-key")

    def thresholds(self) -> tuple[int, int]:
        """The differencing record's minimum population and minimum area population."""
        d, r = self.differencing, self.rules
        return (d.min_population or r.min_population or 1, d.min_area_population or r.min_area_population or 1)

    @classmethod
    def load(cls, *, data: str | Path, config: str | Path | None = None, **overrides: Any) -> Settings:
        """Settings from a YAML file (optional) and explicit values (the command line wins);
        one line naming the field on error."""
        values: dict[str, Any] = {}
        where = None
        if config is not None:
            from tabsafe.model.config import read_yaml

            where = str(config)
            loaded = read_yaml(config, what="configuration")
            if loaded is not None and not isinstance(loaded, dict):
                raise InputError("the configuration must be a mapping of settings", where=where)
            values.update(loaded or {})
            for key in ("prepared", "store"):  # files named in the file are relative to it
                if isinstance(values.get(key), str) and not Path(values[key]).is_absolute():
                    values[key] = Path(config).parent / values[key]
        values.update({k: v for k, v in overrides.items() if v is not None})
        values["data"] = Path(data)
        return build(values, where=where)


def build(values: dict[str, Any], *, where: str | None = None) -> Settings:
    """Settings from plain values; a validation error becomes one :class:`InputError` line."""
    try:
        return Settings(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            from tabsafe.model.config import did_you_mean

            *inside, key = [str(p) for p in err["loc"]]
            model: Any = Settings
            for part in inside:  # the model the unknown key is in, for its known keys
                field = model.model_fields.get(part)
                model = field.annotation if field is not None and isinstance(field.annotation, type) else None
                if model is None or not issubclass(model, BaseModel):
                    break
            known = list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []
            msg = f"unknown key{did_you_mean(key, known)}"
        raise InputError(f"setting {loc!r}: {msg}" if loc else f"unsafe settings: {msg}", where=where) from None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
