"""Differencing audit: the slivers that tables released together let an intruder subtract out.

Tables built from one data set can be subtracted from each other (seed 000 §5.2, Tables
5.4–5.13; seed 001 §1; METHODS.md §10): an area in two geographies built from the same building
blocks (Tables 5.4–5.6; the ABS "Remainder of ACT" and its six largest collection districts), a
population and a filtered sub-population, tables linked by a shared base population (Tables
5.7–5.10), or one variable recoded two ways with overlapping bands (Tables 5.11–5.13). A
*sliver* is a group of records that no table publishes but whose count the published cells
determine; it discloses when small (``0 < n < threshold``; seed 000 §5.2: "a small cell (0, 1, or
2)"), zero slivers are reported apart (group attribute disclosure).

Method (boxes). Every published cell is a *box*: for each base variable of the data (the
variables the recodes, hierarchies and filters are built from), the set of base codes the cell
admits — its code's codes intersected with the table's filter; a variable the table does not
use admits every code (or the filter's). Box ``A ⊂ B`` iff componentwise subset. When ``A ⊊ B``
differ in exactly one variable ``v``, ``B \\ A`` is itself a box (``v`` restricted to
``B_v \\ A_v``) and its count is ``n(B) − n(A)``: the geographic, sub-population, recoding and
linking slivers of the seeds are all of this kind. The pair search joins cells on their sets of
all other variables and a sparse strict-subset relation of the sets of ``v`` (no double loop).
A sliver is reported only if it is *new*: not a known box, and not covered by known (published or derived)
boxes inside it with the same other sets (a union of siblings in a hierarchy is no news).
*Chains*: new slivers join the pool and are differenced again (order 2 = a sliver of a sliver,
…, up to ``max_order``, default 2) — Table 5.10's females 5 and 4 are order 2 (``(85 − 22) −
58``, ``(49 − 22) − 23``). Slivers of orders below ``max_order`` are all listed (later orders
build on them); of the last order only those below the threshold (small or zero) are kept. The
number of slivers can grow fast with the order on large releases (every large derived sliver
is differenced against every known cell inside it), so raise ``max_order`` with care. Differences needing a sum of non-box regions or a general linear
combination of cells are not searched (an exact row-space audit of all atoms would find them,
at a cost that grows with the square of the atoms).

Counts come through the tabulation engine (:func:`tabsafe.engines.planner.grouped_counts`): the
occurring combinations of the base variables with their counts, validated as every tabulation
is (declared codelists, missing values, inner cells' counts), so the audit scales with the
data's distinct combinations and the published cells, not with the full grid of the base
variables. Codes are ordered as the engine orders them: a declared codelist's order, else the
data's codes by :func:`~tabsafe.engines.planner.natural_key` ("A2" before "A10").

Filters (``where:``). A table's filter is tabsafe's filter language (:mod:`tabsafe.model.filter`:
text such as ``"area_2001 = A and household = single"``), or the mapping form ``{area: [A]}``
(= ``area in (A)``; a list of mappings, or of texts, is their ``and``; a ``{min: a, max: b}``
item is ``a <= code <= b``). The audit works on sets of base codes, so a filter is read as
the combinations of base codes it admits, evaluated as the engine's SQL would evaluate it
(numeric columns compare as numbers, text columns as text; an ordering on a text column
compares codes that are numbers, and a code that is no number is neither inside nor outside).
On a derived variable, ``v = c`` / ``v in (c, d)`` admit the base codes of those codes and
their negations the other base codes. The box method audits the filters whose admitted set is
a box: after ``not`` is pushed inwards, an ``and`` of parts that each test ONE base variable
(a derived variable counts as its base variable), such as ``sex = F and (age < 16 or age >= 65)
and not area_2001 in (A, B)``. It refuses, with one line, a part that ties several base
variables together (``sex = F or area = A``, ``not (sex = F and area = A)``: not a box; write
one table per box), an ordering (``<``, ``>=``…) on a derived variable (its codes are sets,
not numbers: compare its base variable) and codes that are not codes of the variable (a typo).

SPEC format (YAML; paths relative to the spec file)::

    data: persons.csv            # microdata (.csv or .parquet) — or inner cells:
    # table: cells.csv           #   aggregated inner cells of the base variables (each
    # count: n                   #   combination once) and their count column
    meta: meta.yaml              # optional: declared codelists (order and complete domains)
    threshold: 3                 # optional: small = 0 < n < threshold (default 3)
    max_order: 2                 # optional: longest chain of differences (default 2)
    derived:                     # optional: variables recoded from one base variable
      hours_a:
        from: hours
        codes:                   # new code -> list of base codes; {min: a, max: b} is the
          "<20": [{min: 0, max: 19}]   # numeric range of base codes a <= code <= b
          "20-39": [{min: 20, max: 39}]
      area_2001: {from: block, codes: {A: [b1, b2]}}
    tables:
      - name: "Table 5.11"       # unique
        by: [sex, hours_a]       # base or derived variables ([] for a single count)
        where: {area: [A]}       # optional: a filter (see Filters above), e.g. the same as
                                 #   where: "area = A"; or "area = A and hours >= 40"
        margins: true            # optional (default true): publish totals and subtotals
        hierarchies:             # optional: per variable, a file (.hrc/.yaml) or a tree whose
          hours_a: {"<40": ["<20", "20-39"]}   # leaves are the variable's codes

A table whose columns are conditions on different variables (Table 5.8: "working in A",
"living in A", "living and working in A") is written as one-cell tables (``by: []``).

The audit lives in three modules, one per responsibility: :mod:`~.spec` reads the SPEC file,
:mod:`~.boxes` holds the audit's pure functions (boxes, filters as boxes, the sliver search) and
:mod:`~.run` runs it (counts from the engine, then the search).
"""

from __future__ import annotations

from tabsafe.risk.differencing.boxes import SLIVER_COLUMNS, AuditResult, CodeSets, filter_masks
from tabsafe.risk.differencing.run import MAX_CELLS, audit
from tabsafe.risk.differencing.spec import CodeRange, Derived, DifferencingSpec, TableDef, where_filter

__all__ = ["MAX_CELLS", "SLIVER_COLUMNS", "AuditResult", "CodeRange", "CodeSets", "Derived", "DifferencingSpec",
           "TableDef", "audit", "filter_masks", "where_filter"]
