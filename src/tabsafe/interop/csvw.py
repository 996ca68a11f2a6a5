"""Releases as CSV with a CSV-W metadata file: columns, codelists, method, parameters, flags.

Source: W3C "Metadata Vocabulary for Tabular Data" (CSV on the Web, 2015). The CSV is the
release file tabsafe writes anyway (published values only); ``NAME.csv-metadata.json`` beside it
(the name the CSV-W standard looks for) describes it: one column per spanning variable, its
datatype a string restricted to the variable's codes (a codelist a validator checks), the
published count (empty where suppressed: ``null``), the published flag columns with their
values, the primary key (the cell's codes), and in ``notes`` the method, its parameters, the
hierarchies (code → parent) and what each flag means. Private figures and originals are never in
it: it is written from a :class:`~tabsafe.model.result.Release` and the report's public part.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from tabsafe.model.result import Release, Report

__all__ = ["csvw_metadata"]

_FLAGS = {"status": {"published": "the value is published", "suppressed": "the value is withheld (suppressed)"}}


def _datatype(arrow_type: Any) -> dict[str, Any] | str:
    import pyarrow as pa

    if pa.types.is_boolean(arrow_type):
        return "boolean"
    if pa.types.is_integer(arrow_type):
        return "integer"
    if pa.types.is_floating(arrow_type) or pa.types.is_decimal(arrow_type):
        return "number"
    return "string"


def csvw_metadata(release: Release, report: Report | None, *, csv_name: str, columns: Any) -> str:
    """The CSV-W metadata (JSON text) of the release CSV ``csv_name`` whose Arrow schema is
    ``columns`` (the table :func:`tabsafe.io.release_arrow` wrote)."""
    table = release.table
    dims = {d.variable: d for d in table.dimensions}
    cols: list[dict[str, Any]] = []
    for f in columns:
        col: dict[str, Any] = {"name": f.name, "titles": f.name}
        if f.name in dims:
            codes = dims[f.name].hierarchy.order
            col["datatype"] = {"base": "string", "format": "|".join(re.escape(c) for c in codes)}
            col["required"] = True
            col["dc:description"] = f"code of {f.name}; {dims[f.name].hierarchy.total!r} is the total"
        else:
            col["datatype"] = _datatype(f.type)
            if f.name in _FLAGS:
                col["datatype"] = {"base": "string", "format": "|".join(_FLAGS[f.name])}
                col["dc:description"] = "; ".join(f"{k}: {v}" for k, v in _FLAGS[f.name].items())
            if f.name == table.value_column:
                col["null"] = ""
                col["dc:description"] = "published value; empty where the value is withheld"
        cols.append(col)
    notes: dict[str, Any] = {
        "hierarchies": {v: {c: d.hierarchy.parents[c] for c in d.hierarchy.order[1:]} for v, d in dims.items()},
        "flags": {k: v for k, v in _FLAGS.items() if k in {f.name for f in columns}},
    }
    if report is not None:
        public = report.to_json(evaluation=False)
        notes.update({"method": public["method"], "parameters": public["params"], "seed_fingerprint": public["seed_fingerprint"],
                      "figures": public["figures"], "method_notes": public["notes"]})
    doc: dict[str, Any] = {
        "@context": "http://www.w3.org/ns/csvw",
        "url": csv_name,
        "dc:title": f"table by {', '.join(dims)}",
        "dc:description": "published values of a table protected by tabsafe"
                          + (f" with {report.method}" if report is not None else ""),
        "tableSchema": {"columns": cols, "primaryKey": list(dims)},
        "notes": [notes],
    }
    return json.dumps(doc, indent=2, default=str) + "\n"


def flags_of(columns: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in _FLAGS.items() if k in columns}
