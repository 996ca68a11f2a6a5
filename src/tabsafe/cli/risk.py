"""``tabsafe risk``: which rules flag each cell of a table, and a summary per rule.

Rules (METHODS.md §10; :mod:`tabsafe.risk.rules`): ``--min-freq T`` threshold; ``--t-abs``,
``--t-rel``, ``--t-min`` the extended rules of seed 003 (one threshold for both sides, or
``--t-k-abs``/``--t-y-abs``/``--t-k-rel``/``--t-y-rel`` apart) with ``--target VAR`` (default
every spanning variable in turn); ``--coalition K``; ``--zeros [M]`` 100% rows/columns and
informative zeros. The table written to ``--out`` has the spanning variables, ``count``, one
boolean column per rule checked and ``unsafe``; the summary (counts and shares per rule) is
printed and written as JSON to ``--summary`` (default: beside ``--out``, ``<name>.summary.json``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow as pa

from tabsafe.cli.common import add_input_arguments, load_input
from tabsafe.errors import InputError
from tabsafe.io import atomic_path, output_format, write_frame
from tabsafe.risk.rules import RiskRules, RuleThresholds, assess


def add_arguments(parser: argparse.ArgumentParser, argv: object = ()) -> None:
    add_input_arguments(parser)
    g = parser.add_argument_group("rules (give at least one)")
    g.add_argument("--min-freq", type=float, metavar="T", help="threshold rule: 0 < n < T")
    g.add_argument("--t-abs", type=float, help="extended rules 1a and 1b: f_k - f < T, f_y - f < T")
    g.add_argument("--t-rel", type=float, help="extended rules 2a and 2b: 100 f / f_k >= T (a percentage)")
    g.add_argument("--t-min", type=float, help="extended rule 3: 0 < f < T")
    g.add_argument("--t-k-abs", type=float, help="rule 1a alone")
    g.add_argument("--t-y-abs", type=float, help="rule 1b alone")
    g.add_argument("--t-k-rel", type=float, help="rule 2a alone")
    g.add_argument("--t-y-rel", type=float, help="rule 2b alone")
    g.add_argument("--target", action="append", default=None, metavar="VAR",
                   help="target variable (repeat; default every spanning variable in turn)")
    g.add_argument("--coalition", type=int, metavar="K", help="directly disclosive cells for a K-coalition")
    g.add_argument("--zeros", type=int, nargs="?", const=1, metavar="M",
                   help="rows/columns with units in at most M categories (default 1: 100%% cells) and their zeros")
    o = parser.add_argument_group("output")
    o.add_argument("--out", required=True, metavar="FILE", help="per-cell flags (.csv or .parquet)")
    o.add_argument("--summary", metavar="FILE.json", help="summary as JSON (default beside --out)")


def _summary_path(args: argparse.Namespace) -> Path:
    if args.summary:
        path = Path(args.summary)
        if path.suffix.lower() != ".json":
            raise InputError("the summary is JSON: give a .json file", where=str(path))
        return path
    out = Path(args.out)
    return out.with_name(out.stem + ".summary.json")


def run(args: argparse.Namespace) -> int:
    output_format(args.out)  # a bad extension fails before any work
    summary_path = _summary_path(args)
    rules = RiskRules(
        min_freq=args.min_freq,
        thresholds=RuleThresholds.both_sides(
            t_abs=args.t_abs, t_rel=args.t_rel, t_min=args.t_min,
            t_k_abs=args.t_k_abs, t_y_abs=args.t_y_abs, t_k_rel=args.t_k_rel, t_y_rel=args.t_y_rel,
        ),
        coalition=args.coalition,
        zeros=args.zeros,
        targets=tuple(args.target) if args.target else None,
    )
    if not rules.checked:
        raise InputError("no rule chosen: give --min-freq, --t-abs/--t-rel/--t-min, --coalition or --zeros")
    table = load_input(args)
    if rules.targets is not None:
        for v in rules.targets:
            table.axis(v)
    result = assess(table, rules)
    summary = result.summary()
    summary["table"] = {"variables": list(table.variables), "where": args.where}
    text = json.dumps(summary, indent=2) + "\n"
    frame = pa.Table.from_pandas(result.to_frame(), preserve_index=False)
    if not summary_path.parent.exists():
        raise InputError("output folder does not exist", where=str(summary_path.parent))
    write_frame(frame, args.out)
    with atomic_path(summary_path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    n = summary["cells"]
    print(f"risk: {n:,} cells of {' × '.join(table.variables)}; wrote {args.out} and {summary_path}")
    for name, entry in [*summary["rules"].items(), ("unsafe", summary["unsafe"])]:
        print(f"  {name:<10} {entry['cells']:>9,} cells ({100 * entry['share']:.2f}%), "
              f"{entry['inner_cells']:,} inner ({100 * entry['inner_share']:.2f}%)")
    return 0
