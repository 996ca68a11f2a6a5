"""The contract every method keeps, as checks any test suite can run (scikit-learn's
``check_estimator`` is the model).

:func:`check_method` runs every check on a registered method with the small examples the method
supplies (:meth:`tabsafe.method.Method.examples`). tabsafe's own suite runs it over every
discovered method (``tests/contract``), so a method added as one module — built in or from a
plugin package — is checked with no other edit. Each check raises ``AssertionError`` saying what
broke.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tabsafe.errors import InputError, TabsafeError
from tabsafe.method import CellDistribution, Examples, Method, MicrodataMethod, TableMethod
from tabsafe.params import Bool, Choice, Int, Optional, Real, Text, TextList

__all__ = ["CHECKS", "check_method", "example_data", "example_table"]

#: Names that say a column carries original values or keys: never in a release.
SECRET_NAMES = ("original", "ckey", "reason", "input")


def example_data(n: int = 400, seed: int = 42) -> Any:
    """The suite's small microdata: area (hierarchical), sex, age, household, income, record keys."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    households = rng.integers(0, n // 2, n)
    area_of_household = rng.choice(["a1", "a2", "a3", "a4"], n // 2)
    return pd.DataFrame({
        "area": area_of_household[households],
        "sex": rng.choice(["1", "2"], n),
        "age": rng.choice(["y", "m", "o"], n, p=[0.2, 0.5, 0.3]),
        "household_id": households,
        "income": np.round(rng.lognormal(9, 1, n), 2),
        "rkey": rng.integers(0, 10**10, n) / 1e10,
        "rkey_int": rng.integers(0, 256, n),
    })


def _hierarchies(by: tuple[str, ...]) -> dict[str, Any]:
    from tabsafe.model.hierarchy import Hierarchy

    out = {}
    if "area" in by:
        out["area"] = Hierarchy.from_tree({"N": ["a1", "a2"], "S": ["a3", "a4"]})
    return out


def example_table(method: TableMethod, examples: Examples | None = None) -> Any:
    """The table the suite protects with ``method``: tabulated with what the method needs."""
    from tabsafe.model.microdata import Microdata
    from tabsafe.model.spec import KeySpec
    from tabsafe.tabulation import tabulate

    ex = examples or type(method).examples()
    data = ex.data if ex.data is not None else example_data()
    by = tuple(ex.by or ("area", "sex", "age"))
    needs = method.needs()
    key = needs.key
    if key is not None and key.modulus is not None and "rkey_int" in getattr(data, "columns", []):
        key = KeySpec(column="rkey_int", modulus=key.modulus)
        data = data.drop(columns=["rkey"]).rename(columns={"rkey_int": "rkey"})
        key = KeySpec(column="rkey", modulus=key.modulus)
    return tabulate(Microdata.from_frame(data), by, hierarchies=_hierarchies(by), key=key, sums=needs.sums)


def example_microdata(examples: Examples) -> Any:
    from tabsafe.model.microdata import Microdata

    data = examples.data if examples.data is not None else example_data()
    return Microdata.from_frame(data)


# ------------------------------------------------------------------------------------ snapshots


def _snapshot_table(table: Any) -> tuple[Any, ...]:
    return (
        table.dimensions,
        table.ids.copy(),
        {c: table.column(c).copy() for c in table.value_columns},
        json.dumps(_plain(table.meta), sort_keys=True, default=str),
    )


def _plain(value: Any) -> Any:
    from tabsafe.model.table import thaw

    return thaw(value)


def _same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if x.shape != y.shape:
            return False
        if x.dtype.kind == "f":
            if not np.array_equal(x, y, equal_nan=True):
                return False
        elif not np.array_equal(x, y):
            return False
    return True


def _release_arrays(p: Any) -> dict[str, np.ndarray]:
    t = p.release.table
    return {"__ids__": t.ids, **{c: t.column(c) for c in t.value_columns}}


def _evaluation_arrays(p: Any) -> dict[str, np.ndarray]:
    t = p.evaluation
    return {"__ids__": t.ids, **{c: t.column(c) for c in t.value_columns}}


# ------------------------------------------------------------------------------------ checks


def check_declared(cls: type[Method]) -> None:
    """Every parameter is declared (a constraint) and documented; the name and kind are set."""
    assert cls.name, f"{cls.__name__} has no name"
    assert cls.kind in {"table", "microdata"}, f"{cls.name}: kind {cls.kind!r}"
    assert cls.summary(), f"{cls.name}: the class docstring has no summary line"
    assert dataclasses.is_dataclass(cls), f"{cls.name}: not a dataclass"
    params = {p.name: p for p in cls.parameters()}
    for f in dataclasses.fields(cls):
        if f.init:
            assert f.name in params, f"{cls.name}: field {f.name!r} is not a declared parameter"
            assert params[f.name].help, f"{cls.name}: parameter {f.name!r} has no entry in the docstring's Attributes"
            assert f.kw_only, f"{cls.name}: parameter {f.name!r} is not keyword-only"
    params_doc = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params_doc.frozen, f"{cls.name}: the dataclass is not frozen"


def check_params_roundtrip(method: Method) -> None:
    """``from_params(m.params()) == m``, and the params are JSON."""
    params = method.params()
    text = json.dumps(params)
    rebuilt = type(method).from_params(json.loads(text))
    assert rebuilt == method, f"{method.name}: from_params(params()) differs: {rebuilt!r} != {method!r}"
    assert rebuilt.params() == params, f"{method.name}: params() of the rebuilt method differ"


def _bad_values(constraint: Any) -> Iterator[Any]:
    c = constraint.inner if isinstance(constraint, Optional) else constraint
    if isinstance(c, Int):
        yield "three"
        yield 1.5
        if c.min is not None:
            yield c.min - 1
        if c.max is not None:
            yield c.max + 1
    elif isinstance(c, Real):
        yield "x"
        yield float("nan")
        if c.min is not None:
            yield c.min - 1
        if c.max is not None:
            yield c.max + 1
    elif isinstance(c, Choice):
        yield "no-such-choice"
    elif isinstance(c, Bool):
        yield "maybe"
    elif isinstance(c, Text):
        yield ""
        yield 3
    elif isinstance(c, TextList):
        yield [""]
        yield 3
    else:
        yield object()


def check_bad_values(cls: type[Method], base: Method) -> None:
    """A bad value of each parameter is an InputError that names the parameter."""
    for p in cls.parameters():
        for bad in _bad_values(p.constraint):
            values = {**{q.name: getattr(base, q.name) for q in cls.parameters()}, p.name: bad}
            try:
                cls(**values)
            except InputError as exc:
                assert repr(p.name) in exc.render() or p.name in exc.render(), (
                    f"{cls.name}: the error for {p.name}={bad!r} does not name the parameter: {exc.render()}")
            else:
                raise AssertionError(f"{cls.name}: {p.name}={bad!r} was accepted")


def check_table_method(method: TableMethod, table: Any) -> Any:
    """Same seed → same output; input and its meta untouched; grid kept; report complete;
    release free of secret columns; ``needs()`` honoured."""
    before = _snapshot_table(table)
    a = method.protect(table, seed=7)
    after = _snapshot_table(table)
    assert before[0] == after[0] and np.array_equal(before[1], after[1]), f"{method.name}: the input's cells changed"
    assert _same_arrays(before[2], after[2]), f"{method.name}: the input's values changed"
    assert before[3] == after[3], f"{method.name}: the input's meta changed"
    b = method.protect(table, seed=7)
    assert _same_arrays(_release_arrays(a), _release_arrays(b)), f"{method.name}: same seed, different release"
    assert _same_arrays(_evaluation_arrays(a), _evaluation_arrays(b)), f"{method.name}: same seed, different evaluation"
    # the grid and dimensions are kept
    assert a.release.table.dimensions == table.dimensions, f"{method.name}: dimensions changed"
    # the report is written from the declared parameters
    r = a.report
    assert r.method == method.name, f"{method.name}: report names {r.method!r}"
    assert dict(_plain(r.params)) == method.params(), f"{method.name}: report params differ from the parameters"
    if method.random:
        assert r.seed == 7, f"{method.name}: a random method's report must record the seed it used"
        drawn = method.protect(table, seed=None).report.seed
        assert isinstance(drawn, int), f"{method.name}: without a seed, a random method must draw one and record it"
    else:
        assert r.seed is None, f"{method.name}: a deterministic method records no seed"
    json.dumps(r.to_json(evaluation=True), default=str)
    # what is published holds no originals or keys, and evaluation holds the originals
    for c in a.release.columns:
        assert not c.startswith(SECRET_NAMES), f"{method.name}: release column {c!r} is for evaluation only"
    ev = a.evaluation
    rows = table.rows_of(ev.ids)
    expected = np.where(rows >= 0, table.counts[np.maximum(rows, 0)] if table.n_stored else 0, 0)
    assert np.array_equal(ev.column("original"), expected), f"{method.name}: evaluation 'original' is not the input"
    # needs(): a key is asked for exactly when the method cannot work without one
    needs = method.needs()
    if needs.key is not None and table.has("ckey"):
        bare = table.with_values(ckey=None, ckey_int=None)
        try:
            method.protect(bare, seed=7)
        except TabsafeError:
            pass
        else:
            raise AssertionError(f"{method.name}: needs a cell key but protects a table without one")
    return a


def check_identity(method: TableMethod, table: Any) -> None:
    """Parameters that switch the protection off give the original counts back."""
    out = method.protect(table, seed=3)
    rel = out.release.table
    got = np.asarray(rel.grid("count"), dtype=float)
    want = np.asarray(table.grid("count"), dtype=float)
    assert np.array_equal(got, want), f"{method.name}: identity parameters changed the counts"


def check_cell_distribution(method: TableMethod, table: Any) -> None:
    """A method that states ``P(published | n)`` (:class:`~tabsafe.method.CellDistribution`)
    states a distribution (integer values, probabilities summing to 1) and publishes every inner
    cell at a value its distribution allows."""
    if not isinstance(method, CellDistribution) or method.published_distribution(1) is None:
        return
    dists = {}
    for n in range(13):
        dist = method.published_distribution(n)
        assert dist is not None, f"{method.name}: a distribution for n=1 but none for n={n}"
        assert all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in dist), (
            f"{method.name}: P(published | {n}) has a value that is not an integer")
        assert all(p >= 0 for p in dist.values()), f"{method.name}: P(published | {n}) has a negative probability"
        assert abs(sum(dist.values()) - 1) < 1e-9, f"{method.name}: P(published | {n}) sums to {sum(dist.values())}"
        dists[n] = dist
    out = method.protect(table, seed=11)
    ev = out.evaluation
    rows = out.release.table.rows_of(ev.ids)
    published = out.release.table.column("count")
    inner = ev.leaf_mask
    for row, original, ok in zip(rows, ev.column("original"), inner):
        if not ok:
            continue
        value = published[row] if row >= 0 else 0
        n = int(original)
        dist = dists.get(n) or method.published_distribution(n)
        assert dist.get(int(value), 0) > 0, (
            f"{method.name}: an inner cell of {n} was published as {value}, which P(published | {n}) rules out")


