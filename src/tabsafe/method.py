"""The method contract: every protection method is declared the same way and run the same way.

A method is a frozen, keyword-only dataclass whose fields are its parameters, each declared with
:func:`tabsafe.params.parameter` and a constraint (scikit-learn's ``BaseEstimator`` +
``_param_validation``). Declaring is all a method does for the rest of tabsafe:

* building it validates every field and fails with one sentence naming the parameter;
* :meth:`Method.params` (the report's record) and :meth:`Method.from_params` (config files, the
  service) follow from the fields; ``from_params(m.params()) == m``;
* the command line's options are generated from the fields, their help from the docstring;
* the report is written by the contract, not the method: parameters, seed, figures, notes.

Two kinds share the contract:

* :class:`TableMethod` — ``protect(table, *, seed) -> Protection`` (post-tabular: the cell key
  method, rounding, suppression, cell perturbation, additivity); a subclass writes
  :meth:`TableMethod.apply`, returning an :class:`Outcome` whose ``release`` and ``evaluation``
  columns are kept apart by type in the :class:`~tabsafe.model.result.Protection`.
* :class:`MicrodataMethod` — ``perturb(microdata, *, seed) -> MicrodataProtection`` (pre-tabular:
  record swapping, PRAM, perturbation weights); a subclass writes :meth:`MicrodataMethod.apply`.

A cell-level method may also state exactly how it publishes one cell: the small protocol
:class:`CellDistribution` (``published_distribution(n) -> {published value: probability}``).
Evaluation (information gain, differencing risk, the binomial test of a realisation) uses it for
any method that has it, built in or from a plugin, with no list of methods anywhere.

Methods are found by name through the entry-point group ``tabsafe.methods``
(:mod:`tabsafe.registry`), built-in ones exactly like outside ones. Each supplies small
:class:`Examples` for the contract suite (:mod:`tabsafe.testing.contract`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from tabsafe import params as _params
from tabsafe import progress
from tabsafe.capabilities import Capabilities, Reading
from tabsafe.errors import InputError
from tabsafe.model.result import MicrodataProtection, Protection, Release, Report
from tabsafe.model.spec import ContributorSpec, KeySpec
from tabsafe.seeds import MAX_SEED, check_seed, draw_seed, stream_seed  # the seed policy (one place)

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pyarrow as pa

    from tabsafe.model.microdata import Microdata
    from tabsafe.model.table import Table

__all__ = [
    "Capabilities",
    "MAX_SEED",
    "CellDistribution",
    "Examples",
    "Method",
    "MicrodataMethod",
    "MicrodataOutcome",
    "Needs",
    "Outcome",
    "Reading",
    "TableMethod",
    "check_seed",
    "draw_seed",
]



@dataclass(frozen=True, kw_only=True)
class Needs:
    """What a method needs from tabulation.

    Attributes:
        key: the cell key computed from this record-key specification (``ckey``, ``ckey_int``).
        sums: magnitude variables to sum per cell (``sum_<var>``).
        microdata: the method cannot work from aggregated inner cells.
        contributors: the method reads who contributed what to each cell (a magnitude table
            protected from its contributors, issue #29): tabulation then gives a
            :class:`~tabsafe.model.contributions.ContributionTable`, which carries every cell's
            contributions as a private handle (never part of a release).
    """

    key: KeySpec | None = None
    sums: tuple[str, ...] = ()
    microdata: bool = False
    contributors: ContributorSpec | None = None


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What :meth:`TableMethod.apply` returns; the contract turns it into a
    :class:`~tabsafe.model.result.Protection`.

    Attributes:
        cells: the table the columns are aligned with — the input table, or its dense form for
            methods that work on the whole grid.
        release: the published value columns (``value`` required).
        evaluation: values for evaluation only (statuses, keys, reasons); the original counts
            are added by the contract as ``original``.
        figures: numbers safe to publish.
        private: numbers that reveal original values (evaluation outputs only).
        notes: sentences for the report.
        value: the release's main column: ``count``, or a magnitude's ``sum_<variable>`` when
            the release publishes totals and no count (issue #29).
    """

    cells: Table
    release: Mapping[str, np.ndarray]
    evaluation: Mapping[str, np.ndarray] = field(default_factory=dict)
    figures: Mapping[str, Any] = field(default_factory=dict)
    private: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    value: str = "count"


@dataclass(frozen=True, kw_only=True)
class MicrodataOutcome:
    """What :meth:`MicrodataMethod.apply` returns.

    Attributes:
        data: the perturbed records (the input's columns, and any the method adds).
        evaluation: per-record evaluation columns (e.g. ``swapped``), or None.
        weight: the column of ``data`` that tables now count by (whole-number record weights,
            e.g. perturbation weights); None keeps the input's.
        figures, private, notes: as in :class:`Outcome`.
        tables: publishable side tables by name (the report's ``tables``: PRAM's transition
            matrix); a method names them in :attr:`Method.side_tables`.
    """

    data: pa.Table | Any  # or a Source: records an engine holds (a Spark DataFrame)
    evaluation: pa.Table | Any = None  # or the engine's frame (a Spark DataFrame)
    weight: str | None = None
    figures: Mapping[str, Any] = field(default_factory=dict)
    private: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    tables: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Examples:
    """Small examples a method gives the contract suite.

    Attributes:
        typical: instances with typical parameters.
        identity: an instance whose output equals its input (noise off), or None when the method
            has no such parameters (say why in ``why_no_identity``).
        why_no_identity: the reason there is no identity instance.
        data: a pandas frame of microdata to tabulate the examples from (default: the suite's).
        by: the spanning variables of the example table (default: the suite's).
    """

    typical: tuple[Any, ...]
    identity: Any = None
    why_no_identity: str = ""
    data: Any = None
    by: tuple[str, ...] | None = None


class Method:
    """Base of every method; see the module docstring. Subclasses are frozen keyword-only
    dataclasses of declared parameters and override :meth:`validate` for rules that involve
    several parameters."""

    #: the name the registry, the CLI, config files and the service know the method by
    name: ClassVar[str] = ""
    #: "table" or "microdata"
    kind: ClassVar[str] = ""
    #: what the method promises with its default parameters (:mod:`tabsafe.capabilities`);
    #: :meth:`capabilities` refines it where a parameter changes a promise
    declared: ClassVar[Capabilities] = Capabilities()
    #: names of the publishable side tables the method's report carries (``Report.tables``;
    #: PRAM's ``transitions``): the CLI plans their files beside the output before any work
    side_tables: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # a class written before capabilities were declared says ``random = True``: read it as
        # the declaration it is, so that ``random`` has one source (the capabilities)
        legacy = vars(cls).get("random")
        if isinstance(legacy, bool):
            cls.declared = replace(cls.declared, random=legacy)
            delattr(cls, "random")

    def __post_init__(self) -> None:
        _params.check_all(self)
        self.validate()

    def validate(self) -> None:
        """Checks that involve several parameters (each alone is checked by its constraint)."""

    # -- the declared side ------------------------------------------------------------------
    @classmethod
    def parameters(cls) -> tuple[_params.ParamInfo, ...]:
        """The declared parameters: name, constraint, default and help."""
        return _params.parameters(cls)

    def params(self) -> dict[str, Any]:
        """Every parameter's value as JSON: what the report records, what :meth:`from_params`
        reads."""
        return _params.to_params(self)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Method:
        """Build the method from JSON values (a config file, a service request)."""
        return _params.from_params(cls, params, where=f"method {cls.name!r}")

    @classmethod
    def summary(cls) -> str:
        """The first line of the class docstring."""
        doc = (cls.__doc__ or "").strip()
        return doc.splitlines()[0].strip() if doc else ""

    @classmethod
    def examples(cls) -> Examples:
        """Small examples for the contract suite; every registered method gives some."""
        raise NotImplementedError(f"method {cls.name!r} gives no examples for the contract suite")

    def needs(self) -> Needs:
        """What tabulation must provide (keys, sums, microdata)."""
        return Needs()

    # -- the promised side ------------------------------------------------------------------
    def capabilities(self) -> Capabilities:
        """What this method, with these parameters, promises (:class:`~tabsafe.capabilities.
        Capabilities`): the class's ``declared`` value with the stage its base class sets.
        Override (calling ``super()``) where a parameter changes a promise; the contract suite
        checks every promise made."""
        return replace(self.declared, stage="micro" if self.kind == "microdata" else "table")

    @property
    def random(self) -> bool:
        """Whether the result depends on the seed (read from :meth:`capabilities`)."""
        return self.capabilities().random

    def reading(self) -> Reading:
        """How an intruder reads a published value (hidden cells' least value, rounding base):
        what the release audit of the published files may assume. Methods that hide cells or
        publish multiples of a base say so."""
        return Reading()

    def follow(self, previous: Method) -> Method:
        """This method as a later step of a chain after ``previous`` (default: unchanged). A step
        that must keep a promise of the step before it takes it from ``previous.reading()`` here:
        additivity after the cell key method keeps values ``1..js`` out (issue #31)."""
        return self

    def memory_estimate(self, table: Table) -> int:
        """Bytes the method needs on ``table`` by its memory model (checked against the job's
        budget before it starts; :mod:`tabsafe.memory`). The default fits methods that keep a few
        arrays per stored cell; methods that work on the whole grid or build programs say more."""
        return table.n_stored * (16 + 8 * len(table.value_columns)) * 3

    def _seed(self, seed: int | None) -> int | None:
        """The run's seed to record (drawn when a random method is given none; None when the
        method is deterministic)."""
        seed = check_seed(seed)
        if not self.random:
            return None
        return draw_seed() if seed is None else seed

    @staticmethod
    def _stream(used: int | None, step: int) -> int | None:
        """The seed ``apply`` draws from: step ``step`` of the run (:func:`tabsafe.seeds.stream_seed`)."""
        return None if used is None else stream_seed(used, step)


class TableMethod(Method):
    """A method that protects a table (see the module docstring)."""

    kind: ClassVar[str] = "table"

    def protect(self, table: Table, *, seed: int | None = None, step: int = 0) -> Protection:
        """Protect ``table``; a random method without a seed draws one and records it.

        ``seed`` is the run's seed (the one recorded); the noise comes from the stream of step
        ``step`` of that run (0: the method alone or first in a chain; :mod:`tabsafe.seeds`)."""
        from tabsafe.model.table import VALUE_COLUMN, Table

        if not isinstance(table, Table):
            raise InputError(f"method {self.name!r} protects a Table; got {type(table).__name__}")
        from tabsafe import memory

        used = self._seed(seed)
        memory.check(f"method {self.name!r} on {table.n_cells:,} cells", self.memory_estimate(table))
        progress.report("protection", method=self.name, cells=table.n_cells)
        out = self.apply(table, self._stream(used, step))
        if not isinstance(out, Outcome):
            raise TypeError(f"method {self.name!r}: apply() must return an Outcome")
        cells = out.cells
        if out.value not in out.release:
            raise TypeError(f"method {self.name!r}: the release has no {out.value!r}")
        main = {} if out.value == "count" else {VALUE_COLUMN: out.value}
        release = Table(cells.dimensions, cells.ids, dict(out.release), {**_meta(cells), **main}, _checked=True)
        evaluation = Table(
            cells.dimensions, cells.ids, {"count": cells.counts, "original": cells.counts, **out.evaluation},
            _meta(cells), _checked=True,
        )
        report = Report(method=self.name, params=self.params(), seed=used, figures=out.figures,
                        private=out.private, notes=out.notes)
        return Protection(release=Release(release), evaluation=evaluation, report=report)

    def apply(self, table: Table, seed: int | None) -> Outcome:
        """The protection itself (subclasses); ``seed`` is None for deterministic methods."""
        raise NotImplementedError


class MicrodataMethod(Method):
    """A method that perturbs microdata before tabulation (see the module docstring)."""

    kind: ClassVar[str] = "microdata"

    def perturb(self, microdata: Microdata, *, seed: int | None = None, engine: Any = None,
                step: int = 0) -> MicrodataProtection:
        """Perturb the records; a random method without a seed draws one and records it
        (``seed`` and ``step`` as in :meth:`TableMethod.protect`).

        ``engine``: ``None`` or an embedded engine (one that reads the records into this
        process, :attr:`tabsafe.engines.base.Engine.embedded`) perturbs in this process; another
        engine, by name or as an object, runs the method's form for that engine
        (:meth:`apply_on`) — the same result for the same seed."""
        from tabsafe.model.microdata import Microdata

        if not isinstance(microdata, Microdata):
            raise InputError(f"method {self.name!r} perturbs Microdata; got {type(microdata).__name__}")
        used = self._seed(seed)
        stream = self._stream(used, step)
        progress.report("protection", method=self.name)
        if engine is None:
            out = self.apply(microdata, stream)
        else:
            from tabsafe.engines import get_engine

            runner = get_engine(engine)
            out = (self.apply(microdata, stream) if getattr(runner, "embedded", False)
                   else self.apply_on(runner, microdata, stream))
        if not isinstance(out, MicrodataOutcome):
            raise TypeError(f"method {self.name!r}: apply() must return a MicrodataOutcome")
        report = Report(method=self.name, params=self.params(), seed=used, figures=out.figures,
                        private=out.private, notes=out.notes, tables=out.tables)
        name = f"{microdata.source.describe()} ({self.name})"
        weight = out.weight or microdata.weight
        if hasattr(out.data, "describe"):  # records an engine holds (a Source)
            perturbed = Microdata(source=out.data, codelists=microdata.codelists, key=microdata.key, weight=weight)
        else:
            perturbed = Microdata.from_frame(out.data, name=name, codelists=microdata.codelists, key=microdata.key,
                                             weight=weight)
        return MicrodataProtection(microdata=perturbed, evaluation=out.evaluation, report=report)

    def apply(self, microdata: Microdata, seed: int | None) -> MicrodataOutcome:
        """The perturbation itself (subclasses)."""
        raise NotImplementedError

    def apply_on(self, engine: Any, microdata: Microdata, seed: int | None) -> MicrodataOutcome:
        """The perturbation on ``engine`` (methods with a distributed form override it; their
        result must be :meth:`apply`'s for the same seed)."""
        from tabsafe.engines import DEFAULT_ENGINE

        raise InputError(f"method {self.name!r} runs in this process only: it has no form for the "
                         f"{engine.name!r} engine; run it with the embedded engine ({DEFAULT_ENGINE!r})")

    def columns(self) -> tuple[str, ...] | None:
        """The variables the method reads and may change, or None (every variable). A caller may
        give the method only these and put the perturbed ones back into the full records
        (``tabsafe swap`` streams large files this way); the result must not depend on the
        other variables."""
        return None


@runtime_checkable
class CellDistribution(Protocol):
    """A method that publishes each cell it perturbs on its own from the cell's true count alone
    (and randomness independent of other cells): the transition ``P(published | true n)``.

    The cell key method (its p-table), random, conventional and small-cell rounding,
    barnardisation and the ABS cell perturbation have one. It describes the cells the method
    perturbs on their own — every cell for the cell key method and rounding, the inner cells
    when margins are sums of perturbed inner cells. With it, the expected information gain of a
    perturbation (seed 001 §5) and the risk of differencing two such cells (001 §4) are computed
    exactly instead of by simulation (:mod:`tabsafe.evaluate.distribution`).
    """

    def published_distribution(self, n: int) -> Mapping[int, float] | None:
        """``{published value: probability}`` for a cell of true count ``n >= 0`` (the values
        sum to 1); ``None`` when these parameters publish cells some other way (e.g. a mode
        that selects cells jointly)."""
        ...


def _meta(table: Table) -> dict[str, Any]:
    from tabsafe.model.table import thaw

    return thaw(table.meta)
