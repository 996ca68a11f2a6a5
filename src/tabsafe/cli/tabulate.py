"""``tabsafe tabulate``: a table with every margin and subtotal (original counts)."""

from __future__ import annotations

import argparse

from tabsafe.cli.common import add_input_arguments, add_output_arguments, load_input, split_list
from tabsafe.io import write_table
from tabsafe.model.spec import KeySpec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser)
    parser.add_argument("--sum", type=split_list, default=(), metavar="VAR[,VAR]", help="also sum these numeric variables")
    parser.add_argument("--key", metavar="COLUMN", help="also compute the exact cell key from this record-key column")
    parser.add_argument("--key-digits", type=int, default=10, help="decimal digits of the record keys (default 10)")
    parser.add_argument("--key-modulus", type=int, metavar="M",
                        help="ABS integer keys 0..M-1: the cell key is their sum mod M")
    add_output_arguments(parser, keep_original=False)


def run(args: argparse.Namespace) -> int:
    key = None
    if args.key:
        key = KeySpec(column=args.key, digits=args.key_digits, modulus=args.key_modulus)
    table = load_input(args, key=key, sums=args.sum)
    columns = ["count", *[f"sum_{v}" for v in args.sum]] + (["ckey", "ckey_int"] if key else [])
    # A tabulation of original counts is an evaluation output by nature: it is not protected.
    write_table(table, args.out, columns=columns, evaluation=True)
    counts = table.counts
    inner = table.leaf_mask
    print(
        f"wrote {table.n_cells:,} cells ({int(inner.sum()):,} inner) of {' × '.join(table.variables)} "
        f"to {args.out}; total {int(counts[0]):,}; zero cells {int((counts == 0).sum()):,}"
    )
    if args.where and int(counts[0]) == 0:
        print(f"note: --where {args.where!r} selects no records; every cell is zero")
    return 0
