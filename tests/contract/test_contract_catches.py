"""The contract suite fails methods that break the contract: each check shown to bite.

Every wrong below is a realistic mistake in a new method written as one module. Each is a small
variant of a well-behaved method (:class:`Noise`, which passes every check); the table at the end
names the check that must catch it, and the test runs that check and the whole suite on it. The
classes live at module level so that the suite's other processes can load them (the process check).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
import pytest

from tabsafe.capabilities import Capabilities
from tabsafe.method import Examples, Outcome, TableMethod
from tabsafe.model.result import Protection, Release, Report
from tabsafe.params import Int, Real, parameter
from tabsafe.testing import contract


@dataclass(frozen=True, kw_only=True)
class Noise(TableMethod):
    """Adds seeded noise to every stored inner cell; margins are their sums (a well-behaved method).

    Attributes:
        scale: the largest absolute noise.
        share: share of cells touched.
    """

    name: ClassVar[str] = "test-noise"
    declared: ClassVar[Capabilities] = Capabilities(random=True, additive=True)
    scale: int = parameter(2, check=Int(min=0, max=10))
    share: float = parameter(1.0, check=Real(min=0, max=1))

    @classmethod
    def examples(cls) -> Examples:
        return Examples(typical=(cls(),), identity=cls(scale=0))

    def noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(-self.scale, self.scale + 1, n) * (rng.random(n) < self.share)

    def apply(self, table: Any, seed: int | None) -> Outcome:
        from tabsafe.protect.controlled_rounding.grid import Grid

        dense = table.densify()
        inner = dense.leaf_mask & (dense.counts > 0)
        noisy = np.where(inner, np.maximum(dense.counts + self.noise(dense.n_cells, np.random.default_rng(seed)), 0), 0)
        return Outcome(cells=dense, release={"count": Grid.of(dense).aggregate(noisy)})

    def capabilities(self) -> Capabilities:
        return replace(super().capabilities(), needs_grid=True)


# --------------------------------------------------------------------------------- the wrongs


@dataclass(frozen=True, kw_only=True)
class SeedIgnored(Noise):
    """Draws fresh entropy instead of the seed it is given.

    Attributes:
        scale: the largest absolute noise.
        share: share of cells touched.
    """

    name: ClassVar[str] = "test-seed-ignored"

    def noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return super().noise(n, np.random.default_rng())


@dataclass(frozen=True, kw_only=True)
class RandomUndeclared(Noise):
    """Uses the seed but does not declare itself random (so it is never given one).

    Attributes:
        scale: the largest absolute noise.
        share: share of cells touched.
    """

    name: ClassVar[str] = "test-random-undeclared"
    declared: ClassVar[Capabilities] = Capabilities(additive=True)


@dataclass(frozen=True, kw_only=True)
class FixedSeed(Noise):
    """Declares itself random but always draws from seed 0.

    Attributes:
        scale: the largest absolute noise.
        share: share of cells touched.
    """

    name: ClassVar[str] = "test-fixed-seed"

    def noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return super().noise(n, np.random.default_rng(0))


@dataclass(frozen=True, kw_only=True)
class OriginalsRenamed(Noise):
    """Publishes the originals beside the noisy counts, under a harmless name.

    Attributes:
        scale: the largest absolute noise.
        share: share of cells touched.
    """

    name: ClassVar[str] = "test-originals-renamed"

    def apply(self, table: Any, seed: int | None) -> Outcome:
        out = super().apply(table, seed)
        return replace(out, release={**out.release, "reference": out.cells.counts})


@dataclass(frozen=True, kw_only=True)
class HashNoise(Noise):
    """Mixes ``hash()`` of a string into the seed: other processes draw other noise.

    Attributes:
        scale: the largest absolute noise.
        share: share of cells touched.
    """

    name: ClassVar[str] = "test-hash-noise"

    def apply(self, table: Any, seed: int | None) -> Outcome:
        return super().apply(table, (int(seed or 0) ^ hash("tabsafe")) % 2**32)


@dataclass(frozen=True, kw_only=True)
class NegativeAllowed(Noise):
    """Declares its scale without a lower bound.

    Attributes:
        scale: the largest absolute noise.
        share: share of cells touched.
    """

    name: ClassVar[str] = "test-negative-allowed"
    scale: int = parameter(2, check=Int(max=10))


@dataclass(frozen=True, kw_only=True)
class Unbounded(Noise):
    """Declares a resolution without an upper bound and allocates with it.

    Attributes:
        scale: the largest absolute noise.
        share: share of cells touched.
        resolution: grid points per unit of noise.
    """

    name: ClassVar[str] = "test-unbounded"
    resolution: int = parameter(10, check=Int(min=1))

    def noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        points = np.linspace(-self.scale, self.scale, self.resolution * 10**4 + 1)  # grows with the parameter
        return np.round(rng.choice(points, n)).astype(np.int64)


@dataclass(frozen=True, kw_only=True)
class BareValidate(Noise):
    """Raises a bare ValueError from validate().

    Attributes:
        scale: the largest absolute noise.
        share: share of cells touched.
    """

    name: ClassVar[str] = "test-bare-validate"

    def validate(self) -> None:
        if self.share == 0 and self.scale > 0:
            raise ValueError("share 0 with a scale makes no sense")


@dataclass(frozen=True, kw_only=True)
class ClaimsConsistent(Noise):
    """Says the same cell gets the same value in every table; draws per table from the seed.

    Attributes:
        scale: the largest absolute noise.
        share: share of cells touched.
    """

    name: ClassVar[str] = "test-claims-consistent"
    declared: ClassVar[Capabilities] = Capabilities(random=True, additive=True, consistent=True)


@dataclass(frozen=True, kw_only=True)
class ClaimsAdditive(Noise):
    """Says it is additive; perturbs margins on their own.

    Attributes:
        scale: the largest absolute noise.
        share: share of cells touched.
    """

    name: ClassVar[str] = "test-claims-additive"

    def apply(self, table: Any, seed: int | None) -> Outcome:
        rng = np.random.default_rng(seed)
        return Outcome(cells=table, release={"count": np.maximum(table.counts + self.noise(table.n_stored, rng), 0)})

    def capabilities(self) -> Capabilities:
        return replace(Noise.declared, stage="table")


@dataclass(frozen=True, kw_only=True)
class HidesUndeclared(Noise):
    """Publishes small cells as missing without declaring that it hides cells.

    Attributes:
        scale: the largest absolute noise.
        share: share of cells touched.
    """

    name: ClassVar[str] = "test-hides-undeclared"
    declared: ClassVar[Capabilities] = Capabilities(random=True)

    def apply(self, table: Any, seed: int | None) -> Outcome:
        out = super().apply(table, seed)
        count = np.asarray(out.release["count"], dtype=float)
        return replace(out, release={"count": np.where(out.cells.counts < 3, np.nan, count)})


@dataclass(frozen=True, kw_only=True)
class ChangesInput(Noise):
    """Writes into its input table's meta.

    Attributes:
        scale: the largest absolute noise.
        share: share of cells touched.
    """

    name: ClassVar[str] = "test-changes-input"

    def apply(self, table: Any, seed: int | None) -> Outcome:
        object.__setattr__(table, "meta", {"touched": True})
        return super().apply(table, seed)


@dataclass(frozen=True, kw_only=True)
class BogusReport(Noise):
    """Records other parameters in its report than its own.

    Attributes:
        scale: the largest absolute noise.
        share: share of cells touched.
    """

    name: ClassVar[str] = "test-bogus-report"

    def protect(self, table: Any, *, seed: int | None = None) -> Protection:
        p = super().protect(table, seed=seed)
        report = Report(method=self.name, params={"scale": 99}, seed=p.report.seed)
        return Protection(release=p.release, evaluation=p.evaluation, report=report)


#: (the wrong, the check that must catch it, words of its message)
WRONGS = [
    (SeedIgnored, "runs", "same seed, different release"),
    (RandomUndeclared, "seed", "not declared random"),
    (FixedSeed, "seed", "six seeds give one result"),
    (OriginalsRenamed, "no_originals", "'reference' equals the original counts"),
    (HashNoise, "processes", "another process"),
    (NegativeAllowed, "admitted_values", "scale=-1"),
    (Unbounded, "admitted_values", "resolution=1000000"),
    (BareValidate, "validate", "raised ValueError"),
    (ClaimsConsistent, "consistent", "declared consistent"),
    (ClaimsAdditive, "additive", "declared additive"),
    (HidesUndeclared, "hides", "without declaring hides"),
    (ChangesInput, "runs", "meta changed"),
    (BogusReport, "runs", "report params differ"),
]


def test_a_well_behaved_method_passes_every_check() -> None:
    contract.check_method(Noise)


@pytest.mark.parametrize(("wrong", "check", "words"), WRONGS, ids=[w.__name__ for w, _, _ in WRONGS])
def test_each_wrong_is_caught_by_its_check(wrong: type[TableMethod], check: str, words: str) -> None:
    assert check in contract.checks_for(wrong)
    with pytest.raises(AssertionError, match=words.replace("(", r"\(")):
        contract.run_check(wrong, check)


@pytest.mark.parametrize("wrong", [w for w, _, _ in WRONGS], ids=[w.__name__ for w, _, _ in WRONGS])
def test_each_wrong_passes_the_checks_it_does_not_break(wrong: type[TableMethod]) -> None:
    """The wrongs differ from Noise in one thing only: the other checks pass, so each failure
    above is the check's doing, not a broken fixture."""
    caught = {c for w, c, _ in WRONGS if w is wrong}
    # a wrong may break a second check by its nature (a seed ignored also fails the seed check)
    also = {SeedIgnored: {"seed", "processes"}, RandomUndeclared: {"runs", "processes"},
            ChangesInput: {"seed"}, HidesUndeclared: {"identity"}}.get(wrong, set())
    for name in contract.checks_for(wrong):
        # the process check (two child processes) runs on Noise itself above; here it would
        # only repeat that at a cost of seconds per wrong
        if name in caught or name in also or name == "processes":
            continue
        contract.run_check(wrong, name)


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


