"""Build a table with every margin and subtotal from microdata or from inner cells."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tabsafe.engines import DEFAULT_ENGINE
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.microdata import InnerCells, Microdata
from tabsafe.model.spec import DEFAULT_MAX_CELLS, DEFAULT_SUM_DIGITS, KeySpec, TableSpec
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
    engine: Any = DEFAULT_ENGINE,
) -> Table:
    """The cells of the table spanned by ``by`` that have records: inner cells, every margin and
    every hierarchical subtotal, computed in one engine pass (``GROUPING SETS``). Cells without
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
            key=key, max_cells=max_cells, weight=weight,
        )
    return tabulate_with(get_engine(engine), data, spec)
