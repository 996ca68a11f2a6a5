"""``tabsafe tabulate``: a table with every margin and subtotal (original counts: an evaluation
output by nature, written private to the user)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from tabsafe.cli.common import add_input_arguments, add_output_arguments, input_paths, load_source, say, split_list, table_spec


def add_arguments(parser: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    add_input_arguments(parser)
    parser.add_argument("--sum", type=split_list, default=(), metavar="VAR[,VAR]",
                        help="also sum these numeric variables (exact decimals)")
    parser.add_argument("--sum-digits", type=int, default=2, metavar="D",
                        help="decimal places of the summed values (default 2)")
    parser.add_argument("--key", metavar="COLUMN", help="also compute the exact cell key from this record-key column")
    parser.add_argument("--key-digits", type=int, default=10, help="decimal digits of the record keys (default 10)")
    parser.add_argument("--key-modulus", type=int, metavar="M",
                        help="ABS integer keys 0..M-1: the cell key is their sum mod M")
    add_output_arguments(parser, keep_original=False)


def run(args: argparse.Namespace) -> int:
    from tabsafe.io import Outputs, evaluation_arrow
    from tabsafe.model.spec import KeySpec
    from tabsafe.tabulation import tabulate

    key = None
    if args.key:
        key = KeySpec(column=args.key, digits=args.key_digits, modulus=args.key_modulus)
    elif args.key_modulus is not None:
        from tabsafe.errors import InputError

        raise InputError("--key-modulus needs --key COLUMN (the record keys to sum)")
    with Outputs(inputs=input_paths(args)) as out:
        path = out.plan(args.out, kind="evaluation")
        source = load_source(args)
        table = tabulate(source, table_spec(args, key=key, sums=args.sum, sum_digits=args.sum_digits),
                         engine=args.engine)
        columns = ["count", *[f"sum_{v}" for v in args.sum]] + (["ckey", "ckey_int"] if key else [])
        out.write_arrow(path, evaluation_arrow(table, columns, zero_cells=args.zero_cells))
    counts = table.counts
    n_inner = 1
    for d in table.dimensions:
        n_inner *= len(d.hierarchy.leaves)
    total = int(table.value())
    nonzero = int((counts != 0).sum())
    say(f"wrote {table.n_cells:,} cells ({n_inner:,} inner) of {' × '.join(table.variables)} "
        f"to {args.out}; total {total:,}; zero cells {table.n_cells - nonzero:,}", quiet=args.quiet)
    if args.where and total == 0:
        say(f"note: --where {args.where!r} selects no records; every cell is zero", quiet=args.quiet)
    return 0
