"""Command-line options generated from a method's declared parameters.

Each declared parameter ``name`` becomes ``--name`` (underscores as dashes), with its help from
the method's docstring, what it may be, and its default; the value is converted and checked by
the parameter's constraint, so a bad value gets the same one-line error as in Python. No method
writes argparse code.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from tabsafe.errors import InputError, as_flag, param

_PREFIX = "method__"


def _help(p: Any) -> str:
    text = p.help.rstrip(".") if p.help else p.name.replace("_", " ")
    if p.constraint.choices:
        text += f"; one of {', '.join(p.constraint.choices)}"
    if not p.required and p.default is not None and not p.constraint.is_flag:
        shown = p.constraint.to_json(p.default)
        if isinstance(shown, list):
            shown = ",".join(map(str, shown))
        if shown != "":  # an empty list as default says nothing
            text += f" (default {shown})"
    return text.replace("%", "%%")


def add_method_options(parser: argparse.ArgumentParser, methods: Sequence[type]) -> None:
    """Add the options of each method (a parameter two methods share is one option setting both)."""
    seen: set[str] = set()
    taken = {opt for action in parser._actions for opt in action.option_strings}
    for cls in methods:
        group = parser.add_argument_group(f"method {cls.name}", cls.summary())
        for p in cls.parameters():
            if p.name in seen:
                continue
            seen.add(p.name)
            flag = as_flag(p.name)
            if flag in taken:
                raise TypeError(f"method {cls.name!r}: parameter {p.name!r} clashes with the command option {flag}")
            c = p.constraint
            kwargs: dict[str, Any] = {"dest": _PREFIX + p.name, "default": None, "help": _help(p)}
            if c.is_flag:
                if p.default is True:
                    group.add_argument(flag, action=argparse.BooleanOptionalAction, **kwargs)
                else:
                    group.add_argument(flag, action="store_true", **{**kwargs, "default": None})
                continue
            kwargs["metavar"] = "{" + ",".join(c.choices) + "}" if c.choices else c.metavar
            if c.repeatable:
                kwargs["action"] = "append"
            if p.required:
                kwargs["help"] += " (required)"
            group.add_argument(flag, **kwargs)


def method_from_args(cls: type, args: argparse.Namespace) -> Any:
    """Build a method from parsed options; unset options keep the method's defaults."""
    values: dict[str, Any] = {}
    for p in cls.parameters():
        raw = getattr(args, _PREFIX + p.name, None)
        if raw is None:
            continue
        c = p.constraint
        if c.is_flag:
            values[p.name] = bool(raw)
        elif c.repeatable:
            values[p.name] = c.from_text(p.name, ",".join(raw))
        else:
            values[p.name] = c.from_text(p.name, raw)
    missing = [p.name for p in cls.parameters() if p.required and p.name not in values]
    if missing:
        raise InputError(f"method {cls.name!r} needs {param(missing[0])}")
    return cls(**values)


def given(cls: type, args: argparse.Namespace) -> list[str]:
    """The parameters of ``cls`` set on the command line."""
    return [p.name for p in cls.parameters() if getattr(args, _PREFIX + p.name, None) is not None]


def files_read(methods: Sequence[object]) -> list[str]:
    """The files the methods' parameters name (inputs: no output may overwrite them)."""
    out = []
    for m in methods:
        for p in type(m).parameters():  # type: ignore[attr-defined]
            value = getattr(m, p.name)
            if p.constraint.is_file and isinstance(value, str):
                out.append(value)
    return out


def methods_in(argv: Sequence[str]) -> list[str]:
    """The names given to ``--method`` on a command line."""
    for i, arg in enumerate(argv):
        if arg == "--method" and i + 1 < len(argv):
            return [p.strip() for p in argv[i + 1].split(",") if p.strip()]
        if arg.startswith("--method="):
            return [p.strip() for p in arg.split("=", 1)[1].split(",") if p.strip()]
    return []
