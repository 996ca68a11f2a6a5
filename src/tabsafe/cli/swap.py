"""``tabsafe swap``: protect microdata before tabulation (targeted or random record swapping, PRAM).

``--method targeted`` (the default; ``targeted-swap``), ``random`` (``random-swap``) or any
registered microdata method (``pram``); its options are generated from its declared parameters,
and ``--geography a,b,c`` names the geography levels (columns of the data, top level first).
``--hierarchy`` means ``VAR=FILE`` here as in every command; swapping reads no hierarchy file, so
it is refused with a line that names ``--geography`` (earlier versions named the levels with it). The output
is microdata — internal data, written private to the user — with the perturbed variables and a
flag per record (``swapped``, or ``changed`` for PRAM); ``--report`` writes the method's report
with its private figures (also a private file), ``--evaluation`` what happened to each record.
To publish tables, tabulate and protect the output, or chain the steps in one command:
``tabsafe protect DATA --by … --method targeted-swap,ckm …``.

``--engine`` names an engine that holds the records elsewhere (Spark): the swapping methods run
there (their :meth:`~tabsafe.method.MicrodataMethod.apply_on`, Parquet folders out); a method
without such a form (PRAM, perturbation weights, over-imputation, sampling) runs in this process,
as a chain's step does in ``tabsafe protect``, and writes the embedded engine's files.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from tabsafe.cli.common import say, say_seed, seed_int
from tabsafe.cli.sides import plan_sides, write_sides
from tabsafe.engines import DEFAULT_ENGINE, engine_names, get_engine
from tabsafe.errors import InputError, reader_message

#: short names of the swapping methods
ALIASES = {"targeted": "targeted-swap", "random": "random-swap"}


def _method_in(argv: Sequence[str]) -> str:
    for i, arg in enumerate(argv):
        if arg == "--method" and i + 1 < len(argv):
            return ALIASES.get(argv[i + 1], argv[i + 1])
        if arg.startswith("--method="):
            value = arg.split("=", 1)[1]
            return ALIASES.get(value, value)
    return "targeted-swap"


def add_arguments(parser: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    from tabsafe.cli.options import add_method_options
    from tabsafe.registry import get_method

    parser.add_argument("data", metavar="DATA", help="microdata file (.parquet or .csv)")
    parser.add_argument("--method", default="targeted", metavar="METHOD",
                        help="targeted (targeted record swapping, the default), random (random record swapping) "
                             "or a registered microdata method such as pram")
    parser.add_argument("--seed", type=seed_int, default=None,
                        help="seed of the random draws (drawn, printed and recorded when not given)")
    parser.add_argument("--out", required=True, metavar="FILE",
                        help="the perturbed microdata (.csv or .parquet; private: internal data)")
    parser.add_argument("--engine", choices=engine_names(), default=DEFAULT_ENGINE,
                        help="duckdb: swap in this process (the default); spark: swap on Spark, area by area (the "
                             "same swaps for the same seed; --out and --evaluation are then Parquet folders); a "
                             "method without a Spark form (pram, weights) runs in this process, as in tabsafe "
                             "protect, with the same output")
    parser.add_argument("--report", metavar="FILE.json", help="also write the report as JSON (private figures too)")
    parser.add_argument("--evaluation", metavar="FILE", help="also write what happened to each record (private)")
    try:
        cls = get_method(_method_in(list(argv)))
    except InputError:
        return  # reported with one line when the command runs
    if cls.kind != "microdata":
        return
    parser.add_argument("--hierarchy", action="append", default=[], metavar="VAR=FILE",
                        help="not used by swapping (the geography levels are columns: --geography A,B,C)")
    add_method_options(parser, [cls])


def run(args: argparse.Namespace) -> int:
    import json
    import os

    import pyarrow as pa

    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        # Arrow's default allocator keeps freed pages for reuse, so copying a census row group
        # by row group grows the process by the file's size; the system allocator returns them
        # (measured: 1.5M persons, 560 → 460 MB peak, no slower)
        pa.set_memory_pool(pa.system_memory_pool())

    from tabsafe.cli.options import method_from_args
    from tabsafe.io import Outputs, output_format
    from tabsafe.model.microdata import Microdata
    from tabsafe.registry import get_method

    cls = get_method(ALIASES.get(args.method, args.method))
    if cls.kind != "microdata":
        raise InputError(f"method {cls.name!r} protects tables, not microdata: use tabsafe protect")
    _check_hierarchy(args, cls)
    method = method_from_args(cls, args)
    output_format(args.out)
    if args.evaluation:
        output_format(args.evaluation)
    if args.report and not args.report.lower().endswith(".json"):
        raise InputError("the report is JSON: give a .json file", where=args.report)
    inputs = [args.data, getattr(method, "matrix", None)]
    engine = get_engine(getattr(args, "engine", DEFAULT_ENGINE))
    if not engine.embedded and _has_form(method):
        return _run_spark(args, method, inputs, engine)
    with Outputs(inputs=inputs) as out:
        # every output is checked before any work; nothing is written unless everything is
        data_path = out.plan(args.out, kind="evaluation")
        report_path = out.plan(args.report, kind="evaluation", option="report") if args.report else None
        eval_path = out.plan(args.evaluation, kind="evaluation", option="evaluation") if args.evaluation else None
        sides = plan_sides(out, args.out, [method])  # PRAM's transition matrix: publishable
        source = Microdata.from_file(args.data)
        subset = _subset(source, method.columns())
        if subset is not None:
            # only the method's variables are read and perturbed; the other columns stream from
            # the file to the output a row group at a time (a census never sits in memory whole)
            result = method.perturb(Microdata.from_frame(subset, name=args.data), seed=args.seed)
            n_records = _stream(args.data, result, out, data_path)
        else:
            result = method.perturb(source, seed=args.seed)
            data = _with_flag(result.microdata.read(), result.evaluation)
            n_records = data.num_rows
            out.write_arrow(data_path, data)
        if eval_path is not None and result.evaluation is not None:
            out.write_arrow(eval_path, result.evaluation)
        if report_path is not None:
            payload = result.report.to_json(evaluation=True)
            out.write_text(report_path, json.dumps(payload, indent=2, default=str) + "\n")
        side_written = write_sides(out, sides, result.report)
    _say(args, result.report, n_records, side_written)
    if not engine.embedded:
        say(f"note: {method.name} has no form for the {engine.name} engine: it ran in this process, as tabsafe "
            f"protect --engine {engine.name} runs it, and wrote the embedded engine's output", quiet=args.quiet)
    return 0


def _has_form(method: Any) -> bool:
    """Whether the method has a form of its own for an engine that holds the records elsewhere
    (:meth:`~tabsafe.method.MicrodataMethod.apply_on`: targeted and random swapping); one without
    runs in this process, as a chain's microdata step does (:meth:`tabsafe.pipeline.Chain.run`)."""
    from tabsafe.method import MicrodataMethod

    return type(method).apply_on is not MicrodataMethod.apply_on


