"""The contract every method keeps, as checks any test suite can run (scikit-learn's
``check_estimator`` and ``parametrize_with_checks`` are the model).

:func:`checks_for` lists the checks that apply to a method, generated from its declared
parameters and its declared capabilities (:mod:`tabsafe.capabilities`); each is one test item in
tabsafe's own suite (``tests/contract``: one item per method × check, so one failure hides no
other), run over every discovered method — built in or from a plugin — with the small examples the
method supplies (:meth:`tabsafe.method.Method.examples`). :func:`check_method` runs them all.
Each check raises ``AssertionError`` saying what broke.

What the checks catch (``tests/contract/test_contract_catches.py`` shows each one biting):
undeclared or undocumented parameters; a report that cannot rerun the method; a bad value of any
parameter (wrong type, below or above its range, the method's own ``validate()``) that is not one
:class:`~tabsafe.errors.TabsafeError` line; a parameter value the constraint admits that makes the
method crash; a seed ignored or randomness not declared; results that differ between processes
with the same seed (``hash()`` or set order in the noise); a release column that is the originals
under any name; a changed input; each declared capability that does not hold (random, consistent,
additive, joint, hides, needs_grid).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

import numpy as np

from tabsafe.capabilities import Capabilities
from tabsafe.errors import InputError, TabsafeError
from tabsafe.method import CellDistribution, Examples, Method, MicrodataMethod, TableMethod
from tabsafe.params import Bool, Choice, Int, Optional, Real, Text, TextList

__all__ = ["CHECKS", "check_method", "checks_for", "example_data", "example_table"]

#: Names that say a column carries original values or keys: never in a release.
SECRET_NAMES = ("original", "ckey", "reason", "input")


def example_data(n: int = 120, seed: int = 42) -> Any:
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
    return tabulate(Microdata.from_frame(data), by, hierarchies=_hierarchies(by), key=key, sums=needs.sums,
                    contributors=needs.contributors)


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


# ------------------------------------------------------------------------------------ examples


@lru_cache(maxsize=256)
def _examples(cls: type[Method]) -> Examples:
    ex = cls.examples()
    assert isinstance(ex, Examples), f"{cls.name}: examples() must return an Examples"
    return ex


@lru_cache(maxsize=256)
def _table(cls: type[Method], index: int, sparse: bool = False) -> Any:
    """The example table of the ``index``-th typical example (``-1``: the identity example);
    ``sparse`` drops one area × sex group from the records so the table has implied cells."""
    ex = _examples(cls)
    method = ex.identity if index < 0 else ex.typical[index]
    if sparse:
        data = ex.data if ex.data is not None else example_data()
        keep = ~((data["area"] == "a4") & (data["sex"] == "2")) if {"area", "sex"} <= set(data.columns) else None
        if keep is not None:
            ex = dataclasses.replace(ex, data=data[keep].reset_index(drop=True))
    return example_table(method, ex)


def _microdata(cls: type[Method]) -> Any:
    return example_microdata(_examples(cls))


def _typical(cls: type[Method]) -> tuple[Method, ...]:
    return tuple(_examples(cls).typical)


def _is_table(cls: type[Method]) -> bool:
    return issubclass(cls, TableMethod)


# ------------------------------------------------------------------------------------ checks: declaration


def check_declared(cls: type[Method]) -> None:
    """Every parameter is declared (a constraint) and documented; the name and kind are set; the
    capabilities are a :class:`~tabsafe.capabilities.Capabilities`."""
    assert cls.name, f"{cls.__name__} has no name"
    assert cls.kind in {"table", "microdata"}, f"{cls.name}: kind {cls.kind!r}"
    assert cls.summary(), f"{cls.name}: the class docstring has no summary line"
    assert dataclasses.is_dataclass(cls), f"{cls.name}: not a dataclass"
    assert isinstance(cls.declared, Capabilities), f"{cls.name}: 'declared' is not a Capabilities"
    assert not isinstance(vars(cls).get("random"), bool), (
        f"{cls.name}: 'random' is read from the declared capabilities; declare Capabilities(random=…)")
    params = {p.name: p for p in cls.parameters()}
    for f in dataclasses.fields(cls):
        if f.init:
            assert f.name in params, f"{cls.name}: field {f.name!r} is not a declared parameter"
            assert params[f.name].help, f"{cls.name}: parameter {f.name!r} has no entry in the docstring's Attributes"
            assert f.kw_only, f"{cls.name}: parameter {f.name!r} is not keyword-only"
    params_doc = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params_doc.frozen, f"{cls.name}: the dataclass is not frozen"


def check_examples(cls: type[Method]) -> None:
    """Typical examples, and an identity example or the reason there is none."""
    ex = _examples(cls)
    assert ex.typical, f"{cls.name}: no typical examples"
    for m in ex.typical:
        assert type(m) is cls, f"{cls.name}: a typical example is a {type(m).__name__}"
    if ex.identity is None:
        assert ex.why_no_identity, f"{cls.name}: no identity example and no reason why"


def check_params_roundtrip(cls: type[Method] | Method) -> None:
    """``from_params(m.params()) == m`` for every example, and the params are JSON."""
    methods = [cls] if isinstance(cls, Method) else [*_typical(cls), *filter(None, [_examples(cls).identity])]
    for method in methods:
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
        yield True
        if c.min is not None:
            yield c.min - 1
        if c.max is not None:
            yield c.max + 1
    elif isinstance(c, Real):
        yield "x"
        yield float("nan")
        yield float("inf") if c.max is not None or c.max_open else float("-inf")
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


def _build(cls: type[Method], template: Method, /, **changes: Any) -> Method:
    values = {**{q.name: getattr(template, q.name) for q in cls.parameters()}, **changes}
    return cls(**values)


def check_bad_values(cls: type[Method], base: Method | None = None) -> None:
    """A bad value of each parameter (wrong type, below or above its range) is one
    :class:`~tabsafe.errors.InputError` that names the parameter — from its constraint or from
    the method's own ``validate()`` — never another exception."""
    base = base if base is not None else _typical(cls)[0]
    for p in cls.parameters():
        for bad in _bad_values(p.constraint):
            try:
                _build(cls, base, **{p.name: bad})
            except InputError as exc:
                assert repr(p.name) in exc.render() or p.name in exc.render(), (
                    f"{cls.name}: the error for {p.name}={bad!r} does not name the parameter: {exc.render()}")
            except Exception as exc:  # noqa: BLE001 - any other exception is the failure this check names
                raise AssertionError(f"{cls.name}: {p.name}={bad!r} raised {type(exc).__name__} ({exc}), not one "
                                     "InputError line") from None
            else:
                raise AssertionError(f"{cls.name}: {p.name}={bad!r} was accepted")


