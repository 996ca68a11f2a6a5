"""``tabsafe risk``: which rules flag each cell of a table, and a summary per rule.

Rules (METHODS.md §10; :mod:`tabsafe.risk.rules`): ``--min-freq T`` threshold; ``--t-abs``,
``--t-rel``, ``--t-min`` the extended rules of seed 003 (one threshold for both sides, or
``--t-k-abs``/``--t-y-abs``/``--t-k-rel``/``--t-y-rel`` apart) with ``--target VAR`` (default
every spanning variable in turn); ``--coalition K``; ``--zeros [M]`` 100% rows/columns and
informative zeros. The table written to ``--out`` has the spanning variables, ``count``, one
boolean column per rule checked and ``unsafe``; it holds original counts, so it is an evaluation
file (private to the user). The summary (counts and shares per rule) is printed and written as
JSON to ``--summary`` (default: beside ``--out``, ``<name>.summary.json``). Both outputs are
checked before any work and written together.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tabsafe.cli.common import add_input_arguments, add_output_arguments, input_paths, load_input, say
from tabsafe.errors import InputError


def add_arguments(parser: argparse.ArgumentParser, argv: object = ()) -> None:
    add_input_arguments(parser)
    g = parser.add_argument_group("rules (give at least one)")
    g.add_argument("--min-freq", metavar="T", help="threshold rule: 0 < n < T")
    g.add_argument("--t-abs", metavar="T", help="extended rules 1a and 1b: f_k - f < T, f_y - f < T")
    g.add_argument("--t-rel", metavar="P", help="extended rules 2a and 2b: 100 f / f_k >= P (a percentage)")
    g.add_argument("--t-min", metavar="T", help="extended rule 3: 0 < f < T")
    g.add_argument("--t-k-abs", metavar="T", help="rule 1a alone")
    g.add_argument("--t-y-abs", metavar="T", help="rule 1b alone")
    g.add_argument("--t-k-rel", metavar="P", help="rule 2a alone")
    g.add_argument("--t-y-rel", metavar="P", help="rule 2b alone")
    g.add_argument("--target", action="append", default=None, metavar="VAR",
                   help="target variable (repeat; default every spanning variable in turn)")
    g.add_argument("--coalition", metavar="K", help="directly disclosive cells for a K-coalition")
    g.add_argument("--zeros", nargs="?", const="1", metavar="M",
                   help="rows/columns with units in at most M categories (default 1: 100%% cells) and their zeros")
    add_output_arguments(parser, keep_original=False)
    parser.add_argument("--summary", metavar="FILE.json", help="summary as JSON (default: a side file beside --out, OUT.summary.json — "
                                                                "refused if it exists, unless --force)")


def _number(name: str, text: str | None, *, integer: bool = False) -> Any:
    """An option's number, checked by the rules (an unparsable text is refused naming the option)."""
    from tabsafe.params import Int, Real

    if text is None:
        return None
    return (Int() if integer else Real()).from_text(name, text)


def _summary_path(args: argparse.Namespace) -> Path:
    if args.summary:
        path = Path(args.summary)
        if path.suffix.lower() != ".json":
            raise InputError("the summary is JSON: give a .json file", where=str(path))
        return path
    out = Path(args.out)
    return out.with_name(out.stem + ".summary.json")


def run(args: argparse.Namespace) -> int:
    import json

    from tabsafe.io import Outputs, evaluation_arrow, output_format
    from tabsafe.risk.rules import RiskRules, RuleThresholds, assess

    output_format(args.out)  # a bad extension fails before any work
    rules = RiskRules(
        min_freq=_number("min_freq", args.min_freq),
        thresholds=RuleThresholds.both_sides(
            t_abs=_number("t_abs", args.t_abs), t_rel=_number("t_rel", args.t_rel),
            t_min=_number("t_min", args.t_min), t_k_abs=_number("t_k_abs", args.t_k_abs),
            t_y_abs=_number("t_y_abs", args.t_y_abs), t_k_rel=_number("t_k_rel", args.t_k_rel),
            t_y_rel=_number("t_y_rel", args.t_y_rel),
        ),
        coalition=_number("coalition", args.coalition, integer=True),
        zeros=_number("zeros", args.zeros, integer=True),
        targets=tuple(args.target) if args.target else None,
    )
    if not rules.checked:
        raise InputError("no rule chosen: give --min-freq, --t-abs/--t-rel/--t-min, --coalition or --zeros")
    with Outputs(inputs=input_paths(args)) as out:
        # both outputs hold original values (evaluation files), checked before any work
        table_path = out.plan(args.out, kind="evaluation")
        summary_path = out.plan(_summary_path(args), kind="evaluation", option="summary")
        table = load_input(args)
        result = assess(table, rules)
        summary = result.summary()
        summary["table"] = {"variables": list(table.variables), "where": args.where}
        out.write_arrow(table_path, evaluation_arrow(result.to_table(), zero_cells=args.zero_cells))
        out.write_text(summary_path, json.dumps(summary, indent=2) + "\n")
    n = summary["cells"]
    say(f"risk: {n:,} cells of {' × '.join(table.variables)}; wrote {args.out} and {summary_path}", quiet=args.quiet)
    for name, entry in [*summary["rules"].items(), ("unsafe", summary["unsafe"])]:
        say(f"  {name:<10} {entry['cells']:>9,} cells ({100 * entry['share']:.2f}%), "
            f"{entry['inner_cells']:,} inner ({100 * entry['inner_share']:.2f}%)", quiet=args.quiet)
    return 0
