"""``tabsafe evaluate CONFIG.yaml``: methods side by side on the same tables, one HTML report.

The configuration names the microdata, the tables and the method settings (any registered
method by name with its declared parameters, or a chain such as ``targeted-swap`` then ``ckm``;
:mod:`tabsafe.evaluate.config`). Every setting protects every table; the report
(:mod:`tabsafe.evaluate.html`) compares them: risk and information-loss measures as seed 004
Tables 5–10, the R-U map, noise distributions, an output-checker summary with the SHA-256 of
each release, and the parameters and seeds that rerun it. ``--json``/``--csv`` also write the
measures as files; ``--releases DIR`` writes the releases whose checksums the report lists.
Every output is checked before the work starts and written only when all of it succeeded.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    parser.add_argument("config", metavar="CONFIG.yaml", help="the evaluation: data, tables, settings, measures")
    parser.add_argument("--out", metavar="FILE.html",
                        help="the report (default: the configuration's name with .html, beside it)")
    parser.add_argument("--json", metavar="FILE.json", help="also write the measures as JSON")
    parser.add_argument("--csv", metavar="FILE.csv", help="also write the measures as CSV (one number a line)")
    parser.add_argument("--releases", metavar="DIR",
                        help="also write every release (CSV) into DIR: new, empty, or an earlier run's")
    parser.add_argument("--engine", default=None, metavar="NAME",
                        help="tabulation engine (default: the configuration's 'engine', else duckdb)")


def _suffix(path: str | None, suffix: str, option: str) -> None:
    from tabsafe.errors import InputError, param

    if path is not None and Path(path).suffix.lower() != suffix:
        raise InputError(f"{param(option)} is a {suffix} file; got {Path(path).name!r}", where=path)


def run(args: argparse.Namespace) -> int:
    import contextlib

    from tabsafe.cli.common import say
    from tabsafe.evaluate.config import load_config
    from tabsafe.evaluate.html import render_html
    from tabsafe.evaluate.runner import planned_release_files, run_evaluation
    from tabsafe.io import OutputFolder, Outputs

    out_path = args.out or str(Path(args.config).with_suffix(".html"))
    _suffix(args.json, ".json", "json")
    _suffix(args.csv, ".csv", "csv")
    config = load_config(args.config)
    if args.engine is not None:
        from tabsafe.errors import param
        from tabsafe.registry import engine_name

        engine_name(args.engine, key=param("engine"))
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(Outputs(inputs=config.inputs()))
        # every output checked before any work: a bad path fails at once and nothing is written
        html_path = out.plan(out_path, kind="evaluation", option="out")
        json_path = out.plan(args.json, kind="evaluation", option="json") if args.json else None
        csv_path = out.plan(args.csv, kind="evaluation", option="csv") if args.csv else None
        folder = None
        if args.releases:
            folder = stack.enter_context(OutputFolder(args.releases, planned_release_files(config),
                                                      option="releases"))
        evaluation = run_evaluation(config, engine=args.engine)
        out.write_text(html_path, render_html(evaluation))
        if json_path is not None:
            import json

            out.write_text(json_path, json.dumps(evaluation.to_json(), indent=2, default=str) + "\n")
        if csv_path is not None:
            out.write_text(csv_path, evaluation.to_csv())
        if folder is not None:
            for r in evaluation.results:
                (folder / r.release_file).write_bytes(r.release_bytes)
    say(f"wrote {html_path}: {len(config.settings)} settings × {len(config.tables)} tables, "
        f"{len(evaluation.results)} releases measured", quiet=args.quiet)
    for run_ in evaluation.runs:
        if run_.seed is not None and run_.setting.seed is None:
            say(f"{run_.setting.label}: seed {run_.seed} (drawn; recorded in the report)", quiet=args.quiet)
    return 0
