"""The configuration of an evaluation: data, tables, method settings, measure options (YAML).

::

    title: Census tables, protection options          # optional
    data: census/persons.parquet                       # microdata, relative to this file
    meta: census/meta.yaml                             # codelists (default: meta.yaml beside the data)
    seed: 2026                                         # seed of every setting without its own
    engine: duckdb                                     # tabulation engine (any registered; --engine wins)
    tables:
      area_age_sex:
        by: [area, age, sex]
        hierarchies: {area: census/hierarchies/area.hrc}
        rows: area                                     # rows of the per-row measures (default: first)
        where: "activity = EMP"                        # optional sub-population
        anova_target: age                              # optional
    settings:
      - method: ckm                                    # any registered method, by name
        params: {max_noise: 5, variance: 3, js: 2}     # its declared parameters (from_params)
      - label: swap 10%, then ckm                      # a chain: microdata methods first
        chain:
          - {method: targeted-swap, params: {...}}
          - {method: ckm, params: {max_noise: 5, variance: 3, js: 2}}
        seed: 11
    measures:                                          # all optional
      small: 2            # small cells are 1..small
      k: 1                # coalition size of the directly-disclosive share
      sensitive: [age]    # sensitive variables (default: every variable)
      weights: [0.33, 0.33, 0.34]   # entropy-risk weights w1, w2, w3
      prior: uniform      # or p0,p1,… — prior of the information gain
      differencing_n: [1, 2]

Methods are built through the registry (``build_method(name, params)``), so every method —
tabsafe's own and any plugin's — is configured the same way, with no list of methods here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabsafe.errors import InputError, TabsafeError
from tabsafe.evaluate.risk import DEFAULT_WEIGHTS

__all__ = ["EvaluationConfig", "MeasureOptions", "Setting", "TableConfig", "load_config", "parse_config"]


@dataclass(frozen=True)
class TableConfig:
    """A table to protect and measure.

    Attributes:
        name: the table's name in the report.
        by: the spanning variables.
        hierarchies: hierarchy per variable.
        hierarchy_files: the files the hierarchies came from (for the record of the run).
        where: a sub-population in tabsafe's filter language.
        rows: the variable whose codes are the rows of the per-row measures (a geography).
        anova_target: the variable whose mean across rows the ANOVA R² is about.
    """

    name: str
    by: tuple[str, ...]
    hierarchies: Mapping[str, Any] = field(default_factory=dict)
    hierarchy_files: Mapping[str, str] = field(default_factory=dict)
    where: str | None = None
    rows: str | None = None
    anova_target: str | None = None

    @property
    def row_variable(self) -> str:
        return self.rows or self.by[0]


@dataclass(frozen=True)
class Setting:
    """One method or chain with its parameters: a point of the R-U map.

    Attributes:
        label: the name shown in the report.
        methods: the steps (one method, or a chain: microdata methods first).
        seed: the seed of the run (random methods; the chain's steps get seeds drawn from it).
    """

    label: str
    methods: tuple[Any, ...]
    seed: int | None = None

    @property
    def random(self) -> bool:
        return any(m.random for m in self.methods)

    def to_json(self) -> dict[str, Any]:
        steps = [{"method": m.name, "params": m.params()} for m in self.methods]
        out: dict[str, Any] = {"label": self.label}
        out.update(steps[0] if len(steps) == 1 else {"chain": steps})
        out["seed"] = self.seed
        return out


@dataclass(frozen=True)
class MeasureOptions:
    """Options of the measures.

    Attributes:
        small: small cells are the counts 1..small (004 §5.2: 1 and 2).
        k: the coalition size of the directly disclosive share (000 §5.9).
        sensitive: the sensitive variables of that share (None: every variable).
        weights: the weights w1, w2, w3 of the entropy risk (000 §5.9).
        prior: the prior on true counts 0..K of the information gain (001 §5).
        differencing_n: the true differences whose differencing risk is reported.
        max_binomial_count: the largest original count the binomial test looks at.
    """

    small: int = 2
    k: int = 1
    sensitive: tuple[str, ...] | None = None
    weights: tuple[float, ...] = DEFAULT_WEIGHTS
    prior: str = "uniform"
    differencing_n: tuple[int, ...] = (1, 2)
    max_binomial_count: int = 100


@dataclass(frozen=True)
class EvaluationConfig:
    """Everything an evaluation runs (see the module docstring for the YAML form).

    Attributes:
        data: the microdata (records with their codelists).
        data_path: the data file as given.
        tables: the tables.
        settings: the methods and parameter settings.
        measures: the measure options.
        seed: the default seed.
        title: the report's title.
        source: the configuration file.
        engine: the engine that tabulates the tables (a registered name), or None (``--engine``,
            else DuckDB).
    """

    data: Any
    data_path: str
    tables: tuple[TableConfig, ...]
    settings: tuple[Setting, ...]
    measures: MeasureOptions = MeasureOptions()
    seed: int | None = None
    title: str = "Risk and utility of protection methods"
    source: str = "configuration"
    engine: str | None = None

    def inputs(self) -> list[str]:
        """Every file the evaluation reads (an output may not be one of them)."""
        paths = [self.data_path, self.source]
        for t in self.tables:
            paths += list(t.hierarchy_files.values())
        return paths


def load_config(path: str | os.PathLike[str]) -> EvaluationConfig:
    """Read an evaluation configuration file; paths in it are relative to the file."""
    from tabsafe.model.config import read_yaml

    return parse_config(read_yaml(path, what="configuration"), base=Path(path).parent, source=str(path))


def _bad(what: str, source: str) -> InputError:
    return InputError(what, where=source)


def _mapping(value: Any, what: str, source: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(f"{what} must be a mapping; got {type(value).__name__}", source)
    return value


def _names(value: Any, what: str, source: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [p.strip() for p in value.split(",")]
    if not isinstance(value, Sequence) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise _bad(f"{what} must be a list of variable names; got {value!r}", source)
    return tuple(v.strip() for v in value)


def _int(value: Any, what: str, source: str, *, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _bad(f"{what} must be an integer >= {low}; got {value!r}", source)
    return value


def _path(base: Path, value: Any, what: str, source: str) -> Path:
    from tabsafe.model.config import resolve_path

    return resolve_path(value, base, what, source)


KNOWN_TOP = {"title", "data", "meta", "seed", "tables", "settings", "measures", "engine"}
KNOWN_TABLE = {"by", "hierarchies", "where", "rows", "anova_target"}
KNOWN_SETTING = {"label", "method", "params", "chain", "seed"}
KNOWN_MEASURES = {"small", "k", "sensitive", "weights", "prior", "differencing_n", "max_binomial_count"}


def _unknown(keys: Any, known: set[str], what: str, source: str) -> None:
    from tabsafe.model.config import check_keys

    check_keys(dict.fromkeys(keys), known, source, inside=what)


def parse_config(raw: Any, *, base: Path = Path("."), source: str = "configuration") -> EvaluationConfig:
    """An :class:`EvaluationConfig` from parsed YAML (paths relative to ``base``)."""
    from tabsafe.io import read_meta
    from tabsafe.method import check_seed
    from tabsafe.model.hierarchy import Hierarchy
    from tabsafe.model.microdata import Microdata
    from tabsafe.registry import engine_name

    top = _mapping(raw, "the configuration", source)
    _unknown(top, KNOWN_TOP, "the configuration", source)
    if "data" not in top:
        raise _bad("the configuration needs 'data' (a microdata file)", source)
    engine = engine_name(top["engine"], where=source) if top.get("engine") is not None else None
    data_path = _path(base, top["data"], "'data'", source)
    meta_path = _path(base, top["meta"], "'meta'", source) if top.get("meta") else data_path.parent / "meta.yaml"
    codelists = read_meta(meta_path) if (top.get("meta") or meta_path.is_file()) else {}
    data = Microdata.from_file(data_path, codelists=codelists)
    try:
        seed = check_seed(top.get("seed"), name="seed")
    except TabsafeError as exc:
        raise _bad(exc.render(), source) from None

    tables_raw = top.get("tables")
    if not isinstance(tables_raw, Mapping) or not tables_raw:
        raise _bad("'tables' must map table names to their spanning variables (by: [...])", source)
    tables = []
    for name, spec in tables_raw.items():
        what = f"table {name!r}"
        if isinstance(spec, (list, str)):
            spec = {"by": spec}
        spec = _mapping(spec, what, source)
        _unknown(spec, KNOWN_TABLE, what, source)
        by = _names(spec.get("by"), f"{what}: 'by'", source)
        files = {str(v): str(_path(base, f, f"{what}: hierarchy of {v!r}", source))
                 for v, f in _mapping(spec.get("hierarchies") or {}, f"{what}: 'hierarchies'", source).items()}
        unknown = sorted(set(files) - set(by))
        if unknown:
            raise _bad(f"{what}: hierarchy given for {unknown[0]!r}, which is not in 'by'", source)
        hier = {v: Hierarchy.from_file(f) for v, f in files.items()}
        rows = spec.get("rows")
        if rows is not None and rows not in by:
            raise _bad(f"{what}: 'rows' must be one of its variables ({', '.join(by)}); got {rows!r}", source)
        target = spec.get("anova_target")
        if target is not None and (target not in by or target == (rows or by[0])):
            raise _bad(f"{what}: 'anova_target' must be one of its variables other than the rows; got {target!r}",
                       source)
        where = spec.get("where")
        if where is not None and not isinstance(where, str):
            raise _bad(f"{what}: 'where' must be a filter (text); got {where!r}", source)
        tables.append(TableConfig(str(name), by, hier, files, where, rows, target))

    settings_raw = top.get("settings")
    if not isinstance(settings_raw, list) or not settings_raw:
        raise _bad("'settings' must be a list of methods (method: NAME, params: {...}) or chains (chain: [...])",
                   source)
    settings = []
    labels: set[str] = set()
    for i, item in enumerate(settings_raw, 1):
        settings.append(_setting(item, i, seed, source))
        if settings[-1].label in labels:
            raise _bad(f"two settings are labelled {settings[-1].label!r}; give each its own 'label'", source)
        labels.add(settings[-1].label)

    measures = _measures(top.get("measures") or {}, source)
    title = top.get("title") or EvaluationConfig.title
    return EvaluationConfig(data=data, data_path=str(data_path), tables=tuple(tables), settings=tuple(settings),
                            measures=measures, seed=seed, title=str(title), source=source, engine=engine)


def _build(step: Any, what: str, source: str) -> Any:
    from tabsafe.registry import build_method

    step = _mapping(step, what, source)
    if "method" not in step or not isinstance(step["method"], str):
        raise _bad(f"{what} needs 'method' (a registered method's name)", source)
    params = _mapping(step.get("params") or {}, f"{what}: 'params'", source)
    try:
        return build_method(step["method"], params)
    except TabsafeError as exc:
        raise _bad(f"{what}: {exc.render()}", source) from None


def _setting(item: Any, i: int, default_seed: int | None, source: str) -> Setting:
    from tabsafe.method import check_seed
    from tabsafe.pipeline import Chain

    what = f"setting {i}"
    item = _mapping(item, what, source)
    _unknown(item, KNOWN_SETTING, what, source)
    if ("chain" in item) == ("method" in item):
        raise _bad(f"{what} needs either 'method' (with 'params') or 'chain' (a list of methods)", source)
    if "chain" in item:
        if "params" in item:
            raise _bad(f"{what}: a chain's parameters go with each of its methods", source)
        steps = item["chain"]
        if not isinstance(steps, list) or not steps:
            raise _bad(f"{what}: 'chain' must be a list of methods", source)
        methods = tuple(_build(s, f"{what}, step {j}", source) for j, s in enumerate(steps, 1))
    else:
        methods = (_build(item, what, source),)
    try:
        Chain(methods)  # microdata methods before table methods
        seed = check_seed(item.get("seed", default_seed), name="seed")
    except TabsafeError as exc:
        raise _bad(f"{what}: {exc.render()}", source) from None
    label = item.get("label") or _default_label(methods)
    if not isinstance(label, str) or not label.strip():
        raise _bad(f"{what}: 'label' must be text; got {label!r}", source)
    return Setting(label.strip(), methods, seed)


def _default_label(methods: Sequence[Any]) -> str:
    """``method`` with the parameters that differ from the defaults, e.g. ``round (mode random, base 3)``."""
    parts = []
    for m in methods:
        defaults = {p.name: p.default for p in m.parameters() if not p.required}
        shown = [f"{k} {_text(v)}" for k, v in m.params().items()
                 if v is not None and (k not in defaults or _json(m, k, defaults[k]) != v)]
        parts.append(f"{m.name} ({', '.join(shown)})" if shown else m.name)
    return " + ".join(parts)


def _text(value: Any) -> str:
    """A parameter value as on the command line: lists comma-separated, lists of lists with ';'."""
    if isinstance(value, list):
        return ";".join(_text(v) for v in value) if any(isinstance(v, list) for v in value) else ",".join(
            str(v) for v in value)
    return str(value)


def _json(method: Any, name: str, value: Any) -> Any:
    for p in method.parameters():
        if p.name == name:
            try:
                return p.constraint.to_json(value)
            except Exception:  # noqa: BLE001 - a default the constraint cannot render is "different"
                return object()
    return value


def _measures(raw: Any, source: str) -> MeasureOptions:
    from tabsafe.evaluate.distribution import parse_prior

    m = _mapping(raw, "'measures'", source)
    _unknown(m, KNOWN_MEASURES, "'measures'", source)
    opts: dict[str, Any] = {}
    if "small" in m:
        opts["small"] = _int(m["small"], "measures: 'small'", source, low=1)
    if "k" in m:
        opts["k"] = _int(m["k"], "measures: 'k'", source)
    if m.get("sensitive") is not None:
        opts["sensitive"] = _names(m["sensitive"], "measures: 'sensitive'", source)
    if "weights" in m:
        w = m["weights"]
        if (not isinstance(w, list) or len(w) != 3
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in w)):
            raise _bad(f"measures: 'weights' must be three numbers >= 0 (w1, w2, w3); got {w!r}", source)
        opts["weights"] = tuple(float(x) for x in w)
    if "prior" in m:
        prior = m["prior"]
        text = ",".join(str(x) for x in prior) if isinstance(prior, list) else str(prior)
        try:
            parse_prior(text)
        except TabsafeError as exc:
            raise _bad(f"measures: {exc.render()}", source) from None
        opts["prior"] = text
    if "differencing_n" in m:
        ns = m["differencing_n"]
        ns = [ns] if isinstance(ns, int) else ns
        if not isinstance(ns, list) or not ns:
            raise _bad(f"measures: 'differencing_n' must be a list of counts >= 1; got {ns!r}", source)
        opts["differencing_n"] = tuple(_int(n, "measures: 'differencing_n'", source, low=1) for n in ns)
    if "max_binomial_count" in m:
        opts["max_binomial_count"] = _int(m["max_binomial_count"], "measures: 'max_binomial_count'", source, low=1)
    return MeasureOptions(**opts)
