"""``tabsafe ptable``: generate a cell key method p-table and write it (seed 000 §5.4).

The p-table's options are generated from :class:`~tabsafe.protect.ptable.PTableParams`'
declared parameters (``--max-noise``, ``--variance``, ``--js``, ``--pstay``,
``--[no-]monotony``); their help comes from its docstring. Every output — the p-table
(``--out``, a ``.csv`` or ``.txt`` text file in either layout), the plot (``--plot``, PNG) and
the report (``--report``, JSON with the variance each row reached) — is planned before the
p-table is generated and written together through one :class:`~tabsafe.io.Outputs` transaction:
an infeasible parameter set or a bad path leaves nothing behind.

Rows whose variance stays below ``V`` (the variance is an upper bound) are marked, and one
line says why and what would reach it.
"""

from __future__ import annotations

import argparse
from typing import Any

from tabsafe.errors import InputError, as_flag

__all__ = ["add_arguments", "run"]

_PREFIX = "ptable__"


def _parameters() -> tuple[Any, ...]:
    from tabsafe.params import parameters
    from tabsafe.protect.ptable import PTableParams

    return parameters(PTableParams)


def add_arguments(parser: argparse.ArgumentParser, argv: object = ()) -> None:
    """The p-table parameters (generated from their declarations) and the outputs."""
    from tabsafe.cli.options import _help

    group = parser.add_argument_group("p-table", "parameters of the maximum entropy p-table")
    for p in _parameters():
        kwargs: dict[str, Any] = {"dest": _PREFIX + p.name, "default": None, "help": _help(p)}
        if p.constraint.is_flag:
            group.add_argument(as_flag(p.name), action=argparse.BooleanOptionalAction, **kwargs)
        else:
            group.add_argument(as_flag(p.name), metavar=p.constraint.metavar, required=p.required, **kwargs)
    group.add_argument("--shape", choices=("maximum-entropy", "truncated-normal"), default="maximum-entropy",
                       help="maximum-entropy (seed 000 §5.4, the default) or truncated-normal (seed 004 §3.3: "
                            "noise N(0, V) made integer, truncated at -min(i, D) and +D; --js, --pstay and "
                            "--monotony do not apply)")
    out = parser.add_argument_group("output")
    out.add_argument("--out", required=True, metavar="FILE",
                     help="p-table file to write: .csv or .txt (either layout)")
    out.add_argument("--format", dest="file_format", choices=("csv", "tau-argus"), default="csv",
                     help="csv: i,j,p,v,p_int_lb,p_int_ub; tau-argus: i;j;p;v;p_int_ub (default csv)")
    out.add_argument("--plot", default=None, metavar="PNG",
                     help="also write a PNG of the noise distribution per original value")
    out.add_argument("--report", default=None, metavar="FILE.json",
                     help="also write the parameters and the variance each row reached as JSON")


def params_from_args(args: argparse.Namespace) -> Any:
    """The :class:`PTableParams` the options describe (each value checked by its constraint)."""
    from tabsafe.protect.ptable import PTableParams

    values: dict[str, Any] = {}
    for p in _parameters():
        raw = getattr(args, _PREFIX + p.name, None)
        if raw is None:
            continue
        values[p.name] = bool(raw) if p.constraint.is_flag else p.constraint.from_text(p.name, raw)
    return PTableParams(**values)


def _generate(args: argparse.Namespace, params: Any, maxent: Any) -> Any:
    """The p-table of the shape asked for."""
    if args.shape == "maximum-entropy":
        return maxent(params)
    from tabsafe.protect.ptable.normal import truncated_normal_ptable

    given = [as_flag(n) for n in ("js", "pstay", "monotony") if getattr(args, _PREFIX + n, None) is not None]
    if given:
        raise InputError(f"{', '.join(given)}: for the maximum entropy p-table only; --shape truncated-normal "
                         "takes --max-noise and --variance")
    return truncated_normal_ptable(params.max_noise, params.variance)


def _label(ptable: Any, i: int) -> str:
    return f"i>={i}" if i == ptable.i_max else f"i={i}"


def run(args: argparse.Namespace) -> int:
    """Generate the p-table, write every output together, print one line per original value
    with the variance it reached (and one line on rows below ``V``); return 0."""
    import json
    from pathlib import Path

    from tabsafe.evaluate.ptable_plot import check_plot_path, plot_ptable
    from tabsafe.io import Outputs
    from tabsafe.protect.ptable import generate_ptable
    from tabsafe.protect.ptable.files import check_ptable_path, write_ptable

    params = params_from_args(args)
    check_ptable_path(args.out)
    if args.plot:
        check_plot_path(args.plot)
    if args.report and Path(args.report).suffix.lower() != ".json":
        raise InputError("the report is JSON: give a .json name", where=args.report)
    with Outputs() as out:
        # every output is checked before the (possibly long, possibly infeasible) generation
        table_path = out.plan(args.out)
        plot_path = out.plan(args.plot, option="plot") if args.plot else None
        report_path = out.plan(args.report, option="report") if args.report else None
        ptable = _generate(args, params, generate_ptable)
        write_ptable(ptable, table_path, layout=args.file_format, outputs=out)
        if plot_path is not None:
            plot_ptable(ptable, plot_path, outputs=out)
        shortfall = ptable.shortfall()
        if report_path is not None:
            below = {r.i for r in ptable.rows_below()}
            payload = {
                "params": params.params(),
                "shape": args.shape,
                "format": args.file_format,
                "i_max": ptable.i_max,
                "rows": [{**r.to_json(), "below_variance": r.i in below} for r in ptable.row_reports],
                "notes": [shortfall] if shortfall else [],
            }
            out.write_text(report_path, json.dumps(payload, indent=2) + "\n")
    below = {r.i for r in ptable.rows_below()}
    for r in ptable.row_reports:
        mark = f"  below V={params.variance:g}" if r.i in below else ""
        print(f"{_label(ptable, r.i)}: targets={r.targets} mean={r.mean:+.2e} "
              f"variance={r.variance:.6f} p_stay={r.p_stay:.6f}{mark}")
    if shortfall:
        print(f"note: {ptable.shortfall(as_flag)}")
    print(f"wrote {args.out} ({ptable.n_rows} rows, i_max={ptable.i_max})")
    return 0