def _admitted_extremes(constraint: Any) -> Iterator[Any]:
    """Far values a numeric constraint admits because it declares no bound on that side."""
    c = constraint.inner if isinstance(constraint, Optional) else constraint
    if isinstance(c, (Int, Real)):
        if c.min is None:
            yield from ((-1, -10**6) if isinstance(c, Int) else (-1.0, -1e6))
        if c.max is None:
            yield 10**6 if isinstance(c, Int) else 1e6


def check_admitted_values(cls: type[Method]) -> None:
    """A numeric parameter without a bound on one side must work at far values on that side (−1,
    −10⁶; 10⁶): each is either refused by the method's ``validate()`` with one line or runs on the
    example. A parameter that cannot be negative or huge declares its bound."""
    base = _typical(cls)[0]
    for p in cls.parameters():
        for value in _admitted_extremes(p.constraint):
            try:
                method = _build(cls, base, **{p.name: value})
            except TabsafeError:
                continue
            except Exception as exc:  # noqa: BLE001
                raise AssertionError(f"{cls.name}: {p.name}={value!r} raised {type(exc).__name__} ({exc}) in "
                                     "validation, not one InputError line") from None
            try:
                if _is_table(cls):
                    method.protect(_table(cls, 0), seed=5)  # type: ignore[attr-defined]
                else:
                    method.perturb(_microdata(cls), seed=5)  # type: ignore[attr-defined]
            except TabsafeError:
                continue
            except Exception as exc:  # noqa: BLE001
                raise AssertionError(f"{cls.name}: its constraint admits {p.name}={value!r}, and the method then "
                                     f"fails with {type(exc).__name__} ({exc}); bound the parameter or refuse the "
                                     "value in validate()") from None


