"""The evaluation report of ``tabsafe demo``: every registered method side by side on the
synthetic census.

The settings come from the registry, not from a list: each registered method with the
parameters the demo protects with (when it does) or the first of its own typical examples; a
microdata method also runs as the first step of a chain with the cell key method (the UK 2021
design: targeted swapping, then cell key perturbation). A method added later — built in or from a
plugin — joins the report with no edit here. A setting that cannot run on the census tables (a
plugin whose example needs variables the census lacks) is left out and named in the report.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tabsafe.evaluate.config import EvaluationConfig, MeasureOptions, Setting, TableConfig

__all__ = ["DEMO_TABLES", "demo_settings", "write_demo_report"]

#: The tables of the demo report: name → (variables, hierarchy files in the census, row variable).
DEMO_TABLES: dict[str, tuple[tuple[str, ...], dict[str, str], str]] = {
    "area_age_sex": (("area", "age", "sex"), {"area": "area.hrc", "age": "age.yaml"}, "area"),
    "area_age_citizenship": (("area", "age", "citizenship"), {"area": "area.hrc"}, "area"),
}

#: Parameters that fit the census's variables, for methods the demo does not protect with and
#: whose own examples name variables of their example data (household size is ``household_size``
#: here). A method not named here still joins the report, with its example parameters.
CENSUS_PARAMS: dict[str, dict[str, Any]] = {
    "targeted-swap": {"geography": ["region", "area", "small_area"], "risk_vars": ["sex", "age"], "k": 2,
                      "swaprate": 0.05, "similar": [["household_size"]]},
    # seed 002 §3.1: 5% sampled, each with a partner (10% swapped)
    "random-swap": {"geography": ["area", "small_area"], "pairrate": 0.05, "similar": [["household_size"]]},
    "pram": {"variable": "small_area", "within": ["area"], "retention": 0.9, "household": "household_id"},
    # the papers' own settings: Barnardisation p = 0.2 (000 §5.3), the ABS perturbation x = 2 in
    # its consistent, record-key form (001 §4), perturbation weights expecting one household per
    # small area × household size stratum (001 §7), the invariant perturbation of 002 §3.2.2
    "barnardisation": {"p": 0.2},
    "abs-perturbation": {"x": 2, "consistent": True},
    "weights": {"strata": ["small_area", "household_size"], "household": "household_id", "per_stratum": 1.0},
    "stochastic": {"cap": 10, "stay": 0.7},
}

#: Methods that repair another method's output run after it, not on the original table (where
#: additivity restoration has nothing to do): method → the method it follows.
AFTER: dict[str, str] = {"additivity": "ckm"}


def _label(method: Any) -> str:
    from tabsafe.evaluate.config import _default_label

    return _default_label([method])


def demo_settings(params: Mapping[str, Mapping[str, Any]], *,
                  seed: int) -> tuple[list[Setting], list[tuple[str, str]]]:
    """A setting for every registered method: the given parameters (else :data:`CENSUS_PARAMS`,
    else its first typical example); every microdata method also chained with the cell key
    method. Returns the settings and the methods left out, with why (a method that fails to load
    or build)."""
    from tabsafe.method import MicrodataMethod
    from tabsafe.registry import build_method, get_method, method_names

    settings: list[Setting] = []
    skipped: list[tuple[str, str]] = []
    micro: list[Any] = []
    after: list[tuple[str, Any, str]] = []
    chosen = {**CENSUS_PARAMS, **params}
    for name in method_names():
        try:
            method = build_method(name, chosen[name]) if name in chosen else get_method(name).examples().typical[0]
        except Exception as exc:  # noqa: BLE001 - one broken method must not hide the others
            skipped.append((name, " ".join(str(exc).split()) or type(exc).__name__))
            continue
        label = _label(method) + ("" if name in chosen else " [example parameters]")
        if name in AFTER:
            after.append((AFTER[name], method, label))
            continue
        settings.append(Setting(label, (method,), seed))
        if isinstance(method, MicrodataMethod):
            micro.append(method)
    ckm = next((s.methods[0] for s in settings if s.methods[0].name == "ckm"), None)
    for m in micro:
        if ckm is not None:
            settings.append(Setting(f"{m.name}, then ckm", (m, ckm), seed))
    for first_name, method, label in after:
        first = next((s.methods[0] for s in settings if s.methods[0].name == first_name), None)
        if first is None:
            skipped.append((method.name, f"it runs after {first_name}, which is not in the report"))
            continue
        settings.append(Setting(f"{first_name}, then {label}", (first, method), seed))
    return settings, skipped


def write_demo_report(microdata: Any, census_dir: Path, folder: Path, *, seed: int,
                      params: Mapping[str, Mapping[str, Any]],
                      tables: Mapping[str, tuple[tuple[str, ...], dict[str, str], str]] | None = None) -> Path:
    """Run every registered method on the demo tables and write ``folder / "report.html"``.

    Args:
        microdata: the census records (with their codelists).
        census_dir: the synthetic census folder (``persons.parquet``, ``hierarchies/``), inside
            ``folder``: the report names its files relative to ``folder``.
        folder: where the report goes (the demo's output folder).
        seed: the seed of every setting.
        params: parameters per method name (the demo's protections).
        tables: the tables (default :data:`DEMO_TABLES`).
    """
    import os

    from tabsafe.evaluate.html import render_html
    from tabsafe.evaluate.runner import run_evaluation
    from tabsafe.model.hierarchy import Hierarchy

    def shown(path: Path) -> str:
        return os.path.relpath(path, folder)

    configs = []
    for name, (by, files, rows) in (DEMO_TABLES if tables is None else tables).items():
        paths = {v: Path(census_dir) / "hierarchies" / f for v, f in files.items()}
        configs.append(TableConfig(name, by, {v: Hierarchy.from_file(p) for v, p in paths.items()},
                                   {v: shown(p) for v, p in paths.items()}, None, rows, None))
    settings, left_out = demo_settings(params, seed=seed)
    config = EvaluationConfig(
        data=microdata, data_path=shown(Path(census_dir) / "persons.parquet"), tables=tuple(configs),
        settings=tuple(settings), measures=MeasureOptions(), seed=seed,
        title="Synthetic census: protection methods side by side", source="tabsafe demo",
    )
    evaluation = run_evaluation(config, skip_failing=True)
    if left_out:
        import dataclasses

        evaluation = dataclasses.replace(evaluation, skipped=tuple(left_out) + evaluation.skipped)
    path = Path(folder) / "report.html"
    path.write_text(render_html(evaluation), encoding="utf-8")
    path.chmod(0o600)  # an evaluation output, like the demo's original tables
    return path
