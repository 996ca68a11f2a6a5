"""Build a table with every margin and subtotal from microdata or from inner cells."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tabsafe.engines import Engine, get_engine
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.microdata import InnerCells, Microdata
from tabsafe.model.spec import DEFAULT_MAX_CELLS, KeySpec, TableSpec
from tabsafe.model.table import Table


def tabulate(
    data: Microdata | InnerCells,
    by: Sequence[str] | TableSpec,
    *,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    where: str | None = None,
    sums: Sequence[str] = (),
    key: KeySpec | str | None = None,
    max_cells: int = DEFAULT_MAX_CELLS,
    engine: str | Engine = "duckdb",
) -> Table:
    """All cells of the table spanned by ``by``: inner cells, every margin and every
    hierarchical subtotal, zeros included, computed in one engine pass (``GROUPING SETS``).

    Args:
        data: microdata (counts are numbers of records) or inner cells (counts are summed).
        by: the spanning variables, or a complete :class:`TableSpec`.
        hierarchies: hierarchy per variable (overrides the data's declared codelist).
        where: SQL filter for a sub-population.
        sums: numeric variables to sum per cell (``sum_<var>`` columns).
        key: record-key column (or :class:`KeySpec`) for exact cell keys (``ckey`` column).
        max_cells: refuse tables with more cells than this.
        engine: ``"duckdb"`` (default) or an engine object.

    >>> import pandas as pd
    >>> md = Microdata.from_frame(pd.DataFrame({"sex": ["1", "2", "2"], "age": ["a", "a", "b"]}))
    >>> t = tabulate(md, ["sex", "age"])
    >>> int(t.value(sex="Total", age="Total")), int(t.value(sex="2", age="a"))
    (3, 1)
    """
    if isinstance(by, TableSpec):
        spec = by
    else:
        if isinstance(key, str):
            key = KeySpec(column=key)
        spec = TableSpec(
            by=tuple(by), hierarchies=dict(hierarchies or {}), where=where, sums=tuple(sums), key=key,
            max_cells=max_cells,
        )
    return get_engine(engine).tabulate(data, spec)
