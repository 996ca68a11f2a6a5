"""The contract suite fails methods that break the contract (each check shown to bite)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pytest

from tabsafe.method import Examples, Outcome, TableMethod
from tabsafe.model.result import Protection, Release, Report
from tabsafe.params import Int, Real, parameter
from tabsafe.testing import contract


@dataclass(frozen=True, kw_only=True)
class Noise(TableMethod):
    """Adds seeded noise to every stored cell (a well-behaved test method).

    Attributes:
        scale: the largest absolute noise.
        share: share of cells touched.
    """

    name: ClassVar[str] = "test-noise"
    random: ClassVar[bool] = True
    scale: int = parameter(2, check=Int(min=0, max=10))
    share: float = parameter(1.0, check=Real(min=0, max=1))

    @classmethod
    def examples(cls) -> Examples:
        return Examples(typical=(cls(),), identity=cls(scale=0))

    def apply(self, table: Any, seed: int | None) -> Outcome:
        rng = np.random.default_rng(seed)
        noise = rng.integers(-self.scale, self.scale + 1, table.n_stored) * (rng.random(table.n_stored) < self.share)
        return Outcome(cells=table, release={"count": np.maximum(table.counts + noise, 0)})


def _table(method: TableMethod) -> Any:
    return contract.example_table(method, Examples(typical=(method,)))


def test_a_well_behaved_method_passes() -> None:
    m = Noise()
    contract.check_declared(Noise)
    contract.check_params_roundtrip(m)
    contract.check_bad_values(Noise, m)
    contract.check_table_method(m, _table(m))
    contract.check_identity(Noise(scale=0), _table(m))


def test_bogus_report_params_fail() -> None:
    """A method whose report records other parameters than its own cannot be rerun from it."""

    @dataclass(frozen=True, kw_only=True)
    class BogusReport(Noise):
        def protect(self, table: Any, *, seed: int | None = None) -> Protection:
            p = super().protect(table, seed=seed)
            report = Report(method=self.name, params={"scale": 99}, seed=p.report.seed)
            return Protection(release=p.release, evaluation=p.evaluation, report=report)

    m = BogusReport()
    with pytest.raises(AssertionError, match="report params differ"):
        contract.check_table_method(m, _table(m))


def test_writing_into_the_table_meta_fails() -> None:
    @dataclass(frozen=True, kw_only=True)
    class MetaWriter(Noise):
        def apply(self, table: Any, seed: int | None) -> Outcome:
            table.meta["touched"] = True  # a Table is immutable: this raises
            return super().apply(table, seed)

    m = MetaWriter()
    with pytest.raises(TypeError):
        contract.check_table_method(m, _table(m))


def test_changing_the_input_fails() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Sneaky(Noise):
        def apply(self, table: Any, seed: int | None) -> Outcome:
            object.__setattr__(table, "meta", {"touched": True})
            return super().apply(table, seed)

    m = Sneaky()
    with pytest.raises(AssertionError, match="meta changed"):
        contract.check_table_method(m, _table(m))


def test_seed_ignored_fails() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Unseeded(Noise):
        def apply(self, table: Any, seed: int | None) -> Outcome:
            return super().apply(table, None)  # fresh entropy every call

    m = Unseeded()
    with pytest.raises(AssertionError, match="same seed, different release"):
        contract.check_table_method(m, _table(m))


def test_originals_in_the_release_fail() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Leaky(Noise):
        def apply(self, table: Any, seed: int | None) -> Outcome:
            out = super().apply(table, seed)
            return Outcome(cells=table, release={**out.release, "original": table.counts})

    m = Leaky()
    with pytest.raises(AssertionError, match="evaluation only"):
        contract.check_table_method(m, _table(m))


def test_identity_that_is_not_fails() -> None:
    with pytest.raises(AssertionError, match="identity parameters changed"):
        contract.check_identity(Noise(scale=2), _table(Noise()))


def test_undocumented_or_undeclared_parameters_fail() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Undocumented(TableMethod):
        """Adds noise.

        Attributes:
            scale: the largest absolute noise.
        """

        name: ClassVar[str] = "test-undocumented"
        scale: int = parameter(2, check=Int(min=0))
        share: float = parameter(1.0, check=Real(min=0, max=1))

    with pytest.raises(AssertionError, match="'share' has no entry in the docstring"):
        contract.check_declared(Undocumented)

    @dataclass(frozen=True, kw_only=True)
    class Undeclared(TableMethod):
        """Adds noise.

        Attributes:
            scale: the largest absolute noise.
        """

        name: ClassVar[str] = "test-undeclared"
        scale: int = 2  # no constraint: never validated, no CLI option

    with pytest.raises(AssertionError, match="'scale' is not a declared parameter"):
        contract.check_declared(Undeclared)


def test_release_type_is_the_only_thing_written_as_a_release(tmp_path) -> None:
    from tabsafe.io import release_arrow

    p = Noise().protect(_table(Noise()), seed=1)
    with pytest.raises(TypeError):
        release_arrow(p.evaluation)  # type: ignore[arg-type]
    assert "original" not in release_arrow(p.release).column_names
    assert isinstance(p.release, Release)
