"""Arrow ↔ numpy without pandas (and without ``pyarrow.compute``, 0.15 s to import).

pyarrow imports pandas (0.2 s) the first time it converts a Python object or calls
``to_numpy``; a command that only tabulates and writes never needs pandas, so the hot path moves
data through Arrow buffers directly. These helpers handle the types tabulation produces:
integers, floats, booleans, decimals (cast to float64) and strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

_NUMPY = {
    pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
    pa.uint8(): np.uint8, pa.uint16(): np.uint16, pa.uint32(): np.uint32, pa.uint64(): np.uint64,
    pa.float32(): np.float32, pa.float64(): np.float64,
}


def _arrow_type(dtype: np.dtype) -> pa.DataType:
    for at, nt in _NUMPY.items():
        if np.dtype(nt) == dtype:
            return at
    raise TypeError(f"no Arrow type for {dtype}")  # pragma: no cover


def to_numpy(col: Any, *, fill: Any = 0) -> np.ndarray:
    """A numeric Arrow array or chunked array as numpy; nulls become ``fill``."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_boolean(arr.type):
        return to_numpy(arr.cast(pa.int8()), fill=fill).astype(bool)
    if pa.types.is_decimal(arr.type) or pa.types.is_float16(arr.type):
        arr = arr.cast(pa.float64())
    if pa.types.is_null(arr.type):
        return np.full(len(arr), fill)
    dtype = _NUMPY.get(arr.type)
    if dtype is None:
        raise TypeError(f"cannot convert {arr.type} to numpy here")  # pragma: no cover
    n = len(arr)
    itemsize = np.dtype(dtype).itemsize
    buffers = arr.buffers()
    data = np.frombuffer(buffers[1], dtype=dtype, count=n, offset=arr.offset * itemsize) if n else np.zeros(0, dtype)
    if arr.null_count:
        bits = np.unpackbits(np.frombuffer(buffers[0], dtype=np.uint8), bitorder="little")
        valid = bits[arr.offset:arr.offset + n].astype(bool)
        data = np.where(valid, data, np.asarray(fill, dtype=np.result_type(data.dtype, np.asarray(fill).dtype)))
    return data


def validity(col: Any) -> np.ndarray:
    """True where the value is not null."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not arr.null_count:
        return np.ones(len(arr), dtype=bool)
    bits = np.unpackbits(np.frombuffer(arr.buffers()[0], dtype=np.uint8), bitorder="little")
    return bits[arr.offset:arr.offset + len(arr)].astype(bool)


def from_numpy(values: np.ndarray, *, mask: np.ndarray | None = None) -> pa.Array:
    """A numpy numeric or boolean array as Arrow (``mask``: True where the value is missing)."""
    values = np.ascontiguousarray(values)
    if values.dtype == bool:
        return from_numpy(values.astype(np.int8), mask=mask).cast(pa.bool_())
    validity_buf = None
    nulls = 0
    if mask is not None and mask.any():
        validity_buf = pa.py_buffer(np.packbits(~np.asarray(mask, dtype=bool), bitorder="little"))
        nulls = int(mask.sum())
    return pa.Array.from_buffers(_arrow_type(values.dtype), len(values), [validity_buf, pa.py_buffer(values)],
                                 null_count=nulls)


def decimals(units: np.ndarray, digits: int) -> pa.Array:
    """Exact decimals from integer numbers of ``10**-digits`` units (a decimal128 array is its
    unscaled 128-bit integers: the low word is the value, the high word its sign)."""
    units = np.asarray(units, dtype=np.int64)
    words = np.empty((units.size, 2), dtype=np.int64)
    words[:, 0] = units
    words[:, 1] = np.where(units < 0, -1, 0)
    return pa.Array.from_buffers(pa.decimal128(38, int(digits)), units.size, [None, pa.py_buffer(words)])


def strings(items: Sequence[str]) -> pa.Array:
    """An Arrow string array of Python strings (built from buffers, not converted by pyarrow)."""
    encoded = [s.encode("utf-8") for s in items]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    if encoded:
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(encoded),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def to_strings(col: Any) -> list[str | None]:
    """A string column as Python strings (None for null)."""
    return col.to_pylist()


def table(columns: dict[str, pa.Array]) -> pa.Table:
    """An Arrow table of Arrow arrays."""
    return pa.Table.from_arrays(list(columns.values()), names=list(columns))
