"""Declared parameters: what each field of a method (or other value object) may be.

A method's parameters are keyword-only fields of a frozen dataclass, each made with
:func:`parameter` and a :class:`Constraint` (scikit-learn's ``_param_validation`` is the model).
From the declaration alone follow: validation with one sentence naming the parameter, what is
allowed and what was given; ``params()`` (JSON values, what the report records); ``from_params``
(config files, the service); and the command-line options (name, type, choices, help).

The help text of a field is its entry in the class docstring's ``Attributes:`` section, so the
documentation is written once.

>>> Int(min=1).check("base", 0)
Traceback (most recent call last):
...
tabsafe.errors.InputError: parameter 'base' must be an integer >= 1; got 0
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass
from enum import Enum
from typing import Any

from tabsafe.errors import InputError, param

__all__ = [
    "Bool",
    "Choice",
    "Constraint",
    "File",
    "Int",
    "Optional",
    "Real",
    "Text",
    "TextList",
    "field_docs",
    "parameter",
    "parameters",
]


def _fail(name: str, allowed: str, value: Any) -> InputError:
    shown = value.value if isinstance(value, Enum) else value
    return InputError(f"parameter {param(name)} must be {allowed}; got {shown!r}")


class Constraint:
    """What one parameter may be: checks and normalises values, converts to and from JSON and
    from command-line text."""

    #: What the parameter may be, in words ("an integer >= 1").
    allowed: str = "a value"
    #: The metavar on the command line.
    metavar: str = "VALUE"

    def check(self, name: str, value: Any) -> Any:
        """The normalised value, or an :class:`InputError` naming ``name``."""
        raise NotImplementedError

    def to_json(self, value: Any) -> Any:
        return value

    def from_json(self, name: str, value: Any) -> Any:
        return self.check(name, value)

    def from_text(self, name: str, text: str) -> Any:
        return self.check(name, text)

    @property
    def choices(self) -> tuple[str, ...] | None:
        return None

    @property
    def is_flag(self) -> bool:
        return False

    @property
    def repeatable(self) -> bool:
        return False

    @property
    def is_file(self) -> bool:
        """The value names a file the method reads (an input a command must never overwrite)."""
        return False


@dataclass(frozen=True)
class Int(Constraint):
    """An integer within ``[min, max]`` (either end may be open-ended)."""

    min: int | None = None
    max: int | None = None
    metavar: str = "N"

    @property
    def allowed(self) -> str:  # type: ignore[override]
        if self.min is not None and self.max is not None:
            return f"an integer in {self.min}..{self.max}"
        if self.min is not None:
            return f"an integer >= {self.min}"
        if self.max is not None:
            return f"an integer <= {self.max}"
        return "an integer"

    def check(self, name: str, value: Any) -> int:
        if isinstance(value, bool) or not _is_integral(value):
            raise _fail(name, self.allowed, value)
        v = int(value)
        if (self.min is not None and v < self.min) or (self.max is not None and v > self.max):
            raise _fail(name, self.allowed, value)
        if not -INT64_MAX <= v <= INT64_MAX:  # every count and base is a 64-bit integer in numpy
            raise _fail(name, f"{self.allowed} of at most 64 bits", value)
        return v

    def from_text(self, name: str, text: str) -> int:
        try:
            return self.check(name, int(text.strip()))
        except ValueError:
            raise _fail(name, self.allowed, text) from None


#: the largest integer a parameter may be (numpy's int64)
INT64_MAX = 2**63 - 1


def _is_integral(value: Any) -> bool:
    import numbers

    if isinstance(value, numbers.Integral):
        return True
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return True
    return False


@dataclass(frozen=True)
class Real(Constraint):
    """A finite number within bounds; ``min_open``/``max_open`` exclude the bound itself."""

    min: float | None = None
    max: float | None = None
    min_open: bool = False
    max_open: bool = False
    metavar: str = "X"

    @property
    def allowed(self) -> str:  # type: ignore[override]
        lo = None if self.min is None else (f"> {self.min:g}" if self.min_open else f">= {self.min:g}")
        hi = None if self.max is None else (f"< {self.max:g}" if self.max_open else f"<= {self.max:g}")
        if lo and hi:
            left = "(" if self.min_open else "["
            right = ")" if self.max_open else "]"
            return f"a number in {left}{self.min:g}, {self.max:g}{right}"
        return "a finite number" + (f" {lo or hi}" if (lo or hi) else "")

    def check(self, name: str, value: Any) -> float:
        import numbers

        try:
            v = float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else math.nan
        except OverflowError:  # an integer beyond every float
            v = math.nan
        if not math.isfinite(v):
            raise _fail(name, self.allowed, value)
        if self.min is not None and (v < self.min or (self.min_open and v == self.min)):
            raise _fail(name, self.allowed, value)
        if self.max is not None and (v > self.max or (self.max_open and v == self.max)):
            raise _fail(name, self.allowed, value)
        return int(v) if isinstance(value, numbers.Integral) else v

    def from_text(self, name: str, text: str) -> float:
        try:
            number = float(text.strip())
        except ValueError:
            raise _fail(name, self.allowed, text) from None
        return self.check(name, int(number) if number.is_integer() and "." not in text and "e" not in text.lower()
                          else number)


@dataclass(frozen=True)
class Bool(Constraint):
    """True or False (a flag on the command line)."""

    allowed: str = "true or false"

    def check(self, name: str, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        if type(value).__name__ == "bool_":  # numpy
            return bool(value)
        raise _fail(name, self.allowed, value)

    def from_text(self, name: str, text: str) -> bool:
        low = text.strip().lower()
        if low in {"true", "yes", "1", "on"}:
            return True
        if low in {"false", "no", "0", "off"}:
            return False
        raise _fail(name, self.allowed, text)

    @property
    def is_flag(self) -> bool:
        return True


@dataclass(frozen=True)
class Choice(Constraint):
    """One of a set of names; with an Enum the value becomes the Enum member."""

    options: tuple[str, ...] | type[Enum]
    metavar: str = "NAME"

    @property
    def names(self) -> tuple[str, ...]:
        if isinstance(self.options, type) and issubclass(self.options, Enum):
            return tuple(str(m.value) for m in self.options)
        return tuple(self.options)

    @property
    def allowed(self) -> str:  # type: ignore[override]
        return "one of " + ", ".join(self.names)

    def check(self, name: str, value: Any) -> Any:
        raw = value.value if isinstance(value, Enum) else value
        if not isinstance(raw, str) or raw not in self.names:
            raise _fail(name, self.allowed, value)
        if isinstance(self.options, type) and issubclass(self.options, Enum):
            return self.options(raw)
        return raw

    def to_json(self, value: Any) -> Any:
        return value.value if isinstance(value, Enum) else value

    @property
    def choices(self) -> tuple[str, ...]:
        return self.names


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


@dataclass(frozen=True)
class Text(Constraint):
    """A non-empty string; ``identifier`` restricts it to a column name."""

    identifier: bool = False
    metavar: str = "TEXT"

    @property
    def allowed(self) -> str:  # type: ignore[override]
        return "a column name" if self.identifier else "a non-empty text"

    def check(self, name: str, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise _fail(name, self.allowed, value)
        if self.identifier and not _NAME.match(value):
            raise _fail(name, self.allowed, value)
        return value


@dataclass(frozen=True)
class File(Constraint):
    """The path of a file the method reads (checked for existence when the method reads it)."""

    suffixes: tuple[str, ...] = ()
    metavar: str = "FILE"

    @property
    def allowed(self) -> str:  # type: ignore[override]
        return "a file name" + (f" ending in {' or '.join(self.suffixes)}" if self.suffixes else "")

    def check(self, name: str, value: Any) -> str:
        import os

        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if not isinstance(value, str) or not value.strip():
            raise _fail(name, self.allowed, value)
        if self.suffixes and not value.lower().endswith(tuple(s.lower() for s in self.suffixes)):
            raise _fail(name, self.allowed, value)
        return value

    @property
    def is_file(self) -> bool:
        return True


@dataclass(frozen=True)
class TextList(Constraint):
    """A tuple of names (``a,b,c`` on the command line, or the option repeated)."""

    identifier: bool = True
    min_items: int = 1
    repeat: bool = False
    metavar: str = "A,B"

    @property
    def allowed(self) -> str:  # type: ignore[override]
        what = "column names" if self.identifier else "texts"
        return f"a list of at least {self.min_items} {what}" if self.min_items > 1 else f"a list of {what}"

    def check(self, name: str, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [p.strip() for p in value.split(",")]
        if not isinstance(value, (list, tuple)):
            raise _fail(name, self.allowed, value)
        items = tuple(value)
        if len(items) < self.min_items or any(not isinstance(v, str) or not v.strip() for v in items):
            raise _fail(name, self.allowed, value)
        if self.identifier and any(not _NAME.match(v) for v in items):
            raise _fail(name, self.allowed, value)
        if len(set(items)) != len(items):
            dup = next(v for i, v in enumerate(items) if v in items[:i])
            raise InputError(f"parameter {param(name)} names {dup!r} twice")
        return items

    def to_json(self, value: Any) -> Any:
        return list(value)

    def from_text(self, name: str, text: str) -> tuple[str, ...]:
        return self.check(name, text)

    @property
    def repeatable(self) -> bool:
        return self.repeat


@dataclass(frozen=True)
class Optional(Constraint):
    """``None`` (the parameter is off) or a value of ``inner``."""

    inner: Constraint

    @property
    def allowed(self) -> str:  # type: ignore[override]
        return f"{self.inner.allowed} or none"

    @property
    def metavar(self) -> str:  # type: ignore[override]
        return self.inner.metavar

    def check(self, name: str, value: Any) -> Any:
        if value is None:
            return None
        try:
            return self.inner.check(name, value)
        except InputError:
            raise _fail(name, self.allowed, value) from None

    def to_json(self, value: Any) -> Any:
        return None if value is None else self.inner.to_json(value)

    def from_json(self, name: str, value: Any) -> Any:
        return None if value is None else self.inner.from_json(name, value)

    def from_text(self, name: str, text: str) -> Any:
        if text.strip().lower() in {"none", "off"}:
            return None
        return self.inner.from_text(name, text)

    @property
    def choices(self) -> tuple[str, ...] | None:
        return self.inner.choices

    @property
    def is_flag(self) -> bool:
        return False

    @property
    def repeatable(self) -> bool:
        return self.inner.repeatable

    @property
    def is_file(self) -> bool:
        return self.inner.is_file


def parameter(default: Any = MISSING, *, check: Constraint, factory: Callable[[], Any] | None = None) -> Any:
    """A declared parameter: a dataclass field carrying its :class:`Constraint`.

    Its help text is the field's entry in the class docstring's ``Attributes:`` section.
    """
    meta = {"constraint": check}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class ParamInfo:
    """One declared parameter: name, constraint, default (``MISSING`` if required) and help."""

    name: str
    constraint: Constraint
    default: Any
    help: str

    @property
    def required(self) -> bool:
        return self.default is MISSING


def parameters(cls: type) -> tuple[ParamInfo, ...]:
    """The declared parameters of a dataclass, in field order."""
    docs = field_docs(cls)
    out = []
    for f in dataclasses.fields(cls):
        constraint = f.metadata.get("constraint")
        if constraint is None or not f.init:
            continue
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else MISSING)  # type: ignore[misc]
        out.append(ParamInfo(f.name, constraint, default, docs.get(f.name, "")))
    return tuple(out)


_ATTR_LINE = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)\s*(?:\([^)]*\))?:\s*(.*)$")


def field_docs(cls: type) -> dict[str, str]:
    """Field name → help text, from the ``Attributes:`` sections of ``cls`` and its bases.

    ``name: text`` lines, continued by more deeply indented lines; ``a, b: text`` documents two
    fields at once.
    """
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        doc = inspect.getdoc(klass) if klass.__dict__.get("__doc__") else None
        if doc:
            out.update(_parse_attributes(doc))
    return out


def _parse_attributes(doc: str) -> dict[str, str]:
    lines = doc.splitlines()
    out: dict[str, str] = {}
    inside = False
    names: list[str] = []
    base_indent = None
    for line in lines:
        stripped = line.strip()
        if stripped in {"Attributes:", "Parameters:"}:
            inside = True
            names = []
            base_indent = None
            continue
        if not inside:
            continue
        if not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        if base_indent is None:
            base_indent = indent
        if indent < base_indent or (indent == 0 and stripped.endswith(":") and " " not in stripped):
            inside = False
            continue
        m = _ATTR_LINE.match(line)
        if indent == base_indent and m:
            names = [n.strip() for n in m.group(2).split(",")]
            for n in names:
                out[n] = m.group(3).strip()
        elif names:
            for n in names:
                out[n] = (out[n] + " " + stripped).strip()
    return out


def check_all(obj: Any) -> None:
    """Validate and normalise every declared field of a frozen dataclass instance in place."""
    for f in dataclasses.fields(obj):
        constraint = f.metadata.get("constraint")
        if constraint is None:
            continue
        value = getattr(obj, f.name)
        object.__setattr__(obj, f.name, constraint.check(f.name, value))


def to_params(obj: Any) -> dict[str, Any]:
    """The JSON values of every declared field (what a report records)."""
    return {
        f.name: f.metadata["constraint"].to_json(getattr(obj, f.name))
        for f in dataclasses.fields(obj) if "constraint" in f.metadata and f.init
    }


def from_params(cls: type, params: Mapping[str, Any], *, where: str | None = None) -> Any:
    """Build ``cls`` from JSON values; an unknown key is an error naming the known ones."""
    if not isinstance(params, Mapping):
        raise InputError(f"parameters must be a mapping of names to values; got {type(params).__name__}",
                         where=where)
    known = {p.name: p for p in parameters(cls)}
    unknown = [k for k in params if k not in known]
    if unknown:
        raise InputError(f"unknown parameter {unknown[0]!r}; known: {', '.join(known) or 'none'}", where=where)
    values = {k: known[k].constraint.from_json(k, v) for k, v in params.items()}
    missing = [k for k, p in known.items() if p.required and k not in values]
    if missing:
        raise InputError(f"parameter {param(missing[0])} is required", where=where)
    try:
        return cls(**values)
    except InputError as exc:
        if where and not exc.where:
            exc.where = where
        raise


def describe(infos: Iterable[ParamInfo]) -> list[dict[str, Any]]:
    """A JSON description of parameters (service catalogue, docs)."""
    out = []
    for p in infos:
        entry: dict[str, Any] = {"name": p.name, "allowed": p.constraint.allowed, "help": p.help}
        if not p.required:
            entry["default"] = p.constraint.to_json(p.default) if p.default is not None else None
        if p.constraint.choices:
            entry["choices"] = list(p.constraint.choices)
        out.append(entry)
    return out


def names(infos: Sequence[ParamInfo]) -> tuple[str, ...]:
    return tuple(p.name for p in infos)
