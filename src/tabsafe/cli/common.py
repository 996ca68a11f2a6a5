"""Options every table command shares, and turning them into a :class:`Table`.

Every command reads microdata (``DATA --by a,b,c``) or inner cells (``--table FILE --count C
--by a,b,c``), takes hierarchies with ``--hierarchy var=FILE`` and declared codelists with
``--meta FILE``, a sub-population with ``--where FILTER`` (tabsafe's filter language, never SQL),
and writes CSV or Parquet by the extension of ``--out``. Heavy modules are imported inside the
functions, when a command runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tabsafe.engines import DEFAULT_ENGINE
from tabsafe.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.model.hierarchy import Hierarchy
    from tabsafe.model.microdata import InnerCells, Microdata
    from tabsafe.model.spec import ContributorSpec, KeySpec, TableSpec
    from tabsafe.model.table import Table

DEFAULT_MAX_CELLS = 1_000_000_000


def split_list(text: str) -> tuple[str, ...]:
    """``a,b,c`` → ``("a", "b", "c")``; an empty item is an error (``a,,b``)."""
    parts = [p.strip() for p in text.split(",")]
    if any(not p for p in parts):
        raise argparse.ArgumentTypeError(f"empty name in {text!r}")
    return tuple(parts)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def seed_int(text: str) -> int:
    from tabsafe.method import MAX_SEED

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a seed is an integer in 0..{MAX_SEED}, got {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"a seed is an integer in 0..{MAX_SEED}, got {value}")
    return value


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
    g.add_argument("--where", metavar="FILTER",
                   help="sub-population, e.g. \"activity = EMP and age_year >= 65\" or \"area in (A1, A2)\"")
    g.add_argument("--engine", default=DEFAULT_ENGINE, metavar="NAME", help=f"tabulation engine (default {DEFAULT_ENGINE})")
    g.add_argument("--max-cells", type=positive_int, default=DEFAULT_MAX_CELLS,
                   help="refuse tables whose grid has more cells")


def add_output_arguments(parser: argparse.ArgumentParser, *, keep_original: bool = True) -> None:
    g = parser.add_argument_group("output")
    g.add_argument("--out", required=True, metavar="FILE", help="output file (.csv or .parquet)")
    g.add_argument("--zero-cells", default="auto", choices=["auto", "all", "omit"],
                   help="write every cell of the grid (all), only non-zero cells (omit; a missing cell is "
                        "zero), or all up to 5,000,000 grid cells (auto, the default)")
    if keep_original:
        g.add_argument("--keep-original", action="store_true",
                       help="also write the original counts (an evaluation file, not for release)")


def parse_hierarchies(items: Sequence[str]) -> dict[str, Hierarchy]:
    from tabsafe.model.hierarchy import Hierarchy

    out: dict[str, Hierarchy] = {}
    for item in items:
        for part in (p.strip() for p in item.split(",")):
            var, sep, path = part.partition("=")
            if not sep or not var.strip() or not path.strip():
                raise InputError(f"--hierarchy expects VAR=FILE, got {part!r}")
            if var.strip() in out:
                raise InputError(f"--hierarchy names {var.strip()!r} twice")
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


def input_paths(args: argparse.Namespace) -> list[str]:
    """Every file a command reads (outputs may never be one of them)."""
    paths = [getattr(args, "data", None), getattr(args, "table", None), getattr(args, "meta", None)]
    for item in getattr(args, "hierarchy", []) or []:
        for part in item.split(","):
            paths.append(part.partition("=")[2].strip() or None)
    meta = _meta_path(args)
    if meta:
        paths.append(str(meta))
    return [p for p in paths if p]


def load_source(args: argparse.Namespace, *, needs_microdata: bool = False) -> Microdata | InnerCells:
    """The records (or inner cells) the common options name, with their declared codelists."""
    from tabsafe.io import read_meta
    from tabsafe.model.microdata import InnerCells, Microdata

    meta_path = _meta_path(args)
    codelists = read_meta(meta_path, only=args.by) if meta_path else {}
    table_file = getattr(args, "table", None)
    if table_file and args.data:
        raise InputError("give either DATA (microdata) or --table (inner cells), not both")
    if table_file:
        if needs_microdata:
            raise InputError("this method needs microdata (DATA: one record per person or contribution), not --table (inner cells)")
        if not args.count:
            raise InputError("--table needs --count COLUMN (the column holding the counts)")
        return InnerCells.from_file(table_file, count=args.count, codelists=codelists)
    if args.data:
        return Microdata.from_file(args.data, codelists=codelists)
    raise InputError("no input: give DATA (microdata) or --table FILE --count COLUMN")


def table_spec(args: argparse.Namespace, *, key: KeySpec | None = None, sums: Sequence[str] = (),
               sum_digits: int | None = None, contributors: ContributorSpec | None = None) -> TableSpec:
    from tabsafe.model.spec import DEFAULT_SUM_DIGITS, TableSpec

    return TableSpec(
        by=args.by, hierarchies=parse_hierarchies(args.hierarchy), where=args.where, sums=tuple(sums),
        sum_digits=DEFAULT_SUM_DIGITS if sum_digits is None else sum_digits, key=key, max_cells=args.max_cells,
        contributors=contributors,
    )


def load_input(
    args: argparse.Namespace, *, key: KeySpec | None = None, sums: Sequence[str] = (), microdata_only: bool = False
) -> Table:
    """Build the table the common options describe, with every margin."""
    from tabsafe.tabulation import tabulate

    source = load_source(args, needs_microdata=microdata_only)
    if key is not None and not hasattr(source, "key"):
        raise InputError("cell keys need microdata with a record-key column, not --table")
    return tabulate(source, table_spec(args, key=key, sums=sums), engine=args.engine)


def say(text: str, *, quiet: bool = False) -> None:
    """A line for the user on stdout (published values only)."""
    if not quiet:
        print(text, file=sys.stdout)


def say_seed(seed: int | None, *, given: int | None, random: bool, quiet: bool = False,
             kept: str | None = None) -> None:
    """After a run: the drawn seed's fingerprint on stdout (the seed itself only in private files,
    :mod:`tabsafe.seeds`), and on stderr a warning when the user gave a random method a small seed."""
    from tabsafe.seeds import seed_line, small_seed_warning

    line = seed_line(seed, given=given, kept=kept)
    if line:
        say(line, quiet=quiet)
    warning = small_seed_warning(given) if random else None
    if warning:
        print(f"tabsafe: warning: {warning}", file=sys.stderr)


def describe(table: Any) -> str:
    return " × ".join(table.variables)