def _admitted_variations(constraint: Any) -> Iterator[Any]:
    """Values a constraint admits that a method's ``validate()`` may judge: every choice, both
    flags, None where optional, each numeric bound."""
    if isinstance(constraint, Optional):
        yield None
    c = constraint.inner if isinstance(constraint, Optional) else constraint
    if isinstance(c, Choice):
        yield from (c.choices or ())
    elif isinstance(c, Bool):
        yield from (True, False)
    elif isinstance(c, (Int, Real)):
        if c.min is not None:
            yield c.min + 1e-9 if getattr(c, "min_open", False) else c.min
        if c.max is not None:
            yield c.max - 1e-9 if getattr(c, "max_open", False) else c.max


def check_validate(cls: type[Method]) -> None:
    """Every combination of a typical example with one other admitted value (each choice, each
    flag, None, each numeric bound) builds, or is refused by ``validate()`` with one
    :class:`~tabsafe.errors.InputError` line — never a bare ``ValueError`` or another exception."""
    for base in _typical(cls):
        for p in cls.parameters():
            for value in _admitted_variations(p.constraint):
                try:
                    _build(cls, base, **{p.name: value})
                except TabsafeError:
                    pass
                except Exception as exc:  # noqa: BLE001
                    raise AssertionError(f"{cls.name}: {p.name}={value!r} with {base.params()} raised "
                                         f"{type(exc).__name__} ({exc}), not one InputError line") from None


def check_cli(cls: type[Method]) -> None:
    """The method's options join ``tabsafe protect`` without clashing with its own."""
    from tabsafe.cli import build_parser

    build_parser(["protect", "--method", cls.name])


# ------------------------------------------------------------------------------------ checks: running


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
    assert a.release.table.dimensions == table.dimensions, f"{method.name}: dimensions changed"
    r = a.report
    assert r.method == method.name, f"{method.name}: report names {r.method!r}"
    assert dict(_plain(r.params)) == method.params(), f"{method.name}: report params differ from the parameters"
    json.dumps(r.to_json(evaluation=True), default=str)
    for c in a.release.columns:
        assert not c.startswith(SECRET_NAMES), f"{method.name}: release column {c!r} is for evaluation only"
    ev = a.evaluation
    rows = table.rows_of(ev.ids)
    expected = np.where(rows >= 0, table.counts[np.maximum(rows, 0)] if table.n_stored else 0, 0)
    assert np.array_equal(ev.column("original"), expected), f"{method.name}: evaluation 'original' is not the input"
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


def check_runs(cls: type[Method]) -> None:
    """Each typical example: same seed, same result; input untouched; report from the declared
    parameters (:func:`check_table_method`, :func:`check_microdata_method`)."""
    for i, m in enumerate(_typical(cls)):
        if _is_table(cls):
            check_table_method(m, _table(cls, i))  # type: ignore[arg-type]
        else:
            check_microdata_method(m, _microdata(cls))  # type: ignore[arg-type]


def _publish(method: Method, index: int, seed: int | None) -> dict[str, np.ndarray]:
    cls = type(method)
    if _is_table(cls):
        return _release_arrays(method.protect(_table(cls, index), seed=seed))  # type: ignore[attr-defined]
    t = method.perturb(_microdata(cls), seed=seed).microdata.source.table  # type: ignore[attr-defined]
    return {c: np.asarray(t.column(c).to_pylist(), dtype=object) for c in t.column_names}


def check_seed(cls: type[Method]) -> None:
    """A method declared random records the seed it used, draws and records one when none is
    given, and gives other results for other seeds; a method not declared random records no seed
    and gives the same result whatever the seed (a seed it reads without declaring it is caught
    here or by the same-seed check)."""
    for i, m in enumerate(_typical(cls)):
        run = (lambda s, m=m, i=i: m.protect(_table(cls, i), seed=s)) if _is_table(cls) else (  # type: ignore[attr-defined]
            lambda s, m=m: m.perturb(_microdata(cls), seed=s))  # type: ignore[attr-defined]
        if m.random:
            assert run(7).report.seed == 7, f"{m.name}: a random method's report must record the seed it used"
            drawn = run(None).report.seed
            assert isinstance(drawn, int), f"{m.name}: without a seed, a random method must draw one and record it"
            outs = [_publish(m, i, s) for s in (1, 2, 3, 4, 5, 6)]
            assert any(not _same_arrays(outs[0], o) for o in outs[1:]), (
                f"{m.name}: declared random, yet six seeds give one result (the seed is ignored, or the method is "
                "not random: declare Capabilities(random=False))")
        else:
            assert run(7).report.seed is None, f"{m.name}: a method not declared random records no seed"
            assert _same_arrays(_publish(m, i, 1), _publish(m, i, 2)), (
                f"{m.name}: not declared random, yet other seeds give other results: declare "
                "Capabilities(random=True)")


