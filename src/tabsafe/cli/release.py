"""Releases on the command line: ``tabsafe protect --release`` and ``tabsafe audit --release``.

``tabsafe protect --release RELEASE.yaml --method suppress [method options] --out DIR`` tabulates
every table of the release config (:mod:`tabsafe.release.spec`), protects them together
(:func:`tabsafe.release.protect_release`: suppression over the union of their cells and
relations, a shared cell one status, and the release audit of what is published; controlled
rounding of the union in one program, a shared cell one value, the manifest recording each
table's base; a method of the cell perturbation family from the release's finest cells, so a
shared cell has one value and every table is additive; microdata methods on the records once for
every table; a chain such as ``ckm,additivity`` step by step, additivity over the whole release:
:func:`tabsafe.release.protect.protect_release_chain`) and writes one
release file per table into ``DIR`` with a manifest, ``DIR/release.yaml``, that
``tabsafe audit --release`` reads. Every output is planned before any work, and nothing is
written when the audit fails.

``tabsafe audit --release FILE...`` is the intruder's interval programs over all published tables
at once (:mod:`tabsafe.release.audit`): ``FILE`` is a manifest, or the published table files
themselves (their codes columns are the variables; hierarchies with ``--hierarchy``). It lists
every cell it pins or narrows below ``--protection-level``, with the published cells that give
it away.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tabsafe.cli.common import add_output_arguments, say, say_seed, seed_int, split_list
from tabsafe.errors import InputError, reader_message, shown

#: how many exposed cells the audit prints
SHOWN = 10
#: columns of a published file that are values, not codes
_VALUE_COLUMNS = {"count", "status", "original", "reason", "ckey", "ckey_int", "input"}


def wants_release(argv: Sequence[str]) -> bool:
    """Whether a command line asks for the release form of a command."""
    return any(a == "--release" or a.startswith("--release=") for a in argv)


# ------------------------------------------------------------------------------------ protect


def add_protect_arguments(parser: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    from tabsafe.cli.options import methods_in
    from tabsafe.registry import get_method, method_names

    parser.add_argument("--release", required=True, metavar="RELEASE.yaml",
                        help="the release config: data, hierarchies, the tables published together")
    parser.add_argument("data", nargs="?", metavar="DATA", help="microdata file (default: the config's 'data')")
    parser.add_argument("--method", required=True, type=split_list, metavar="METHOD[,METHOD]",
                        help=f"protection method ({', '.join(method_names())}), or a chain A,B (ckm,additivity: "
                             "additivity over the whole release); '--method M --help' lists its options")
    parser.add_argument("--seed", type=seed_int, default=None,
                        help="seed of random methods (drawn, printed and recorded when not given)")
    parser.add_argument("--engine", default=None, metavar="NAME",
                        help="tabulation engine (default: the release config's 'engine', else duckdb)")
    add_output_arguments(parser)
    for action in parser._actions:
        if "--out" in action.option_strings:
            action.metavar = "DIR"
            action.help = "folder for the release: one file per table and release.yaml (made if missing)"
    parser.add_argument("--format", default="csv", choices=["csv", "parquet", "sdmx-csv", "csvw"],
                        help="format of the table files; sdmx-csv also writes NAME.sdmx.csv, csvw also "
                             "NAME.csv-metadata.json, beside the NAME.csv the manifest lists")
    parser.add_argument("--evaluation", metavar="DIR",
                        help="also write each table's evaluation values (originals, statuses): private files")
    parser.add_argument("--report", metavar="FILE.json", help="also write the release's report as JSON")
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
    classes = []
    for name in methods_in(list(argv)):
        try:
            classes.append(get_method(name))
        except InputError:
            continue
    if classes:
        from tabsafe.cli.options import add_method_options

        add_method_options(parser, classes)


def _folder(path: str, option: str) -> tuple[Path, bool]:
    """An output folder: an existing one, or one to make (its parent must exist)."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        from tabsafe.errors import param

        raise InputError(f"{param(option)} names a file; give a folder", where=str(folder))
    if not folder.exists() and not folder.parent.is_dir():
        raise InputError("output folder does not exist", where=str(folder.parent))
    return folder, not folder.exists()