def _check_hierarchy(args: argparse.Namespace, cls: Any) -> None:
    """``--hierarchy`` takes ``VAR=FILE`` everywhere; swapping has no use for one, and the
    geography levels have their own option."""
    from tabsafe.cli.options import _PREFIX

    given = [v for v in getattr(args, "hierarchy", []) or []]
    if not given:
        return
    has_geo = any(p.name == "geography" for p in cls.parameters())
    if has_geo and getattr(args, _PREFIX + "geography", None) is not None:
        raise InputError("give the geography levels with --geography only: --hierarchy takes VAR=FILE (a hierarchy "
                         "file), which swapping does not read")
    if has_geo and not any("=" in v for v in given):
        raise InputError(f"--hierarchy takes VAR=FILE; name the geography levels with --geography {given[0]}")
    raise InputError(f"tabsafe swap --method {cls.name} reads no hierarchy file: drop --hierarchy"
                     + (" (the geography levels are columns, named with --geography A,B,C)" if has_geo else ""))


def _say(args: argparse.Namespace, report: Any, n_records: int, sides: Sequence[Any] = ()) -> None:
    f = report.figures
    if "pairs" in f:
        say(f"{report.method}: {f['pairs']:,} swaps ({f['households_swapped']:,} of {f['households']:,} households, "
            f"{100 * f['share_households_swapped']:.2f}%, changed geography; the swap rate asked for "
            f"{f['target_pairs']:,} swaps); wrote {f['records']:,} records to {args.out}", quiet=args.quiet)
    else:
        shown = ", ".join(f"{k} {v}" for k, v in f.items() if not isinstance(v, (dict, list, tuple)))
        say(f"{report.method}: wrote {n_records:,} records to {args.out}" + (f"; {shown}" if shown else ""),
            quiet=args.quiet)
    say_seed(report.seed, given=args.seed, random=report.seed is not None, quiet=args.quiet,
             kept=f"report {args.report}" if args.report else None)
    for path in sides:
        say(f"wrote the transition matrix to {path} (it may be published)", quiet=args.quiet)
    for note in report.notes:
        say(f"note: {note}", quiet=args.quiet)


