"""One configuration dialect: how tabsafe reads its YAML files and reports what is wrong in them.

The release spec (:mod:`tabsafe.release.spec`), the evaluation config
(:mod:`tabsafe.evaluate.config`), the differencing spec (:mod:`tabsafe.risk.differencing`) and the
service settings (:mod:`tabsafe.service.settings`) are read through this module, so they share:

- :func:`read_yaml`: the file read as UTF-8 YAML with a safe loader, after guards against what
  would take a process down instead of giving an error — a file larger than
  :data:`MAX_BYTES`, nesting deeper than :data:`MAX_DEPTH`, and aliases that expand to more
  than :data:`MAX_VALUES` values (an "alias bomb": a few lines that a reader walking the
  values expands exponentially). Every failure is one line naming the file (and the line of
  a YAML error).
- :func:`check_keys`: an unknown key is an error naming the key, where it is and the closest
  known key ("did you mean").
- :func:`resolve_path`: a relative path in a file is relative to the file's folder.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tabsafe.errors import InputError

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_VALUES", "check_keys", "did_you_mean", "read_yaml", "resolve_path"]

#: The largest configuration file read (a release of hundreds of tables is a few kilobytes).
MAX_BYTES = 4 * 2**20
#: The deepest nesting of mappings and lists.
MAX_DEPTH = 64
#: The most values a file may stand for once its aliases are expanded.
MAX_VALUES = 1_000_000


def _loader() -> Any:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _scan(text: str, where: str) -> None:
    """Depth and expanded size from the YAML events (a flat stream: nothing here recurses, so a
    deep file cannot overflow the stack before it is refused). The size of an anchored value is
    kept under its anchor; an alias adds that size again, as a reader walking the values would."""
    import yaml

    sizes: dict[str, int] = {}
    stack: list[list[Any]] = []  # per open collection: [values inside it and itself, its anchor]

    def add(n: int) -> None:
        if (stack[-1][0] + n if stack else n) > MAX_VALUES:
            raise InputError(f"the file stands for more than {MAX_VALUES:,} values once its aliases are expanded",
                             where=where)
        if stack:
            stack[-1][0] += n

    for event in yaml.parse(text, Loader=_loader()):
        if isinstance(event, yaml.AliasEvent):
            if event.anchor not in sizes:  # an alias inside its own anchor: a cycle
                raise InputError(f"alias *{event.anchor} refers to a value that contains it", where=where)
            add(sizes[event.anchor])
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                sizes[event.anchor] = 1
            add(1)
        elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            stack.append([1, event.anchor])
            if len(stack) > MAX_DEPTH:
                raise InputError(f"nested more than {MAX_DEPTH} levels deep", where=where)
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            count, anchor = stack.pop()
            if anchor is not None:
                sizes[anchor] = count
            add(count)


def read_yaml(path: str | os.PathLike[str], *, what: str = "configuration") -> Any:
    """The YAML file at ``path`` (module docstring); ``what`` names it in errors."""
    import yaml

    path = Path(path)
    where = str(path)
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise InputError(f"the {what} is a folder, not a file", where=where)
        if size > MAX_BYTES:
            raise InputError(f"a {what} file has at most {MAX_BYTES // 2**20} MiB; this one has {size:,} bytes",
                             where=where)
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"cannot read the {what}: no such file", where=where) from None
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {exc.strerror}", where=where) from None
    except UnicodeDecodeError:
        raise InputError(f"the {what} is not UTF-8 text", where=where) from None
    try:
        _scan(text, where)
        return yaml.load(text, Loader=_loader())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None)
        raise InputError(f"the {what} is not valid YAML{at}" + (f": {problem}" if problem else ""),
                         where=where) from None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest known name, or nothing."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_keys(mapping: Mapping[Any, Any], known: Iterable[str], where: str, *, inside: str = "") -> None:
    """Refuse the first key of ``mapping`` not in ``known`` (in sorted order): one line naming
    it, the closest known key and all known keys. ``inside`` names the mapping (e.g. "table 2")."""
    known = set(known)
    unknown = sorted(str(k) for k in mapping if str(k) not in known)
    if unknown:
        place = f"{inside}: " if inside else ""
        raise InputError(f"{place}unknown key {unknown[0]!r}{did_you_mean(unknown[0], known)}; "
                         f"known: {', '.join(sorted(known))}", where=where)


def resolve_path(value: Any, base: str | os.PathLike[str], what: str, where: str) -> Path:
    """A file named in a configuration file: relative to the file's folder ``base``. ``what``
    names the value in an error (e.g. ``"'data'"``)."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{what} must be a file name; got {value!r}", where=where)
    p = Path(value)
    return p if p.is_absolute() else Path(base) / p