def run_protect(args: argparse.Namespace) -> int:
    """``tabsafe protect --release``: check the command line, build the new output folders as hidden
    temporary ones, protect and write every table with its manifest (:func:`_write_release`), move
    the folders into place, then say what was written."""
    import os
    import shutil

    from tabsafe.cli.options import method_from_args
    from tabsafe.io import _umask
    from tabsafe.pipeline import Chain
    from tabsafe.registry import get_method

    chain = Chain(tuple(method_from_args(get_method(name), args) for name in args.method))
    method = chain.table_steps[-1] if chain.table_steps else chain.methods[-1]  # what the files are read as
    spec, data, (out_dir, made), (eval_dir, made_eval) = _protect_inputs(args)
    final_out = out_dir
    building = _building(((out_dir, made), (eval_dir, made_eval)))
    moved = dict((final, tmp) for tmp, final in building)
    try:
        result, spec, report_kind = _write_release(
            args, spec, data, chain, method, moved.get(out_dir, out_dir),
            moved.get(eval_dir, eval_dir) if eval_dir is not None else None)
        for tmp, final in building:
            os.chmod(tmp, 0o777 & ~_umask() if final is final_out else 0o700)
            os.rename(tmp, final)  # fails if the folder appeared meanwhile: nothing is replaced
    except BaseException:
        for tmp, _ in building:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    _say_protected(args, chain, method, spec, result, report_kind, final_out)
    return 0


def _protect_inputs(args: argparse.Namespace) -> tuple[Any, Path | None, tuple[Path, bool],
                                                       tuple[Path | None, bool]]:
    """The release config, the microdata file (None when the config gives a table), and the
    ``--out`` and ``--evaluation`` folders (each with whether it is to be made), checked before any
    work: bad input is one clear line and nothing written."""
    from tabsafe.release import ReleaseSpec

    if args.engine is not None:  # the command line wins over the config: checked before any work
        from tabsafe.errors import param
        from tabsafe.registry import engine_name

        engine_name(args.engine, key=param("engine"))
    spec = ReleaseSpec.from_yaml(args.release)
    data = Path(args.data) if args.data else spec.data
    if data is None and spec.table is None:
        raise InputError("no input: give DATA or 'data' (or 'table' and 'count') in the release config",
                         where=args.release)
    out_dir, made = _folder(args.out, "out")
    eval_dir, made_eval = _folder(args.evaluation, "evaluation") if args.evaluation else (None, False)
    if eval_dir is not None and (eval_dir.resolve() == out_dir.resolve()):
        raise InputError("--evaluation names the --out folder: evaluation files (originals) never sit beside the "
                         "release; give another folder", where=str(eval_dir))
    if args.report and not args.report.lower().endswith(".json"):
        raise InputError("the report is JSON: give a .json file", where=args.report)
    return spec, data, (out_dir, made), (eval_dir, made_eval)


def _building(folders: Sequence[tuple[Path | None, bool]]) -> list[tuple[Path, Path]]:
    """A hidden temporary folder beside each new output folder, as ``(temporary, final)`` pairs.

    A new folder is built there and renamed into place when everything is written: a killed run
    leaves no empty ``--out`` folder (the next run removes its temporary folder,
    :func:`tabsafe.io.clean_stale`)."""
    import tempfile

    from tabsafe.io import clean_stale, temp_prefix

    building = []
    for folder, new in folders:
        if folder is not None and new:
            clean_stale(folder.resolve().parent, folder.resolve().name)
            building.append((Path(tempfile.mkdtemp(prefix=temp_prefix(folder.resolve().name),
                                                   dir=folder.resolve().parent)), folder))
    return building


