"""``tabsafe protect``: tabulate, apply a registered method, write the protected table.

Method options are parsed by the method itself (``tabsafe protect --method round --help``
lists them), so new methods add options without touching this command.
"""

from __future__ import annotations

import argparse
import json

from tabsafe.cli.common import add_input_arguments, add_output_arguments, load_input
from tabsafe.errors import InputError
from tabsafe.io import write_table
from tabsafe.registry import get_method, method_names

def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser)
    parser.add_argument("--method", required=True, metavar="METHOD",
                        help=f"protection method ({', '.join(method_names())}); "
                             "'--method M --help' adds its options to this help")
    parser.add_argument("--seed", type=int, default=None, help="seed of random methods")
    add_output_arguments(parser)
    parser.add_argument("--report", metavar="FILE", help="also write the method's report as JSON")


def run(args: argparse.Namespace) -> int:
    # Method options were added to this command's parser (tabsafe.cli.build_parser).
    method = get_method(args.method).from_args(args)
    needs = method.needs()
    table = load_input(args, key=needs.key, sums=needs.sums, microdata_only=needs.microdata)
    result = method.protect(table, seed=args.seed)
    columns = list(result.release_columns)
    if args.keep_original:
        columns.append("original")
    write_table(result.table, args.out, columns=columns, evaluation=args.keep_original)
    figures = ", ".join(f"{k} {v}" for k, v in result.report.figures.items())
    print(f"{args.method}: wrote {result.table.n_cells:,} protected cells to {args.out}" + (f"; {figures}" if figures else ""))
    for note in result.report.notes:
        print(f"note: {note}")
    if args.report:
        from tabsafe.io import atomic_path

        payload = {
            "method": result.report.method, "params": dict(result.report.params), "seed": result.report.seed,
            "figures": dict(result.report.figures), "notes": list(result.report.notes),
        }
        try:
            text = json.dumps(payload, indent=2, default=str)
        except (TypeError, ValueError) as exc:  # pragma: no cover - reports hold plain values
            raise InputError(f"report is not serialisable: {exc}") from None
        with atomic_path(args.report) as tmp:
            tmp.write_text(text + "\n", encoding="utf-8")
    return 0
