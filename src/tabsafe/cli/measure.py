"""``tabsafe measure``: exact risk figures of a method, from its stated cell distribution (JSON).

``tabsafe measure info-gain --method METHOD [method options] [--prior uniform|p0,p1,…]`` prints
the expected information gain about a small cell's true count from its published value (seed
001 §5); ``tabsafe measure differencing-risk --method METHOD [method options] --n N [--total T]``
prints the distribution of the published difference of two cells ``N`` apart and ``p_exact``, the
probability that it shows ``N`` exactly (001 §1, §4). Both are exact sums over the method's
``P(published | n)`` (:mod:`tabsafe.evaluate.distribution`); the method's options are generated
from its declared parameters, as in ``tabsafe protect``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from tabsafe.errors import InputError

KINDS = ("info-gain", "differencing-risk")


def add_arguments(parser: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    from tabsafe.cli.common import positive_int
    from tabsafe.registry import get_method, method_names

    parser.add_argument("measure", choices=KINDS, metavar="{info-gain,differencing-risk}",
                        help="info-gain: expected information gain (001 §5); differencing-risk: the differenced "
                             "value of two cells N apart and the chance it is exact (001 §4)")
    parser.add_argument("--method", required=True, metavar="METHOD",
                        help=f"a registered method ({', '.join(method_names())}); '--method M --help' lists its "
                             "options")
    parser.add_argument("--prior", default="uniform", metavar="uniform|p0,p1,…",
                        help="info-gain: prior of the true count 0..K (default uniform on 0..5)")
    parser.add_argument("--n", type=positive_int, metavar="N",
                        help="differencing-risk: the true difference (the small block's count)")
    parser.add_argument("--total", type=positive_int, metavar="T",
                        help="differencing-risk: the true count of the larger cell (default N + 1000: a large "
                             "area)")
    from tabsafe.cli.options import methods_in

    names = methods_in(list(argv))
    if len(names) == 1:
        try:
            cls = get_method(names[0])
        except InputError:
            return  # reported with one line when the command runs
        from tabsafe.cli.options import add_method_options

        add_method_options(parser, [cls])


def run(args: argparse.Namespace) -> int:
    from tabsafe.cli.options import method_from_args
    from tabsafe.evaluate.distribution import (
        LARGE_TOTAL,
        differenced_distribution,
        information_gain,
    )
    from tabsafe.registry import get_method

    if "," in args.method:
        raise InputError("measure takes one method (the risk of a chain is not a cell distribution)",
                         where=args.method)
    cls = get_method(args.method)
    method = method_from_args(cls, args)
    out: dict[str, object] = {"measure": args.measure, "method": method.name, "params": method.params()}
    if args.measure == "info-gain":
        if args.n is not None or args.total is not None:
            raise InputError("--n and --total belong to differencing-risk")
        gain = information_gain(method, args.prior)
        out.update(gain)
    else:
        if args.n is None:
            raise InputError("differencing-risk needs --n N (the true difference)")
        if args.prior != "uniform":
            raise InputError("--prior belongs to info-gain")
        total = args.total if args.total is not None else args.n + LARGE_TOTAL
        if total < args.n:
            raise InputError(f"--total must be at least --n ({args.n}); got {total}")
        dist = differenced_distribution(method, args.n, total=total)
        out.update(n=args.n, total=total, p_exact=dist.get(args.n, 0.0),
                   distribution={str(d): p for d, p in dist.items()})
    print(json.dumps(out, indent=2))
    return 0