def _write_release(args: argparse.Namespace, spec: Any, data: Path | None, chain: Any, method: Any,
                   out_dir: Path, eval_dir: Path | None) -> tuple[Any, Any, str]:
    """Plan every output, protect the release (:func:`tabsafe.release.protect.protect_release_chain`)
    and write its table files, evaluation files, manifest and report into ``out_dir`` and
    ``eval_dir``; the protection result, the spec as the manifest records it, and the report's kind
    (``"evaluation"`` when it may carry originals)."""
    from tabsafe.io import Outputs, evaluation_arrow, release_arrow
    from tabsafe.release.protect import protect_release_chain

    inputs = [args.release, str(data) if data else None, *spec.input_files()]
    with Outputs(inputs=inputs) as out:
        kind = "evaluation" if args.keep_original else "release"
        ext = "parquet" if args.format == "parquet" else "csv"
        if args.format in {"sdmx-csv", "csvw"} and args.keep_original:
            raise InputError(f"--format {args.format} writes a release: it cannot carry --keep-original's originals")
        paths = {t.name: out.plan(out_dir / f"{t.name}.{ext}", kind=kind) for t in spec.tables}
        extra_name = {"sdmx-csv": "{}.sdmx.csv", "csvw": "{}.csv-metadata.json"}.get(args.format)
        extras = {t.name: out.plan(out_dir / extra_name.format(t.name), kind=kind)
                  for t in spec.tables} if extra_name else {}
        manifest = out.plan(out_dir / "release.yaml", kind="release")
        evals = ({t.name: out.plan(eval_dir / f"{t.name}.evaluation.parquet", kind="evaluation",
                                   option="evaluation") for t in spec.tables} if eval_dir else {})
        report_kind = "evaluation" if (args.keep_original or eval_dir) else "release"
        report_path = out.plan(args.report, kind=report_kind, option="report") if args.report else None
        source = _release_source(spec, data, chain)
        result = protect_release_chain(spec, source, chain.methods, engine=args.engine, seed=args.seed)
        for t, p in zip(spec.tables, result.protections):
            if args.keep_original:
                out.write_arrow(paths[t.name], evaluation_arrow(p.table, [*p.release.columns, "original"],
                                                                zero_cells=args.zero_cells))
            else:
                data_arrow = release_arrow(p.release, zero_cells=args.zero_cells)
                out.write_arrow(paths[t.name], data_arrow)
                _write_extra(out, args, extras.get(t.name), p, result.report, paths[t.name].name, data_arrow)
            if t.name in evals:
                out.write_arrow(evals[t.name], evaluation_arrow(p.evaluation, zero_cells=args.zero_cells))
        spec = _manifest_spec(spec, method)
        _write_manifest(out, manifest, spec, chain, out_dir, paths)
        if report_path is not None:
            payload = result.report.to_json(evaluation=report_kind == "evaluation")
            payload["tables"] = list(result.names)
            if result.audit is not None and report_kind == "evaluation":
                payload["audit"] = result.audit.summary()
            out.write_text(report_path, json.dumps(payload, indent=2, default=str) + "\n")
    return result, spec, report_kind


def _release_source(spec: Any, data: Path | None, chain: Any) -> Any:
    """What the release is tabulated from: the microdata file, else the config's table of inner
    cells (refused when the chain needs microdata); codes from the config's ``meta`` or a
    ``meta.yaml`` beside the data."""
    from tabsafe.io import read_meta
    from tabsafe.model.microdata import InnerCells, Microdata

    needs = chain.needs()
    meta = spec.meta or (data.parent / "meta.yaml" if data and (data.parent / "meta.yaml").is_file() else None)
    codelists = read_meta(meta, only=spec.variables) if meta else {}
    if data is not None:
        return Microdata.from_file(data, codelists=codelists)
    if needs.microdata:
        raise InputError(f"method {chain.name!r} needs microdata, not 'table'")
    return InnerCells.from_file(spec.table, count=spec.count, codelists=codelists)  # type: ignore[arg-type]


def _manifest_spec(spec: Any, method: Any) -> Any:
    """The release spec as the manifest records it: what the audit of the files may assume from the
    method's reading (the least value a hidden cell has; rounded tables read as intervals of the
    base)."""
    reading = method.reading()  # what the audit of the files may assume
    if reading.hidden_min is not None:
        spec = dataclasses.replace(spec, suppressed_min=reading.hidden_min)
    if reading.base is not None:  # rounded tables: the audit reads each value as an interval
        spec = dataclasses.replace(spec, tables=tuple(dataclasses.replace(t, base=reading.base)
                                                      for t in spec.tables))
    return spec


