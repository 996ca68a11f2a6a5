"""``tabsafe audit SPEC``: the small slivers a set of tables released together gives away.

The SPEC (YAML; format in :mod:`tabsafe.risk.differencing`) names the data, the recodes and the
tables. The command prints a summary and the first small slivers in words, and writes the
reported slivers to ``--out`` (``.csv``, ``.parquet`` or ``.json``) when asked. The output is
planned before the audit runs (never one of the spec's files or the data) and holds exact counts
of small groups, so it is an evaluation file, private to the user. Exit status 0 whether or not
slivers are found; errors print one line and write nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tabsafe.errors import InputError, param

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from tabsafe.io import Outputs
    from tabsafe.risk.differencing import AuditResult

#: How many small slivers the command prints.
SHOWN = 10

_KINDS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".json": "json"}


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
                        help="longest chain of differences (1 = pairs only; default: the SPEC's, else 2)")
    parser.add_argument("--zeros", action="store_true", help="report zero slivers too (group attributes)")
    parser.add_argument("--all", action="store_true", dest="all_slivers",
                        help="write every new sliver to --out, not only the reported ones")
    parser.add_argument("--out", default=None,
                        help="write the slivers: .csv, .parquet or .json (private to you: exact small counts)")
    from tabsafe.engines import DEFAULT_ENGINE, engine_names

    parser.add_argument("--engine", choices=engine_names(), default=DEFAULT_ENGINE,
                        help=f"the engine that reads the SPEC's microdata (default {DEFAULT_ENGINE}; the same slivers "
                             "on every engine)")


def _output_kind(path: str) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in _KINDS:
        raise InputError(f"{param('out')}: unknown output format {suffix or '(none)'!r}; use .csv, .parquet or "
                         ".json", where=path)
    return _KINDS[suffix]


def _reported(result: AuditResult, *, zeros: bool, everything: bool) -> pd.DataFrame:
    s = result.slivers
    if everything:
        return s
    return s[s["small"] | (s["zero"] if zeros else False)].reset_index(drop=True)


def _write(outputs: Outputs, target: Path, frame: pd.DataFrame, result: AuditResult, kind: str) -> None:
    import json

    if kind == "json":
        payload = {"summary": dict(result.summary), "threshold": result.threshold,
                   "slivers": frame.to_dict(orient="records")}
        outputs.write_text(target, json.dumps(payload, indent=1, default=int) + "\n")
        return
    import pyarrow as pa

    flat = frame.assign(box=[json.dumps(b) for b in frame["box"]])
    outputs.write_arrow(target, pa.Table.from_pandas(flat, preserve_index=False))


def describe_sliver(row: dict[str, Any]) -> str:
    """One sliver in words: the subtraction that reveals it and who is in it — no count (stdout
    is not a private file: the counts are original values, written only with the private --out)."""
    return f"{row['outer']} - {row['inner']}: {row['sliver']}"


def run(args: argparse.Namespace) -> int:
    if getattr(args, "release", None):
        from tabsafe.cli.release import run_audit

        return run_audit(args)
    from tabsafe.io import Outputs
    from tabsafe.risk.differencing import DifferencingSpec, audit

    kind = _output_kind(args.out) if args.out else None
    spec = DifferencingSpec.from_yaml(args.spec)
    with Outputs(inputs=spec.inputs) as outputs:
        # planned before any work: a bad --out fails at once, and never names an input
        target = outputs.plan(args.out, kind="evaluation") if args.out else None
        result = audit(spec, threshold=args.threshold, max_order=args.max_order, engine=args.engine)
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
        if len(shown) and target is None:
            print("  (their counts are original values: write them to a private file with --out FILE)")
        if target is not None:
            assert kind is not None
            frame = _reported(result, zeros=args.zeros, everything=args.all_slivers)
            _write(outputs, target, frame, result, kind)
    if target is not None:
        print(f"wrote {len(frame)} slivers to {args.out}")
    return 0
