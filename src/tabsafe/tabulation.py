"""Build a table with every margin and subtotal from microdata or from inner cells."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tabsafe.engines import DEFAULT_ENGINE
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.microdata import InnerCells, Microdata
from tabsafe.model.spec import DEFAULT_MAX_CELLS, DEFAULT_SUM_DIGITS, ContributorSpec, KeySpec, TableSpec
from tabsafe.model.table import Table


def tabulate(
    data: Microdata | InnerCells,
    by: Sequence[str] | TableSpec,
    *,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    where: Any = None,
    sums: Sequence[str] = (),
    sum_digits: int = DEFAULT_SUM_DIGITS,
    key: KeySpec | str | None = None,
    max_cells: int = DEFAULT_MAX_CELLS,
    weight: str | None = None,
    contributors: ContributorSpec | None = None,
    engine: Any = DEFAULT_ENGINE,
) -> Table:
    """The cells of the table spanned by ``by`` that have records: inner cells, every margin and
    every hierarchical subtotal, computed in one engine pass (:mod:`tabsafe.engines.planner`). Cells without
    records are implied zeros (:meth:`Table.densify` gives the whole grid).

    Args:
        data: microdata (counts are numbers of records) or inner cells (counts are summed).
        by: the spanning variables, or a complete :class:`TableSpec`.
        hierarchies: hierarchy per variable (overrides the data's declared codelist).
        where: a filter in tabsafe's filter language (text or mapping; :mod:`tabsafe.model.filter`).
        sums: numeric variables to sum per cell (``sum_<var>`` columns, exact decimals).
        sum_digits: decimal places of the summed values.
        key: record-key column (or :class:`KeySpec`) for exact cell keys (``ckey`` column).
        max_cells: refuse tables whose grid has more cells than this.
        weight: a column of whole-number record weights; counts are sums of weights (default: the
            microdata's declared weight column, if any).
        contributors: a magnitude table with every cell's contributions
            (:func:`contribution_table`).
        engine: an engine name (default :data:`tabsafe.engines.DEFAULT_ENGINE`, or any registered engine) or an engine object.

    >>> import pandas as pd
    >>> md = Microdata.from_frame(pd.DataFrame({"sex": ["1", "2", "2"], "age": ["a", "a", "b"]}))
    >>> t = tabulate(md, ["sex", "age"])
    >>> int(t.value(sex="Total", age="Total")), int(t.value(sex="2", age="a")), int(t.value(sex="1", age="b"))
    (3, 1, 0)
    """
    from tabsafe.engines.planner import tabulate_with
    from tabsafe.registry import get_engine

    if isinstance(by, TableSpec):
        spec = by
    else:
        if isinstance(key, str):
            key = KeySpec(column=key)
        spec = TableSpec(
            by=tuple(by), hierarchies=dict(hierarchies or {}), where=where, sums=tuple(sums), sum_digits=sum_digits,
            key=key, max_cells=max_cells, weight=weight, contributors=contributors,
        )
    if spec.contributors is not None:
        return contribution_table(data, spec)
    return tabulate_with(get_engine(engine), data, spec)


def contribution_table(data: Microdata | InnerCells, spec: TableSpec) -> Table:
    """The magnitude table of ``spec.contributors`` on the whole grid of ``spec.by``, carrying every
    cell's contributions (:class:`~tabsafe.model.contributions.ContributionTable`; issue #29).

    The records are read into this process (the contributions of every cell are needed, not only
    totals), whatever the engine; the filter is evaluated by the filter language's numpy
    evaluator, the one meaning every engine compiles from."""
    import numpy as np
    import pyarrow as pa

    from tabsafe.errors import InputError, TooLargeError, param
    from tabsafe.model import filter as _filter
    from tabsafe.model.contributions import ContributionTable, contributions

    if not isinstance(data, Microdata):
        raise InputError("a magnitude table protected from its contributors needs microdata with one record per "
                         "contribution (DATA), not aggregated cells (--table)")
    assert spec.contributors is not None
    records = data.read()
    named = spec.contributors.columns()
    wanted = list(dict.fromkeys([*spec.by, *named.values()]))
    missing = [c for c in wanted if c not in records.column_names]
    if missing:
        role = next((r for r, c in named.items() if c == missing[0]), None)
        what = "spanning variable" if role is None else f"{role} column"
        flag = param("by") if role is None else param("magnitude" if role == "value" else role)
        raise InputError(f"{what} {missing[0]!r} is not a column of the data ({flag})")
    if spec.where is not None:
        kinds = {name: ("integer" if pa.types.is_integer(t) else "number" if pa.types.is_floating(t) else "text")
                 for name, t in zip(records.column_names, records.schema.types)}
        mask = _filter.evaluate(spec.where, lambda name: records.column(name).to_pylist(), kinds)
        records = records.filter(pa.array(np.asarray(mask, dtype=bool)))
    hierarchies = {v: h for v, h in {**data.codelists, **spec.hierarchies}.items() if v in spec.by}
    n_cells = 1
    for v in spec.by:
        h = hierarchies.get(v)
        n_cells *= len(h) if h is not None else len(set(records.column(v).to_pylist())) + 1
    if n_cells > spec.max_cells:
        raise TooLargeError(f"the magnitude table would have {n_cells:,} cells, more than the limit of "
                            f"{spec.max_cells:,} ({param('max_cells')})")
    frame = records.select(wanted).to_pandas()
    # a cell's value is the exact decimal sum of its records' values (``sum_digits`` places), as
    # tabulation sums ``sum_<var>``: the same in every run and additive to the last digit
    c = contributions(frame, list(spec.by), hierarchies=hierarchies, digits=spec.sum_digits, **named)
    meta = {"source": data.source.describe(), "magnitude": spec.contributors.value}
    if spec.where is not None:
        meta["where"] = spec.where.to_text()
    return ContributionTable(c, meta)