def _write_manifest(out: Any, manifest: Path, spec: Any, chain: Any, out_dir: Path, paths: dict[str, Path]) -> None:
    """``release.yaml``: the spec with each table's file, described by the chain that protected it."""
    import yaml

    doc = spec.to_mapping(base=out_dir, files={k: str(v) for k, v in paths.items()})
    doc = {"description": f"release protected with {chain.name}", **doc}
    out.write_text(manifest, yaml.safe_dump(doc, sort_keys=False))


def _say_protected(args: argparse.Namespace, chain: Any, method: Any, spec: Any, result: Any, report_kind: str,
                   out_dir: Path) -> None:
    """The lines ``tabsafe protect --release`` prints: what was written, the audit's verdict, the
    seed (and where it is kept), the report's notes."""
    report = result.report
    figures = ", ".join(f"{k} {v}" for k, v in report.figures.items() if not isinstance(v, (dict, list, tuple)))
    say(f"{chain.name}: wrote {len(spec.tables)} tables ({result.cells.n_cells:,} cells, "
        f"{int((result.cells.shared() > 1).sum()):,} shared) to {out_dir}/" + (f"; {figures}" if figures else ""),
        quiet=args.quiet)
    if result.audit is not None:
        say("release audit: no primary cell narrower than its protection, over all tables together",
            quiet=args.quiet)
    say_seed(report.seed, given=args.seed, random=method.random, quiet=args.quiet,
             kept=f"report {args.report}" if args.report and report_kind == "evaluation" else None)
    for note in report.notes:
        say(f"note: {note}", quiet=args.quiet)


def _write_extra(out: Any, args: argparse.Namespace, path: Path | None, protection: Any, report: Any,
                 csv_name: str, data: Any) -> None:
    """The SDMX-CSV or CSV-W file written beside a release table (:mod:`tabsafe.interop`)."""
    if path is None:
        return
    if args.format == "sdmx-csv":
        from tabsafe.interop.sdmx import sdmx_csv

        out.write_text(path, sdmx_csv(protection.release))
    else:
        from tabsafe.interop.csvw import csvw_metadata

        out.write_text(path, csvw_metadata(protection.release, report, csv_name=csv_name, columns=data.schema))


# ------------------------------------------------------------------------------------ audit