def _digest(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        arr = arrays[name]
        h.update(name.encode())
        h.update(json.dumps([None if (isinstance(v, float) and v != v) else v for v in arr.tolist()],
                            default=str).encode())
    return h.hexdigest()


def digests(cls: type[Method]) -> list[str]:
    """The digest of each typical example's result with seed 7 (for :func:`check_processes`)."""
    return [_digest(_publish(m, i, 7)) for i, m in enumerate(_typical(cls))]


def _load_class(module: str, file: str | None, qualname: str) -> type[Method]:
    import importlib
    import importlib.util
    import sys

    try:
        mod = importlib.import_module(module)
    except ImportError:
        assert file is not None
        spec = importlib.util.spec_from_file_location(module, file)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[module] = mod
        spec.loader.exec_module(mod)
    obj: Any = mod
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[no-any-return]


def _digest_main() -> None:  # pragma: no cover - run in a child process by check_processes
    import sys

    module, file, qualname = sys.argv[1], sys.argv[2] or None, sys.argv[3]
    print(json.dumps(digests(_load_class(module, file, qualname))))


def check_processes(cls: type[Method]) -> None:
    """Two processes with the same seed and different ``PYTHONHASHSEED`` give byte-identical
    results, equal to this process's: no ``hash()``, set order, clock or address in the result."""
    import os
    import subprocess
    import sys

    if "<locals>" in cls.__qualname__:
        raise AssertionError(f"{cls.name}: define the method at module level so that other processes can load it")
    module = sys.modules[cls.__module__]
    file = getattr(module, "__file__", None) or ""
    here = digests(cls)
    for hash_seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.dirname(file), *sys.path, env.get("PYTHONPATH")]))
        code = "from tabsafe.testing.contract import _digest_main; _digest_main()"
        done = subprocess.run([sys.executable, "-c", code, cls.__module__, file, cls.__qualname__],
                              env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{cls.name}: the child process failed: {done.stderr.strip()[-400:]}"
        there = json.loads(done.stdout.strip().splitlines()[-1])
        assert there == here, (f"{cls.name}: another process (PYTHONHASHSEED={hash_seed}) gives other results for "
                               "the same seed")


def check_no_originals(cls: type[Method]) -> None:
    """No release column holds the original counts cell for cell — whatever its name — unless the
    method declares ``publishes_unchanged``."""
    for i, m in enumerate(_typical(cls)):
        if m.capabilities().publishes_unchanged:
            continue
        table = _table(cls, i)
        out = m.protect(table, seed=7)  # type: ignore[attr-defined]
        rel = out.release.table
        rows = table.rows_of(rel.ids)
        original = np.where(rows >= 0, table.counts[np.maximum(rows, 0)] if table.n_stored else 0, 0)
        if not np.any(original):
            continue
        for c in rel.value_columns:
            values = np.asarray(rel.column(c))
            if values.dtype.kind in "iuf" and values.shape == original.shape and np.array_equal(values, original):
                raise AssertionError(f"{m.name}: release column {c!r} equals the original counts cell for cell "
                                     "(declare publishes_unchanged if the method may publish a table unchanged)")


def check_identity(method: TableMethod | type[Method], table: Any = None) -> None:
    """Parameters that switch the protection off give the original counts back."""
    if isinstance(method, type):
        cls = method
        ident = _examples(cls).identity
        if ident is None:
            return
        if not _is_table(cls):
            md = _microdata(cls)
            out = ident.perturb(md, seed=3)  # type: ignore[attr-defined]
            assert out.microdata.source.table.equals(md.source.table), f"{cls.name}: identity changed the records"
            return
        method, table = ident, _table(cls, -1)  # type: ignore[assignment]
    out = method.protect(table, seed=3)  # type: ignore[union-attr]
    rel = out.release.table
    got = np.asarray(rel.grid(), dtype=float)
    want = np.asarray(table.grid("count"), dtype=float)
    assert np.array_equal(got, want), f"{method.name}: identity parameters changed the counts"


def check_cell_distribution(method: TableMethod | type[Method], table: Any = None) -> None:
    """A method that states ``P(published | n)`` (:class:`~tabsafe.method.CellDistribution`)
    states a distribution (integer values, probabilities summing to 1) and publishes every inner
    cell at a value its distribution allows."""
    if isinstance(method, type):
        for i, m in enumerate(_typical(method)):
            check_cell_distribution(m, _table(method, i))  # type: ignore[arg-type]
        return
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
    published = out.release.table.counts
    inner = ev.leaf_mask
    for row, original, ok in zip(rows, ev.column("original"), inner):
        if not ok:
            continue
        value = published[row] if row >= 0 else 0
        n = int(original)
        dist = dists.get(n) or method.published_distribution(n)
        assert dist.get(int(value), 0) > 0, (
            f"{method.name}: an inner cell of {n} was published as {value}, which P(published | {n}) rules out")


# ------------------------------------------------------------------------------------ checks: capabilities


def _two_tables(cls: type[Method], method: Method) -> tuple[Any, Any, tuple[str, ...]]:
    """The example table and its margin over all but the first two variables, tabulated on
    their own: every cell of the second is a cell of the first."""
    ex = _examples(cls)
    big = example_table(method, ex)  # type: ignore[arg-type]
    small_by = tuple(big.variables[:2])
    small = example_table(method, dataclasses.replace(ex, by=small_by))  # type: ignore[arg-type]
    return big, small, small_by


def _shared_values(big: Any, small: Any, by: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The published counts of the cells the two tables share, as the big one and the small one
    publish them (cells a table does not store are zeros)."""
    # the main value column of each (``count``; a magnitude release's totals)
    fb = big.to_frame([big.value_column]).rename(columns={big.value_column: "count"})
    fs = small.to_frame([small.value_column]).rename(columns={small.value_column: "count"})
    for v in big.variables:
        if v not in by:
            fb = fb[fb[v].astype(str) == big.dimension(v).hierarchy.total]
    key = list(by)
    fb = fb[key + ["count"]].assign(**{v: fb[v].astype(str) for v in key})
    fs = fs[key + ["count"]].assign(**{v: fs[v].astype(str) for v in key})
    merged = fs.merge(fb, on=key, how="outer", suffixes=("_small", "_big"))
    return (np.asarray(merged["count_big"].fillna(0), dtype=float),
            np.asarray(merged["count_small"].fillna(0), dtype=float))


def check_consistent(cls: type[Method]) -> None:
    """Declared ``consistent``: the same cell gets the same value in two different tables (a
    table and its margin tabulated on its own), protected with different seeds."""
    for m in _typical(cls):
        if not m.capabilities().consistent:
            continue
        big, small, by = _two_tables(cls, m)
        a = m.protect(big, seed=1).release.table  # type: ignore[attr-defined]
        b = m.protect(small, seed=2).release.table  # type: ignore[attr-defined]
        x, y = _shared_values(a, b, by)
        differ = ~((x == y) | (np.isnan(x) & np.isnan(y)))
        assert not differ.any(), (f"{m.name}: declared consistent, yet {int(differ.sum())} of {x.size} cells shared "
                                  "by two tables are published differently")


def check_additive(cls: type[Method]) -> None:
    """Declared ``additive``: every published table is additive."""
    for i, m in enumerate(_typical(cls)):
        if m.capabilities().additive:
            rel = m.protect(_table(cls, i), seed=7).release.table  # type: ignore[attr-defined]
            assert rel.is_additive(), f"{m.name}: declared additive, yet a published margin is not the sum of " \
                                             "its cells"


def check_joint(cls: type[Method]) -> None:
    """``joint`` declared exactly when the method has ``protect_release``; a joint method
    protects a release of two tables sharing cells with one value per shared cell."""
    from tabsafe.release.protect import JointMethod, protect_release

    has = issubclass(cls, JointMethod)
    assert cls.declared.joint == has, (f"{cls.name}: declares joint={cls.declared.joint} but "
                                       f"{'has' if has else 'has no'} protect_release()")
    for m in _typical(cls):
        if not m.capabilities().joint:
            continue
        big, small, by = _two_tables(cls, m)
        result = protect_release([big, small], m, seed=7)  # type: ignore[arg-type]
        x, y = _shared_values(result.protections[0].release.table, result.protections[1].release.table, by)
        same = (x == y) | (np.isnan(x) & np.isnan(y))
        assert same.all(), f"{m.name}: a joint release publishes {int((~same).sum())} shared cells differently"


def check_hides(cls: type[Method]) -> None:
    """``hides`` declared exactly when the method publishes hidden (missing) counts; a hiding
    method states what a hidden cell is known to be at least and the protection it needs."""
    from tabsafe.release.protect import HidingMethod

    for i, m in enumerate(_typical(cls)):
        hides = m.capabilities().hides
        if hides:
            assert isinstance(m, HidingMethod), f"{m.name}: declares hides but states no required()"
            assert m.reading().hidden_min is not None, f"{m.name}: declares hides but reading() has no hidden_min"
        else:
            count = np.asarray(m.protect(_table(cls, i), seed=7).release.table.counts,  # type: ignore[attr-defined]
                               dtype=float)
            assert not np.isnan(count).any(), f"{m.name}: publishes hidden cells without declaring hides"


def check_needs_grid(cls: type[Method]) -> None:
    """A method that does not declare ``needs_grid`` keeps a sparse table sparse: it stores no
    cell the input does not store."""
    for i, m in enumerate(_typical(cls)):
        if m.capabilities().needs_grid:
            continue
        table = _table(cls, i, sparse=True)
        if table.n_stored == table.n_cells:
            continue
        rel = m.protect(table, seed=7).release.table  # type: ignore[attr-defined]
        extra = np.setdiff1d(rel.ids, table.ids)
        assert extra.size == 0, (f"{m.name}: stores {extra.size} cells the input does not (declare needs_grid if it "
                                 "works on the whole grid)")


def check_magnitudes(cls: type[Method]) -> None:
    """Declared ``magnitudes``: the method asks tabulation for sums and publishes perturbed sums;
    a method that does not declare it asks for none."""
    for i, m in enumerate(_typical(cls)):
        sums = m.needs().sums
        if not m.capabilities().magnitudes:
            assert not sums, f"{m.name}: asks for sums of {', '.join(sums)} without declaring magnitudes"
            continue
        assert sums, f"{m.name}: declares magnitudes but asks tabulation for no sums"
        table = _table(cls, i)
        rel = m.protect(table, seed=7).release.table  # type: ignore[attr-defined]
        for var in sums:
            assert rel.has(f"sum_{var}"), f"{m.name}: declares magnitudes but publishes no sum_{var}"


# ------------------------------------------------------------------------------------ microdata


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
    r = a.report
    assert r.method == method.name
    assert dict(_plain(r.params)) == method.params(), f"{method.name}: report params differ from the parameters"
    json.dumps(r.to_json(evaluation=True), default=str)
    return a


def check_microdata_identity(method: MicrodataMethod, microdata: Any) -> None:
    out = method.perturb(microdata, seed=3)
    assert out.microdata.source.table.equals(microdata.source.table), f"{method.name}: identity changed the records"


# ------------------------------------------------------------------------------------ the suite


def _always(cls: type[Method]) -> bool:
    return True


#: Every check: its name, when it applies, and the function (called with the method's class).
CHECKS: tuple[tuple[str, Callable[[type[Method]], bool], Callable[[type[Method]], None]], ...] = (
    ("declared", _always, check_declared),
    ("cli", _always, check_cli),
    ("examples", _always, check_examples),
    ("params_roundtrip", _always, check_params_roundtrip),
    ("bad_values", _always, check_bad_values),
    ("admitted_values", _always, check_admitted_values),
    ("validate", _always, check_validate),
    ("runs", _always, check_runs),
    ("seed", _always, check_seed),
    ("processes", _always, check_processes),
    ("identity", _always, check_identity),
    ("no_originals", _is_table, check_no_originals),
    ("cell_distribution", _is_table, check_cell_distribution),
    ("consistent", _is_table, check_consistent),
    ("additive", _is_table, check_additive),
    ("joint", _is_table, check_joint),
    ("hides", _is_table, check_hides),
    ("needs_grid", _is_table, check_needs_grid),
    ("magnitudes", _is_table, check_magnitudes),
)


def checks_for(cls: type[Method]) -> list[str]:
    """The names of the checks that apply to ``cls`` (one test item each)."""
    return [name for name, applies, _ in CHECKS if applies(cls)]


def run_check(cls: type[Method], name: str) -> None:
    """Run one check on ``cls``."""
    for check_name, _, fn in CHECKS:
        if check_name == name:
            fn(cls)
            return
    raise KeyError(name)


def check_method(cls: type[Method]) -> None:
    """Run every check that applies to ``cls`` with its own examples."""
    for name in checks_for(cls):
        run_check(cls, name)
