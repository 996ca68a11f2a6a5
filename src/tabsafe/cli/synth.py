"""``tabsafe synth``: write a synthetic census."""

from __future__ import annotations

import argparse

from tabsafe.cli.common import positive_int, seed_int
from tabsafe.errors import InputError


def add_arguments(parser: argparse.ArgumentParser, argv: object = ()) -> None:
    parser.add_argument("--persons", type=positive_int, default=1_500_000, help="number of persons (default 1,500,000)")
    parser.add_argument("--areas", type=positive_int, default=200,
                        help="areas (the middle geography level; default 200)")
    parser.add_argument("--small-areas", type=positive_int, default=5000,
                        help="small areas (the lowest geography level, e.g. 180000 output areas; default 5000)")
    parser.add_argument("--seed", type=seed_int, default=1, help="random seed (default 1)")
    from tabsafe.engines import DEFAULT_ENGINE, engine_names

    parser.add_argument("--engine", choices=engine_names(), default=DEFAULT_ENGINE,
                        help="duckdb: generate in this process (the default); spark: generate on Spark in chunks of "
                             "1,000,000 persons, each from its own seed (deterministic, for national sizes such as "
                             "60,000,000 persons; not the same persons as the default for the same seed)")
    parser.add_argument("--business", type=positive_int, default=None, metavar="N",
                        help="write a synthetic business register of N enterprises instead (activity × region × "
                             "size class, holdings, turnover, sampling weights; for magnitude tables)")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="output folder: new, empty, or holding an earlier synthetic census (which is replaced)")


def run(args: argparse.Namespace) -> int:
    if args.business is not None:
        from tabsafe.synth_business import synth_business

        out = synth_business(args.business, args.seed, args.out)
        print(f"wrote {args.business:,} enterprises to {out}/")
        print(f"  {out}/enterprises.parquet\n  {out}/meta.yaml\n  {out}/hierarchies/")
        return 0
    from tabsafe.engines import get_engine

    if getattr(get_engine(args.engine), "dataframes", None) == "pyspark":  # an engine holding PySpark frames
        from tabsafe.synth import synth_census_spark as make
    elif get_engine(args.engine).embedded:
        from tabsafe.synth import synth_census as make
    else:
        raise InputError(f"engine {args.engine!r} cannot generate a synthetic census")

    result = make(args.persons, args.seed, args.out, n_areas=args.areas, n_small_areas=args.small_areas)
    print(f"wrote {result.n_persons:,} persons in {result.n_households:,} households to {result.directory}/")
    print(f"  {result.persons}\n  {result.households}\n  {result.meta}\n  {result.directory}/hierarchies/")
    return 0