def add_audit_arguments(parser: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    parser.add_argument("--release", required=True, nargs="+", metavar="FILE",
                        help="the release as published: its manifest (release.yaml), or the table files; "
                             "exit status 1 when a cell is narrower than --protection-level (a gate for "
                             "scripts), 0 when none is")
    parser.add_argument("--hierarchy", action="append", default=[], metavar="VAR=FILE",
                        help="hierarchy of a variable of the table files (.hrc or .yaml); repeat")
    parser.add_argument("--same-codes", action="append", default=[], type=split_list, metavar="A,B",
                        help="variables whose codes name the same populations (region, area); repeat")
    parser.add_argument("--base", type=int, default=None, metavar="B",
                        help="the table files are rounded to base B (a published r is in [r-B+1, r+B-1])")
    parser.add_argument("--suppressed-min", type=float, default=None, metavar="N",
                        help="what the intruder knows as the least value of a suppressed cell (default: the "
                             "manifest's, else 1: tabsafe never suppresses zeros unless asked to)")
    parser.add_argument("--protection-level", type=float, default=1.0, metavar="L",
                        help="report cells whose interval is narrower than L (default 1: pinned to one value)")
    parser.add_argument("--out", default=None, metavar="FILE", help="write the exposed cells: .csv, .parquet or .json")
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")


def _published_table(path: Path, name: str, by: Sequence[str] | None, hierarchies: dict[str, Any]) -> tuple[Any, Any]:
    """A published table file as a dense table of its grid (a missing cell is a published zero)
    and its published counts (NaN where suppressed)."""
    import numpy as np

    from tabsafe._arrow import to_numpy, validity
    from tabsafe.model.hierarchy import Hierarchy
    from tabsafe.model.table import Dimension, Table

    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            import pyarrow as pa
            import pyarrow.csv as pacsv

            head = pacsv.read_csv(path, read_options=pacsv.ReadOptions(block_size=1 << 16)).schema.names
            types = {c: pa.string() for c in head if c not in _VALUE_COLUMNS or c == "status"}
            data = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types=types))
        elif suffix in {".parquet", ".pq"}:
            import pyarrow.parquet as pq

            data = pq.read_table(path)
        else:
            raise InputError(f"unknown table format {suffix or '(none)'!r}; use .csv or .parquet", where=str(path))
    except OSError as exc:
        raise InputError(f"cannot read the table: {exc}", where=str(path)) from None
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow's parse errors have no common base
        raise InputError(f"cannot read the table: {reader_message(exc)}", where=str(path)) from None
    names = data.schema.names
    if "count" not in names:
        raise InputError("a published table needs a 'count' column", where=str(path))
    variables = list(by) if by else [c for c in names if c not in _VALUE_COLUMNS
                                     and not c.startswith(("sum_", "mean_", "original_"))]
    missing = [v for v in variables if v not in names]
    if missing:
        raise InputError(f"table {name!r} has no column {missing[0]!r}", where=str(path))
    codes = {v: [str(x) for x in data.column(v).cast("string").to_pylist()] for v in variables}
    dims = []
    for v in variables:
        h = hierarchies.get(v)
        if h is None:
            seen = [c for c in dict.fromkeys(codes[v]) if c != "Total"]
            h = Hierarchy.flat(seen, source=f"{path.name}:{v}")
        dims.append(Dimension(v, h))
    positions = []
    for d in dims:
        pos = d.hierarchy.position
        bad = [c for c in codes[d.variable] if c not in pos]
        if bad:
            raise InputError(f"code {shown(bad[0])} of {d.variable!r} is not in its hierarchy ({d.hierarchy.source})",
                             where=str(path))
        positions.append(np.array([pos[c] for c in codes[d.variable]], dtype=np.int64))
    col = data.column("count")
    import pyarrow as pa

    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_null(col.type)):
        # text where a count belongs (a hand-edited file): one line, not numpy's TypeError
        raise InputError(f"table {name!r}: column 'count' holds {col.type} values, not numbers (a published count is "
                         "a number, or empty for a hidden cell)", where=str(path))
    values = to_numpy(col, fill=0).astype(np.float64)
    values[~validity(col)] = np.nan
    table = Table.from_positions(tuple(dims), positions, {"count": values})
    dense = table.densify()
    grid = np.zeros(dense.n_cells)
    grid[table.ids] = table.column("count")
    return dense.with_values(count=grid), grid


def _published_release(args: argparse.Namespace) -> tuple[Any, list[Any], list[int | None], float, list[str]]:
    from tabsafe.cli.common import parse_hierarchies
    from tabsafe.release import ReleaseCells, ReleaseSpec

    files = [Path(p) for p in args.release]
    inputs = [str(p) for p in files]
    if len(files) == 1 and files[0].suffix.lower() in {".yaml", ".yml"}:
        spec = ReleaseSpec.from_yaml(files[0])
        if args.hierarchy or args.same_codes or args.base is not None:
            raise InputError("--hierarchy, --same-codes and --base describe table files; a manifest has its own")
        entries = []
        for t in spec.tables:
            if t.file is None:
                raise InputError(f"table {t.name!r} names no 'file' (a release as published lists its files)",
                                 where=str(files[0]))
            entries.append((t.name, t.file, t.by, dict(t.hierarchies), t.where, t.base))
        same = spec.same_codes
        suppressed_min = spec.suppressed_min
        inputs += spec.input_files()
    else:
        for p in files:
            if p.suffix.lower() in {".yaml", ".yml"}:
                raise InputError("give one manifest, or the table files", where=str(p))
        hs = parse_hierarchies(args.hierarchy)
        inputs += [part.partition("=")[2] for item in args.hierarchy for part in item.split(",")]
        stems = [p.stem for p in files]
        entries = [(stem if stems.count(stem) == 1 else str(p), p, None, hs, None, args.base)
                   for stem, p in zip(stems, files)]
        same = tuple(tuple(g) for g in args.same_codes)
        suppressed_min = None
    if args.suppressed_min is not None:
        suppressed_min = args.suppressed_min
    tables, published, bases, names, wheres = [], [], [], [], []
    for name, path, by, hs, where, base in entries:
        dense, grid = _published_table(Path(path), name, by, {v: h for v, h in hs.items()})
        tables.append(dense)
        published.append(grid)
        bases.append(base)
        names.append(name)
        wheres.append(where)
    cells = ReleaseCells.build(tables, names=names, wheres=wheres, same_codes=same)
    return cells, published, bases, 1.0 if suppressed_min is None else float(suppressed_min), inputs


