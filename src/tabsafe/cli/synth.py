"""``tabsafe synth``: write a synthetic census."""

from __future__ import annotations

import argparse

from tabsafe.synth import synth_census


def add_arguments(parser: argparse.ArgumentParser, argv: object = ()) -> None:
    parser.add_argument("--persons", type=int, default=1_500_000, help="number of persons (default 1,500,000)")
    parser.add_argument("--seed", type=int, default=1, help="random seed")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder (replaced if it exists)")


def run(args: argparse.Namespace) -> int:
    result = synth_census(args.persons, args.seed, args.out)
    print(f"wrote {result.n_persons:,} persons in {result.n_households:,} households to {result.directory}/")
    print(f"  {result.persons}\n  {result.households}\n  {result.meta}\n  {result.directory}/hierarchies/")
    return 0
