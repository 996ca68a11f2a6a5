"""``tabsafe audit SPEC``: the small slivers a set of tables released together gives away.

The SPEC (YAML; format in :mod:`tabsafe.risk.differencing`) names the data, the recodes and the
tables. The command prints a summary and the first small slivers in words, and writes the
reported slivers to ``--out`` (``.csv``, ``.parquet`` or ``.json``) when asked. Exit status 0
whether or not slivers are found; errors print one line and write nothing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa

from tabsafe.errors import InputError
from tabsafe.io import atomic_path, write_frame
from tabsafe.risk.differencing import AuditResult, DifferencingSpec, audit

#: How many small slivers the command prints.
SHOWN = 10


def add_arguments(parser: argparse.ArgumentParser, argv: object = ()) -> None:
    from tabsafe.cli.release import add_audit_arguments, wants_release

    if wants_release(list(argv)):  # the release audit of published tables (tabsafe.cli.release)
        add_audit_arguments(parser, list(argv))
        return
    parser.add_argument("--release", nargs="+", metavar="FILE",
                        help="audit a release as published instead: the intruder's interval programs over all its "
                             "tables (see --release FILE --help)")
    parser.add_argument("spec", metavar="SPEC", help="YAML file: data, derived variables, tables")
    parser.add_argument("--threshold", type=int, default=None,
                        help="small = 0 < n < threshold (default: the SPEC's, else 3)")
    parser.add_argument("--max-order", type=int, default=None,
                        help="longest chain of differences (1 = pairs only; default: the SPEC's, else 3)")
    parser.add_argument("--zeros", action="store_true", help="report zero slivers too (group attributes)")
    parser.add_argument("--all", action="store_true", dest="all_slivers",
                        help="write every new sliver to --out, not only the reported ones")
    parser.add_argument("--out", default=None, help="write the slivers: .csv, .parquet or .json")


def _output_kind(path: str) -> str:
    suffix = Path(path).suffix.lower()
    kinds = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".json": "json"}
    if suffix not in kinds:
        raise InputError(f"unknown output format {suffix or '(none)'!r}; use .csv, .parquet or .json", where=path)
    parent = Path(path).parent
    if not parent.exists():
        raise InputError("output folder does not exist", where=str(parent))
    return kinds[suffix]


def _reported(result: AuditResult, *, zeros: bool, everything: bool) -> pd.DataFrame:
    s = result.slivers
    if everything:
        return s
    return s[s["small"] | (s["zero"] if zeros else False)].reset_index(drop=True)


def _write(frame: pd.DataFrame, result: AuditResult, path: str, kind: str) -> None:
    if kind == "json":
        payload = {"summary": dict(result.summary), "threshold": result.threshold,
                   "slivers": frame.to_dict(orient="records")}
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(payload, indent=1, default=int) + "\n", encoding="utf-8")
        return
    flat = frame.assign(box=[json.dumps(b) for b in frame["box"]])
    write_frame(pa.Table.from_pandas(flat, preserve_index=False), path)


def describe_sliver(row: dict[str, object]) -> str:
    """One sliver in words: its count, who, and the subtraction that reveals it."""
    return (f"{row['count']} = {row['outer']} ({row['outer_count']}) - {row['inner']} ({row['inner_count']}): "
            f"{row['sliver']}")


def run(args: argparse.Namespace) -> int:
    if getattr(args, "release", None):
        from tabsafe.cli.release import run_audit

        return run_audit(args)
    kind = _output_kind(args.out) if args.out else None
    spec = DifferencingSpec.from_yaml(args.spec)
    if args.max_order is not None:
        if args.max_order < 1:
            raise InputError(f"--max-order must be an integer >= 1, got {args.max_order}")
        spec = DifferencingSpec(**{**spec.__dict__, "max_order": args.max_order})
    if args.threshold is not None and args.threshold < 1:
        raise InputError(f"--threshold must be an integer >= 1, got {args.threshold}")
    result = audit(spec, threshold=args.threshold)
    s = result.summary
    print(f"tables {s['tables']}, cells {s['cells']} ({s['distinct_boxes']} distinct), "
          f"pairs examined {s['pairs_examined']}")
    print(f"slivers found {s['slivers']} (not counting {s['redundant']} unions of known cells): "
          f"small (0 < n < {result.threshold}) {s['small']}, zero {s['zero']}")
    shown = _reported(result, zeros=args.zeros, everything=False)
    for row in shown.head(SHOWN).to_dict(orient="records"):
        tag = f"order {row['order']}" if row["order"] > 1 else "pair"
        print(f"  [{tag}; {row['tables']}] {describe_sliver(row)}")
    if len(shown) > SHOWN:
        print(f"  ... and {len(shown) - SHOWN} more")
    if args.out:
        assert kind is not None
        frame = _reported(result, zeros=args.zeros, everything=args.all_slivers)
        _write(frame, result, args.out, kind)
        print(f"wrote {len(frame)} slivers to {args.out}")
    return 0
