"""``tabsafe keys``: attach record keys to microdata (the secret of the cell key method)."""

from __future__ import annotations

import argparse

from typing import TYPE_CHECKING

from tabsafe.cli.common import positive_int, seed_int
from tabsafe.errors import InputError, reader_message

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa


def add_arguments(parser: argparse.ArgumentParser, argv: object = ()) -> None:
    parser.add_argument("data", metavar="DATA", help="microdata file (.parquet or .csv)")
    parser.add_argument("--seed", type=seed_int, required=True, help="seed of the key generator (keep it secret)")
    parser.add_argument("--column", default="rkey", help="name of the key column (default rkey)")
    parser.add_argument("--digits", type=positive_int, default=10, help="decimal digits of U[0,1) keys (default 10)")
    parser.add_argument("--modulus", type=positive_int, help="ABS integer keys 0..M-1 instead (e.g. 256)")
    parser.add_argument("--replace", action="store_true", help="replace an existing key column")
    parser.add_argument("--out", required=True, metavar="FILE", help="microdata with keys (.parquet or .csv)")


def add_record_keys(data: pa.Table, *, seed: int, column: str = "rkey", digits: int = 10,
                    modulus: int | None = None, replace: bool = False) -> pa.Table:
    """``data`` with a record-key column: U[0,1) keys with ``digits`` decimals (000 §5.4), or
    integers ``0..modulus-1`` (the ABS form, 004 §3.3); one key per record, in row order."""
    import numpy as np
    import pyarrow as pa

    from tabsafe.protect.cell_key import generate_record_keys

    if column in data.column_names:
        if not replace:
            raise InputError(f"the data already have a column {column!r} (use --replace to overwrite it)")
        data = data.drop_columns([column])
    if modulus is not None:
        if modulus < 2:
            raise InputError(f"--modulus must be at least 2, got {modulus}")
        keys = np.random.Generator(np.random.PCG64(seed)).integers(0, modulus, data.num_rows, dtype=np.int64)
    else:
        keys = generate_record_keys(data.num_rows, seed=seed, digits=digits)
    return data.append_column(column, pa.array(keys))


def run(args: argparse.Namespace) -> int:
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from tabsafe.io import Outputs
    from tabsafe.model.microdata import FileSource

    if not args.column.strip():
        raise InputError("--column needs a name for the record-key column")
    source = FileSource.of(args.data)
    out = Outputs(inputs=[args.data])
    target = out.plan(args.out, kind="evaluation")  # the keys are the method's secret
    try:
        if source.format == "parquet":
            table = pq.read_table(source.path)
        else:
            # Codes such as "01" must stay text: read every CSV column as a string.
            names = pacsv.open_csv(source.path).schema.names
            opts = pacsv.ConvertOptions(column_types={n: pa.string() for n in names}, strings_can_be_null=False)
            table = pacsv.read_csv(source.path, convert_options=opts)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"cannot read data: {reader_message(exc)}", where=args.data) from None
    if table.num_rows == 0:
        raise InputError("the data have no records", where=args.data)
    keyed = add_record_keys(table, seed=args.seed, column=args.column, digits=args.digits, modulus=args.modulus,
                            replace=args.replace)
    with out:
        out.write_arrow(target, keyed)
    print(f"wrote {keyed.num_rows:,} records with record keys in column {args.column!r} to {args.out}")
    return 0