def run_audit(args: argparse.Namespace) -> int:
    from tabsafe.io import Outputs
    from tabsafe import memory
    from tabsafe.release.audit import audit_bytes, audit_release, published_bounds

    if args.protection_level <= 0:
        raise InputError(f"--protection-level must be a number > 0, got {args.protection_level:g}")
    if args.base is not None and args.base < 1:
        raise InputError(f"--base must be an integer >= 1, got {args.base}")
    kind = None
    if args.out:
        suffix = Path(args.out).suffix.lower()
        kinds = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".json": "json"}
        if suffix not in kinds:
            raise InputError(f"unknown output format {suffix or '(none)'!r}; use .csv, .parquet or .json",
                             where=args.out)
        kind = kinds[suffix]
    with Outputs(inputs=list(args.release)) as out:
        # the audit's rows are the intervals an intruder derives, with every cell's status: private
        out_path = out.plan(args.out, kind="evaluation") if args.out else None
        cells, published, bases, suppressed_min, _ = _published_release(args)
        lo, hi = published_bounds(cells, published, bases=bases, suppressed_min=suppressed_min)
        memory.check(f"the release audit of {cells.n_cells:,} cells", audit_bytes(cells, lo, hi))
        result = audit_release(cells, lo, hi, required=args.protection_level, published=published)
        rows = result.rows()
        if out_path is not None:
            if kind == "json":
                payload = {"summary": result.summary(), "protection_level": args.protection_level,
                           "suppressed_min": suppressed_min, "exposed": rows}
                out.write_text(out_path, json.dumps(payload, indent=1) + "\n")
            else:
                import pyarrow as pa

                columns = ["table", "cell", "lower", "upper", "width", "required", "exact", "derivation"]
                out.write_arrow(out_path, pa.table({c: [r[c] for r in rows] for c in columns}))
    s = result.summary()
    tables = f"{s['tables']} table{'s' if s['tables'] != 1 else ''}"
    say(f"release audit: {tables}, {s['cells']:,} cells ({s['shared_cells']:,} shared), "
        f"{s['unknown_cells']:,} not published exactly; suppressed cells at least {suppressed_min:g}", quiet=args.quiet)
    say(f"cells narrower than {args.protection_level:g}: {s['exposed']:,} ({s['exact']:,} pinned to one value)",
        quiet=args.quiet)
    for r in rows[:SHOWN]:
        shown = f"{r['lower']:g}" if r["exact"] else f"[{r['lower']:g}, {r['upper']:g}]"
        say(f"  {r['table']} {r['cell']} = {shown}: from {r['derivation'] or 'the bounds alone'}", quiet=args.quiet)
    if len(rows) > SHOWN:
        say(f"  ... and {len(rows) - SHOWN:,} more", quiet=args.quiet)
    if out_path is not None:
        say(f"wrote {len(rows):,} exposed cells to {out_path}", quiet=args.quiet)
    if s["exposed"]:
        # a finding, not an error: the report is complete, and a script gating a release stops
        say(f"the release exposes {s['exposed']:,} cells (exit status 1)", quiet=args.quiet)
        return 1
    return 0