#: what Spark writes in a Parquet folder (an earlier run's folder may be replaced)
_SPARK_ENTRIES = ("part-", ".part-", "_SUCCESS", "._SUCCESS", "_committed_", "_started_")


def _spark_folder(path: str, inputs: Sequence[Any], option: str) -> Any:
    """Check ``path`` as a Parquet folder Spark writes: a ``.parquet`` name, new or a folder an
    earlier run wrote (only Spark's entries), never an input, in a writable folder."""
    import os
    from pathlib import Path

    from tabsafe.errors import param
    from tabsafe.io import output_format

    target = Path(path)
    if output_format(target) != "parquet":
        raise InputError(f"on Spark, {param(option)} is a Parquet folder: give a .parquet name", where=path)
    if target.exists() and not target.is_dir():
        raise InputError(f"on Spark, {param(option)} is a Parquet folder and this is a file: give a new name",
                         where=path)
    if target.exists():
        others = sorted(p.name for p in target.iterdir() if not p.name.startswith(_SPARK_ENTRIES))
        if others:
            raise InputError(f"{param(option)} holds entries Spark did not write (e.g. {others[0]!r}); give a new "
                             "name", where=path)
    for inp in inputs:
        if inp and Path(inp).resolve() == target.resolve():
            raise InputError(f"{param(option)} is an input of this command; it would be overwritten", where=path)
    parent = target.resolve().parent
    if not parent.is_dir():
        raise InputError("output folder does not exist", where=str(parent))
    if not os.access(parent, os.W_OK):
        raise InputError("output folder is not writable", where=str(parent))
    return target


def _write_private_folder(frame: Any, target: Any, written: list[tuple[Any, Any]]) -> None:
    """Spark writes ``frame`` into a temporary folder beside ``target`` (moved into place by
    :func:`_commit_folders`), private to the user like every swap output."""
    import os
    import tempfile
    from pathlib import Path

    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.resolve().parent))
    written.append((tmp, target))
    frame.write.mode("overwrite").parquet(str(tmp / "data"))
    for entry in (tmp / "data").iterdir():
        os.chmod(entry, 0o600)
    os.chmod(tmp / "data", 0o700)


def _commit_folders(written: list[tuple[Any, Any]], ok: bool) -> None:
    import os
    import shutil

    for tmp, target in written:
        if ok:
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp / "data", target)
        shutil.rmtree(tmp, ignore_errors=True)