def check_microdata_method(method: MicrodataMethod, microdata: Any) -> Any:
    """Same seed → same records; input untouched; report complete."""
    source_before = microdata.source.table if hasattr(microdata.source, "table") else None
    snapshot = source_before.to_pydict() if source_before is not None else None
    a = method.perturb(microdata, seed=7)
    b = method.perturb(microdata, seed=7)
    if snapshot is not None:
        assert microdata.source.table.to_pydict() == snapshot, f"{method.name}: the input records changed"
    ta, tb = a.microdata.source.table, b.microdata.source.table
    assert ta.equals(tb), f"{method.name}: same seed, different records"
    assert ta.num_rows == microdata.source.table.num_rows or method.params(), f"{method.name}: records lost"
    r = a.report
    assert r.method == method.name
    assert dict(_plain(r.params)) == method.params(), f"{method.name}: report params differ from the parameters"
    if method.random:
        assert r.seed == 7
    json.dumps(r.to_json(evaluation=True), default=str)
    return a


def check_microdata_identity(method: MicrodataMethod, microdata: Any) -> None:
    out = method.perturb(microdata, seed=3)
    assert out.microdata.source.table.equals(microdata.source.table), f"{method.name}: identity changed the records"


def check_cli(cls: type[Method]) -> None:
    """The method's options join ``tabsafe protect`` without clashing with its own."""
    from tabsafe.cli import build_parser

    build_parser(["protect", "--method", cls.name])


CHECKS: tuple[Callable[..., Any], ...] = (
    check_declared, check_params_roundtrip, check_bad_values, check_table_method, check_identity,
    check_cell_distribution, check_microdata_method, check_microdata_identity, check_cli,
)


def check_method(cls: type[Method]) -> None:
    """Run every check on ``cls`` with its own examples."""
    check_declared(cls)
    check_cli(cls)
    ex = cls.examples()
    assert ex.typical, f"{cls.name}: no typical examples"
    for m in ex.typical:
        check_params_roundtrip(m)
    check_bad_values(cls, ex.typical[0])
    if ex.identity is None:
        assert ex.why_no_identity, f"{cls.name}: no identity example and no reason why"
    else:
        check_params_roundtrip(ex.identity)
    if issubclass(cls, TableMethod):
        for m in ex.typical:
            table = example_table(m, ex)
            check_table_method(m, table)
            check_cell_distribution(m, table)
        if ex.identity is not None:
            check_identity(ex.identity, example_table(ex.identity, ex))
    else:
        md = example_microdata(ex)
        for m in ex.typical:
            check_microdata_method(m, md)
        if ex.identity is not None:
            check_microdata_identity(ex.identity, md)