def test_identity_that_is_not_fails() -> None:
    with pytest.raises(AssertionError, match="identity parameters changed"):
        contract.check_identity(Noise(scale=2), contract.example_table(Noise(), Examples(typical=(Noise(),))))


def test_a_legacy_random_flag_is_read_as_the_declaration() -> None:
    """A method written before capabilities (``random = True`` as a class attribute) keeps working:
    the flag becomes its declared capability, and ``random`` has one source."""

    @dataclass(frozen=True, kw_only=True)
    class Legacy(TableMethod):
        """Legacy.

        Attributes:
            scale: the largest absolute noise.
        """

        name: ClassVar[str] = "test-legacy"
        random: ClassVar[bool] = True  # type: ignore[misc]
        scale: int = parameter(2, check=Int(min=0, max=10))

    assert Legacy.declared.random and Legacy().random and Legacy().capabilities().random


def test_release_type_is_the_only_thing_written_as_a_release() -> None:
    from tabsafe.io import release_arrow

    p = Noise().protect(contract.example_table(Noise(), Examples(typical=(Noise(),))), seed=1)
    with pytest.raises(TypeError):
        release_arrow(p.evaluation)  # type: ignore[arg-type]
    assert "original" not in release_arrow(p.release).column_names
    assert isinstance(p.release, Release)