def _run_spark(args: argparse.Namespace, method: Any, inputs: list[Any], engine: Any) -> int:
    """``--engine spark``: the method's Spark form (:meth:`~tabsafe.method.MicrodataMethod.apply_on`);
    the records stay in Spark and are written by it as a Parquet folder (one file per task)."""
    import json

    from tabsafe.errors import param
    from tabsafe.io import Outputs
    from tabsafe.model.microdata import Microdata

    data_target = _spark_folder(args.out, inputs, "out")
    eval_target = _spark_folder(args.evaluation, inputs, "evaluation") if args.evaluation else None
    if eval_target is not None and eval_target.resolve() == data_target.resolve():
        raise InputError(f"{param('evaluation')} names the folder {param('out')} writes", where=args.evaluation)
    written: list[tuple[Any, Any]] = []
    ok = False
    try:
        with Outputs(inputs=[*inputs, args.out, args.evaluation]) as out:
            report_path = out.plan(args.report, kind="evaluation", option="report") if args.report else None
            sides = plan_sides(out, args.out, [method])
            result = method.perturb(Microdata.from_file(args.data), seed=args.seed, engine=engine)
            held = result.microdata.source
            try:
                with engine.errors("cannot write the swapped records", where=args.out):
                    _write_private_folder(held.flagged if held.flagged is not None else held.frame, data_target,
                                          written)
                    if eval_target is not None and result.evaluation is not None:
                        _write_private_folder(result.evaluation, eval_target, written)
            finally:
                held.close()
            if report_path is not None:
                payload = result.report.to_json(evaluation=True)
                out.write_text(report_path, json.dumps(payload, indent=2, default=str) + "\n")
            side_written = write_sides(out, sides, result.report)
            _commit_folders(written, True)
            ok = True
    finally:
        if not ok:
            _commit_folders(written, False)
    _say(args, result.report, int(result.report.figures.get("records", result.report.figures.get("units", 0))),
         side_written)
    return 0


def _subset(source: Any, columns: Sequence[str] | None) -> Any:
    """The method's variables of a Parquet file, or None when the whole file must be read (a
    CSV, a glob, a method that reads everything, or a variable the file lacks: the method then
    names it with the file's columns)."""
    import pyarrow.parquet as pq

    src = source.source
    if columns is None or src.format != "parquet" or any(ch in src.path for ch in "*?["):
        return None
    try:
        pf = pq.ParquetFile(src.path)
        if not set(columns) <= set(pf.schema_arrow.names):
            return None
        return pf.read(columns=list(columns))
    except (OSError, ValueError) as exc:  # pyarrow's errors derive from these
        first = reader_message(exc)
        raise InputError(f"cannot read data: {first}", where=src.path) from None


def _with_flag(data: Any, flags: Any) -> Any:
    """The records with the method's per-record flag (``swapped``/``changed``) as a column; a
    flag of an earlier run is replaced. An evaluation that is not one flag per record (perturbation
    weights': one row per household) goes to ``--evaluation`` only."""
    import pyarrow as pa

    if flags is None or not flags.num_columns or flags.num_rows != data.num_rows \
            or not pa.types.is_boolean(flags.schema.field(0).type):
        return data
    flag = flags.column_names[0]
    if flag in data.column_names:
        data = data.drop_columns([flag])
    return data.append_column(pa.field(flag, pa.bool_()), flags.column(0))


def _stream(path: str, result: Any, out: Any, target: Any) -> int:
    """Copy ``path`` to ``target`` a row group at a time, with the perturbed columns (and the
    flag) of ``result`` in place of the originals; returns the number of records."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from tabsafe.io import output_format

    perturbed = _with_flag(result.microdata.read(), result.evaluation).unify_dictionaries()
    pf = pq.ParquetFile(path)
    fields = list(pf.schema_arrow)
    names = [f.name for f in fields]
    for f in perturbed.schema:
        if f.name in names:
            fields[names.index(f.name)] = f
        else:
            fields.append(f)
    schema = pa.schema(fields)
    fmt = output_format(target)
    n = 0
    with out.open(target) as tmp:
        writer: Any = (pq.ParquetWriter(tmp, schema, write_statistics=False) if fmt == "parquet"
                       else pacsv.CSVWriter(tmp, schema))
        try:
            for batch in pf.iter_batches(batch_size=1 << 17):
                size = batch.num_rows
                cols = {name: batch.column(name) for name in batch.schema.names}
                for name in perturbed.column_names:
                    cols[name] = perturbed.column(name).slice(n, size).combine_chunks()
                writer.write_batch(pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema))
                n += size
        finally:
            writer.close()
    return n
