"""Command-line hook: generate a p-table and write it (the lead's ``tabsafe`` CLI mounts it).

``add_arguments`` declares the options on a parser the CLI owns; ``run`` does the work and
returns the exit status. Bad input raises :class:`tabsafe.errors.InputError`, an infeasible
parameter set :class:`tabsafe.errors.MethodError`; the CLI prints their one line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import tabsafe.errors
from tabsafe.protect.ptable import PTableParams, generate_ptable

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser, argv: object = ()) -> None:
    """Add ``--max-noise D --variance V [--js J] [--pstay P] [--no-monotony] --out FILE
    [--format csv|tau-argus] [--plot PNG]`` to ``parser``."""
    parser.add_argument("--max-noise", dest="max_noise", required=True, metavar="D",
                        help="largest absolute noise D (integer >= 1)")
    parser.add_argument("--variance", required=True, metavar="V",
                        help="noise variance V (number > 0), an upper bound per row")
    parser.add_argument("--js", default="0", metavar="J",
                        help="perturbed values 1..J never occur (default 0: none blocked)")
    parser.add_argument("--pstay", default=None, metavar="P",
                        help="lower bound of the probability of no change, in (0, 1)")
    parser.add_argument("--no-monotony", dest="monotony", action="store_false",
                        help="drop the monotony constraint on the negative side")
    parser.add_argument("--out", required=True, metavar="FILE", help="p-table file to write")
    parser.add_argument("--format", dest="file_format", choices=("csv", "tau-argus"),
                        default="csv",
                        help="csv: i,j,p,v,p_int_lb,p_int_ub; tau-argus: i;j;p;v;p_int_ub")
    parser.add_argument("--plot", default=None, metavar="PNG",
                        help="also write a PNG of the noise distribution per original value")


def _number(text: object, name: str, kind: type) -> object:
    if text is None or isinstance(text, (int, float)):
        return text
    try:
        return kind(str(text).strip())
    except ValueError:
        noun = "an integer" if kind is int else "a number"
        raise tabsafe.errors.InputError(
            f"option --{name} must be {noun}; got {text!r}", where="ptable"
        ) from None


def run(args: argparse.Namespace) -> int:
    """Generate the p-table described by ``args``, write it (and the plot), print one line per
    original value with the variance it reached; return 0."""
    params = PTableParams(
        max_noise=_number(args.max_noise, "max-noise", int),  # type: ignore[arg-type]
        variance=_number(args.variance, "variance", float),  # type: ignore[arg-type]
        js=_number(args.js, "js", int),  # type: ignore[arg-type]
        pstay=_number(args.pstay, "pstay", float),  # type: ignore[arg-type]
        monotony=bool(args.monotony),
    )
    out = Path(args.out)
    for target in [out] + ([Path(args.plot)] if args.plot else []):
        if not target.parent.is_dir():
            raise tabsafe.errors.InputError(f"folder {target.parent} does not exist", where=str(target))
    ptable = generate_ptable(params)
    if getattr(args, "file_format", "csv") == "tau-argus":
        ptable.to_tau_argus(out)
    else:
        ptable.to_csv(out)
    if args.plot:
        ptable.plot(args.plot)
    for row in ptable.report.itertuples(index=False):
        label = f"i>={row.i}" if row.i == ptable.i_max else f"i={row.i}"
        print(
            f"{label}: targets={row.targets} mean={row.mean:+.2e} "
            f"variance={row.variance:.6f} p_stay={row.p_stay:.6f}"
        )
    print(f"wrote {out} ({len(ptable.rows)} rows, i_max={ptable.i_max})")
    return 0
