"""``tabsafe protect``: tabulate, apply registered methods, write the release.

``--method NAME`` picks any registered method; ``--method A,B`` chains methods (microdata methods
first, then table methods: ``--method ckm,additivity``). Each method's options are generated from
its declared parameters (``tabsafe protect --method NAME --help`` lists them); a parameter two
chained methods share is one option. The release (``--out``) holds published values only;
``--keep-original`` makes it an evaluation file with the original counts, ``--evaluation FILE``
writes the evaluation values (originals, keys, statuses) to a file of their own, and ``--report``
the method's report (its private figures only beside an evaluation output).
``--release RELEASE.yaml`` protects the tables of a release config together instead
(:mod:`tabsafe.cli.release`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from tabsafe.cli.common import (
    add_input_arguments,
    add_output_arguments,
    input_paths,
    load_source,
    say,
    say_seed,
    seed_int,
    split_list,
    table_spec,
)
from tabsafe.cli.options import add_method_options, files_read, method_from_args, methods_in
from tabsafe.cli.release import add_protect_arguments, run_protect, wants_release
from tabsafe.cli.sides import plan_sides, write_sides
from tabsafe.errors import InputError


def add_arguments(parser: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    from tabsafe.registry import get_method, method_names

    if wants_release(argv):  # the tables of a release config, together (tabsafe.cli.release)
        add_protect_arguments(parser, argv)
        return
    parser.add_argument("--release", metavar="RELEASE.yaml",
                        help="protect the tables of a release config together (see --release FILE --help)")
    add_input_arguments(parser)
    parser.add_argument("--method", required=True, type=split_list, metavar="METHOD[,METHOD]",
                        help=f"protection method ({', '.join(method_names())}), or a chain A,B; "
                             "'--method M --help' lists its options")
    parser.add_argument("--seed", type=seed_int, default=None,
                        help="seed of random methods (drawn, printed and recorded when not given)")
    add_output_arguments(parser)
    parser.add_argument("--format", default=None, choices=["csv", "parquet", "sdmx-csv", "csvw"],
                        help="release format (default: by the extension of --out); sdmx-csv: SDMX-CSV 2.0 with "
                             "OBS_STATUS and CONF_STATUS; csvw: CSV and its CSV-W metadata FILE-metadata.json")
    parser.add_argument("--sdmx-structure", default="TABSAFE:TABLE(1.0)", metavar="AGENCY:ID(VERSION)",
                        help="the dataflow named in an SDMX-CSV release")
    parser.add_argument("--evaluation", metavar="FILE",
                        help="also write the evaluation values (originals, keys, statuses): a private file")
    parser.add_argument("--report", metavar="FILE.json", help="also write the method's report as JSON")
    classes = []
    for name in methods_in(list(argv)):
        try:
            classes.append(get_method(name))
        except InputError:
            continue  # reported with one line when the command runs
    if classes:
        add_method_options(parser, classes)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "release", None):

        return run_protect(args)
    from tabsafe.io import Outputs, evaluation_arrow, output_format, release_arrow
    from tabsafe.pipeline import Chain
    from tabsafe.registry import get_method

    classes = [get_method(name) for name in args.method]
    chain = Chain(tuple(method_from_args(cls, args) for cls in classes))
    fmt = getattr(args, "format", None)
    if fmt in {"sdmx-csv", "csvw"}:
        if args.keep_original:
            raise InputError(f"--format {fmt} writes a release: it cannot carry --keep-original's originals")
        if not args.out.lower().endswith(".csv"):
            raise InputError(f"--format {fmt} writes CSV: give a .csv file", where=args.out)
    else:
        output_format(args.out)
    if args.evaluation:
        output_format(args.evaluation)
    if args.report and not args.report.lower().endswith(".json"):
        raise InputError("the report is JSON: give a .json file", where=args.report)
    with Outputs(inputs=[*input_paths(args), *files_read(chain.methods)]) as out:
        # every output is checked before any work: a bad path fails at once, and nothing is
        # written unless everything is
        release_path = out.plan(args.out, kind="evaluation" if args.keep_original else "release")
        meta_path = out.plan(f"{args.out}-metadata.json", option="out") if fmt == "csvw" else None
        eval_path = out.plan(args.evaluation, kind="evaluation", option="evaluation") if args.evaluation else None
        report_kind = "evaluation" if (args.keep_original or args.evaluation) else "release"
        report_path = out.plan(args.report, kind=report_kind, option="report") if args.report else None
        sides = plan_sides(out, args.out, chain.methods)  # e.g. PRAM's transition matrix, beside the release
        needs = chain.needs()
        source = load_source(args, needs_microdata=needs.microdata)
        spec = table_spec(args, key=needs.key, sums=needs.sums, contributors=needs.contributors)
        result, _ = chain.run(source, spec, seed=args.seed, engine=args.engine)
        if args.keep_original:
            data = result.table
            cols = [*result.release.columns, "original"]
            out.write_arrow(release_path, evaluation_arrow(data, cols, zero_cells=args.zero_cells))
        elif fmt == "sdmx-csv":
            from tabsafe.interop.sdmx import sdmx_csv

            out.write_text(release_path, sdmx_csv(result.release, structure=args.sdmx_structure))
        else:
            data = release_arrow(result.release, zero_cells=args.zero_cells)
            out.write_arrow(release_path, data)
            if meta_path is not None:
                from tabsafe.interop.csvw import csvw_metadata

                out.write_text(meta_path, csvw_metadata(result.release, result.report, csv_name=release_path.name,
                                                        columns=data.schema))
        if eval_path is not None:
            out.write_arrow(eval_path, evaluation_arrow(result.evaluation, zero_cells=args.zero_cells))
        side_written = write_sides(out, sides, result.report)
        if report_path is not None:
            import json

            payload = result.report.to_json(evaluation=report_kind == "evaluation")
            out.write_text(report_path, json.dumps(payload, indent=2, default=str) + "\n")
    report = result.report
    figures = ", ".join(f"{k} {v}" for k, v in report.figures.items() if not isinstance(v, (dict, list, tuple)))
    say(f"{chain.name}: wrote {result.release.table.n_cells:,} protected cells to {args.out}"
        + (f"; {figures}" if figures else ""), quiet=args.quiet)
    say_seed(report.seed, given=args.seed, random=chain.random, quiet=args.quiet,
             kept=f"report {args.report}" if report_path is not None and report_kind == "evaluation" else None)
    for path in side_written:
        say(f"wrote the transition matrix to {path} (it may be published)", quiet=args.quiet)
    for note in report.notes:
        say(f"note: {note}", quiet=args.quiet)
    return 0
