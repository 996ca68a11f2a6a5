"""Codelists and the hierarchies above them.

A :class:`Hierarchy` is the codelist of one categorical variable together with the tree of
aggregates built on it: leaves are the codes found in microdata, inner nodes are subtotals
(area above small area, broad age band above band) and the root is the variable's grand total,
``Total`` by convention (METHODS.md §1). A flat codelist is a hierarchy of depth one.

Codes are always strings, unique across all levels of one hierarchy (tau-ARGUS makes the same
demand), and listed in *display order*: the root first, then depth first, each parent before its
children. Tables use that order for their rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from tabsafe.errors import InputError, shown, shown_list

TOTAL = "Total"


def _code(value: Any) -> str:
    """Codes are strings; YAML may hand us ints (``1``) that mean the code ``"1"``."""
    if isinstance(value, bool) or value is None:
        raise InputError(f"code {shown(value)} is not a valid category code")
    text = str(value).strip()
    if not text:
        raise InputError("empty category code")
    return text


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """A codelist with its tree of aggregates.

    Attributes:
        parents: every code except the root mapped to its parent code; top-level codes map to
            ``total``.
        order: all codes in display order, the root first.
        total: the code of the root (the variable's grand total).
        source: where the hierarchy came from (a file name), used in error messages.
    """

    parents: Mapping[str, str]
    order: tuple[str, ...]
    total: str = TOTAL
    source: str = "hierarchy"
    _children: Mapping[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        children: dict[str, list[str]] = {code: [] for code in self.order}
        if not self.order or self.order[0] != self.total:
            raise InputError(f"{self.source}: the root {self.total!r} must come first")
        if len(set(self.order)) != len(self.order):
            dup = next(c for i, c in enumerate(self.order) if c in self.order[:i])
            raise InputError(f"{self.source}: code {shown(dup)} appears more than once")
        for code in self.order[1:]:
            parent = self.parents.get(code)
            if parent is None:
                raise InputError(f"{self.source}: code {shown(code)} has no parent")
            if parent not in children:
                raise InputError(f"{self.source}: parent {shown(parent)} of {shown(code)} is not a code")
            children[parent].append(code)
        if set(self.parents) - set(self.order):
            extra = sorted(set(self.parents) - set(self.order))[0]
            raise InputError(f"{self.source}: code {shown(extra)} is not in the display order")
        _check_acyclic(self.parents, self.total, self.source)
        object.__setattr__(self, "_children", {k: tuple(v) for k, v in children.items()})

    # ----------------------------------------------------------------- constructors
    @classmethod
    def flat(cls, codes: Iterable[Any], *, total: str = TOTAL, source: str = "codelist") -> Hierarchy:
        """A one-level hierarchy: every code is a leaf directly under the total."""
        leaves = [_code(c) for c in codes]
        if not leaves:
            raise InputError(f"{source}: empty codelist")
        if total in leaves:
            raise InputError(f"{source}: a code may not be named {total!r} (the total's code)")
        return cls({c: total for c in leaves}, (total, *leaves), total, source)

    @classmethod
    def from_tree(cls, tree: Any, *, total: str = TOTAL, source: str = "hierarchy") -> Hierarchy:
        """Build from a nested structure: a list of leaves, or a mapping code -> children.

        >>> h = Hierarchy.from_tree({"R1": ["A1", "A2"], "R2": {"A3": None}})
        >>> h.order
        ('Total', 'R1', 'A1', 'A2', 'R2', 'A3')
        """
        parents: dict[str, str] = {}
        order: list[str] = [total]

        def walk(node: Any, parent: str) -> None:
            if node is None:
                return
            if isinstance(node, Mapping):
                items: Iterable[tuple[Any, Any]] = node.items()
            elif isinstance(node, (list, tuple)):
                items = [(x, None) if not isinstance(x, Mapping) else next(iter(x.items())) for x in node]
                for x in node:
                    if isinstance(x, Mapping) and len(x) != 1:
                        raise InputError(f"{source}: a list entry must be a code or one 'code: children'")
            else:
                items = [(node, None)]
            for key, sub in items:
                code = _code(key)
                if code == total:
                    raise InputError(f"{source}: a code may not be named {total!r} (the total's code)")
                if code in parents:
                    raise InputError(
                        f"{source}: code {code!r} appears under both {parents[code]!r} and {parent!r}"
                        if parents[code] != parent
                        else f"{source}: code {code!r} appears twice under {parent!r}"
                    )
                parents[code] = parent
                order.append(code)
                walk(sub, code)

        walk(tree, total)
        if len(order) == 1:
            raise InputError(f"{source}: empty hierarchy")
        return cls(parents, tuple(order), total, source)

    @classmethod
    def from_parents(
        cls, parents: Mapping[Any, Any], *, total: str = TOTAL, source: str = "hierarchy"
    ) -> Hierarchy:
        """Build from a code -> parent mapping (parent ``None`` or ``total`` for top-level codes)."""
        mapping = {_code(k): (total if v is None else _code(v)) for k, v in parents.items()}
        _check_acyclic(mapping, total, source)
        children: dict[str, list[str]] = {}
        for code, parent in mapping.items():
            if parent != total and parent not in mapping:
                raise InputError(f"{source}: parent {shown(parent)} of {shown(code)} is not a code")
            children.setdefault(parent, []).append(code)
        order: list[str] = []
        stack = [total]
        while stack:
            code = stack.pop()
            order.append(code)
            stack.extend(reversed(children.get(code, [])))
        return cls(mapping, tuple(order), total, source)

    @classmethod
    def from_hrc(cls, path: str | os.PathLike[str], *, total: str = TOTAL) -> Hierarchy:
        """Read a tau-ARGUS ``.hrc`` file: one code per line, one leading ``@`` per level below
        the top."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8-sig")
        except OSError as exc:
            raise InputError(f"cannot read hierarchy file: {exc.strerror}", where=str(path)) from None
        return cls.from_hrc_text(text, total=total, source=path.name)

    @classmethod
    def from_hrc_text(cls, text: str, *, total: str = TOTAL, source: str = "hrc") -> Hierarchy:
        """Parse the text of a tau-ARGUS ``.hrc`` file (see :meth:`from_hrc`)."""
        parents: dict[str, str] = {}
        order: list[str] = [total]
        stack: list[str] = [total]  # stack[d] = current code at depth d (root at 0)
        for lineno, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line:
                continue
            depth = len(line) - len(line.lstrip("@")) + 1
            code = line.lstrip("@").strip()
            if not code:
                raise InputError(f"{source} line {lineno}: empty code")
            if depth > len(stack):
                raise InputError(
                    f"{source} line {lineno}: {shown(code)} is {depth - len(stack) + 1} levels below the "
                    "line before it (each level adds one '@')"
                )
            del stack[depth:]
            parent = stack[-1]
            if code == total:
                raise InputError(f"{source} line {lineno}: a code may not be named {total!r}")
            if code in parents:
                raise InputError(
                    f"{source} line {lineno}: code {shown(code)} appears again "
                    f"(under {shown(parents[code])} and {shown(parent)}); every code needs exactly one parent"
                )
            parents[code] = parent
            order.append(code)
            stack.append(code)
        if len(order) == 1:
            raise InputError(f"{source}: empty hierarchy")
        return cls(parents, tuple(order), total, source)

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str], *, total: str = TOTAL) -> Hierarchy:
        """Read a YAML hierarchy: a list of codes (flat) or a nested mapping code -> children.

        A mapping with the single key ``parents`` is read as code -> parent pairs instead.
        """
        import yaml

        from tabsafe._yaml import load_yaml

        path = Path(path)
        try:
            data = load_yaml(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(f"cannot read hierarchy file: {exc.strerror}", where=str(path)) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" line {mark.line + 1}" if mark else ""
            raise InputError(f"{path.name}{at}: not valid YAML") from None
        if isinstance(data, Mapping) and set(data) == {"parents"}:
            return cls.from_parents(data["parents"], total=total, source=path.name)
        return cls.from_tree(data, total=total, source=path.name)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, total: str = TOTAL) -> Hierarchy:
        """Read ``.hrc`` or YAML by the file's extension."""
        suffix = Path(path).suffix.lower()
        if suffix == ".hrc":
            return cls.from_hrc(path, total=total)
        if suffix in {".yaml", ".yml"}:
            return cls.from_yaml(path, total=total)
        raise InputError(f"unknown hierarchy format {suffix!r} (use .hrc, .yaml or .yml)", where=str(path))

    # ----------------------------------------------------------------- exports
    def to_hrc(self) -> str:
        """The tau-ARGUS ``.hrc`` text of this hierarchy (the root is implicit)."""
        return "".join("@" * (self.depth(c) - 1) + c + "\n" for c in self.order[1:])

    def to_tree(self) -> Any:
        """The nested structure :meth:`from_tree` reads (leaves under a parent as a list)."""

        def sub(code: str) -> Any:
            kids = self.children(code)
            if all(self.is_leaf(k) for k in kids):
                return list(kids)
            return {k: (sub(k) if not self.is_leaf(k) else None) for k in kids}

        return sub(self.total)

    # ----------------------------------------------------------------- queries
    def children(self, code: str) -> tuple[str, ...]:
        return self._children[code]

    def is_leaf(self, code: str) -> bool:
        return not self._children[code]

    @cached_property
    def leaves(self) -> tuple[str, ...]:
        """Codes without children, in display order: the codelist of the microdata."""
        return tuple(c for c in self.order if not self._children[c])

    @cached_property
    def _depths(self) -> dict[str, int]:
        depths = {self.total: 0}
        for code in self.order[1:]:
            depths[code] = depths[self.parents[code]] + 1
        return depths

    def depth(self, code: str) -> int:
        """0 for the total, 1 for top-level codes, and so on."""
        return self._depths[code]

    @property
    def max_depth(self) -> int:
        return max(self._depths.values())

    def ancestors(self, code: str) -> tuple[str, ...]:
        """The chain from ``code`` up to, and including, the total."""
        chain = [code]
        while chain[-1] != self.total:
            chain.append(self.parents[chain[-1]])
        return tuple(chain)

    @cached_property
    def position(self) -> dict[str, int]:
        """Code -> index in :attr:`order`."""
        return {c: i for i, c in enumerate(self.order)}

    @cached_property
    def families(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """Every additive relation of the hierarchy as positions in :attr:`order`: ``(parent,
        children)`` for each code with children, in display order (the root's family first), so
        that walking them in reverse sums children's subtotals before their parent reads them."""
        pos = self.position
        return tuple((pos[code], tuple(pos[c] for c in self._children[code]))
                     for code in self.order if self._children[code])

    def __len__(self) -> int:
        return len(self.order)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Hierarchy) and (self.order, dict(self.parents), self.total) == (
            other.order,
            dict(other.parents),
            other.total,
        )

    def __hash__(self) -> int:
        return hash((self.order, self.total))

    def check_codelist(self, codelist: Sequence[str], *, variable: str) -> None:
        """Every leaf must be a code of the variable's codelist."""
        known = set(codelist)
        missing = [c for c in self.leaves if c not in known]
        if missing:
            shown = shown_list(missing, 3)
            raise InputError(
                f"{self.source}: {len(missing)} leaf code(s) not in the codelist of {variable!r}: {shown}"
            )


def _check_acyclic(parents: Mapping[str, str], total: str, source: str) -> None:
    """Follow every chain of parents; a chain that does not reach the total is a cycle."""
    state: dict[str, int] = {}
    for start in parents:
        path: list[str] = []
        code = start
        while code != total and state.get(code) != 2:
            if state.get(code) == 1:
                cycle = path[path.index(code):] + [code]
                raise InputError(f"{source}: cycle in hierarchy: {' -> '.join(cycle)}")
            state[code] = 1
            path.append(code)
            if code not in parents:
                break
            code = parents[code]
        for c in path:
            state[c] = 2
