"""Options every table command shares, and turning them into a :class:`Table`.

Every command reads microdata (``DATA --by a,b,c``) or inner cells (``--table FILE --count C
--by a,b,c``), takes hierarchies with ``--hierarchy var=FILE`` and declared codelists with
``--meta FILE``, and writes CSV or Parquet by the extension of ``--out``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from tabsafe.errors import InputError
from tabsafe.io import read_meta
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.microdata import InnerCells, Microdata
from tabsafe.model.spec import DEFAULT_MAX_CELLS, KeySpec, TableSpec
from tabsafe.model.table import Table
from tabsafe.tabulate import tabulate


def split_list(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def add_input_arguments(parser: argparse.ArgumentParser, *, data_required: bool = False) -> None:
    """DATA | --table FILE --count COL, --by, --hierarchy, --meta, --where, --engine, --max-cells."""
    g = parser.add_argument_group("input")
    g.add_argument("data", nargs=None if data_required else "?", metavar="DATA",
                   help="microdata file (.parquet or .csv)")
    if not data_required:
        g.add_argument("--table", metavar="FILE", help="aggregated inner cells instead of microdata")
        g.add_argument("--count", metavar="COLUMN", help="the count column of --table")
    g.add_argument("--by", required=True, type=split_list, metavar="A,B,C", help="spanning variables")
    g.add_argument("--hierarchy", action="append", default=[], metavar="VAR=FILE",
                   help="hierarchy of a variable (.hrc or .yaml); repeat or separate with commas")
    g.add_argument("--meta", metavar="FILE", help="meta.yaml with the variables' codelists")
    g.add_argument("--where", metavar="EXPR", help="SQL filter defining a sub-population")
    g.add_argument("--engine", default="duckdb", choices=["duckdb"], help="tabulation engine")
    g.add_argument("--max-cells", type=int, default=DEFAULT_MAX_CELLS, help="refuse larger tables")


def add_output_arguments(parser: argparse.ArgumentParser, *, keep_original: bool = True) -> None:
    g = parser.add_argument_group("output")
    g.add_argument("--out", required=True, metavar="FILE", help="output file (.csv or .parquet)")
    if keep_original:
        g.add_argument("--keep-original", action="store_true",
                       help="also write the original counts (an evaluation file, not for release)")


def parse_hierarchies(items: Sequence[str]) -> dict[str, Hierarchy]:
    out: dict[str, Hierarchy] = {}
    for item in items:
        for part in split_list(item):
            var, sep, path = part.partition("=")
            if not sep or not var.strip() or not path.strip():
                raise InputError(f"--hierarchy expects VAR=FILE, got {part!r}")
            out[var.strip()] = Hierarchy.from_file(path.strip())
    return out


def _meta_path(args: argparse.Namespace) -> Path | None:
    if getattr(args, "meta", None):
        return Path(args.meta)
    # A data set written by `tabsafe synth` carries its codelists beside the data.
    data = getattr(args, "data", None) or getattr(args, "table", None)
    if data:
        guess = Path(data).parent / "meta.yaml"
        if guess.is_file():
            return guess
    return None


def load_input(
    args: argparse.Namespace, *, key: KeySpec | None = None, sums: Sequence[str] = (), microdata_only: bool = False
) -> Table:
    """Build the table the common options describe, with every margin."""
    meta_path = _meta_path(args)
    codelists = read_meta(meta_path) if meta_path else {}
    table_file = getattr(args, "table", None)
    if table_file and args.data:
        raise InputError("give either DATA (microdata) or --table (inner cells), not both")
    if table_file:
        if microdata_only:
            raise InputError("this method needs microdata (DATA with record keys), not --table")
        if not args.count:
            raise InputError("--table needs --count COLUMN (the column holding the counts)")
        source: Microdata | InnerCells = InnerCells.from_file(table_file, count=args.count, codelists=codelists)
        if key is not None:
            raise InputError("cell keys need microdata with a record-key column, not --table")
    elif args.data:
        source = Microdata.from_file(args.data, codelists=codelists)
    else:
        raise InputError("no input: give DATA (microdata) or --table FILE --count COLUMN")
    spec = TableSpec(
        by=args.by, hierarchies=parse_hierarchies(args.hierarchy), where=args.where, sums=tuple(sums),
        key=key, max_cells=args.max_cells,
    )
    return tabulate(source, spec, engine=args.engine)
