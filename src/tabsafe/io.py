"""Reading side files and writing outputs: checked first, written atomically, releases apart.

Every command's outputs go through one :class:`Outputs` transaction: every path is checked
before any work is written (the folder exists, the path is not a folder, not one of the
command's inputs, not named twice), each file is written to a temporary file beside its target,
and all are renamed into place together only when every one is complete — an error or Ctrl-C
leaves nothing partial behind and nothing overwritten.

The rule every written path obeys is one function, :func:`check_output`: a path is never one of
the command's inputs nor a file an input names (the ``meta.yaml`` beside the data, the files a
manifest or config lists), never a file that already exists unless the user said ``--force``, and
its folder exists. Temporary files and folders are named ``.NAME.tabsafe-PID-…``; ones a killed
run left (its process is gone) are removed the next time the same output is written.

A *release* file holds the published values of a :class:`~tabsafe.model.result.Release` only and
gets the permissions the user's umask gives; an *evaluation* file (original counts, cell keys,
why a cell is suppressed) is written only when asked for and is private to the user (mode 0600).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tabsafe._yaml import load_yaml, load_yaml_shared
from tabsafe.errors import InputError, param

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from tabsafe.model.hierarchy import Hierarchy
    from tabsafe.model.result import Release
    from tabsafe.model.table import Table

#: Grids up to this many cells are written whole (zeros included) when ``zero_cells="auto"``;
#: larger ones list only their non-zero cells (a missing cell is zero).
AUTO_DENSE_CELLS = 5_000_000

ZERO_CELLS = ("auto", "all", "omit")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


#: Whether an existing file may be replaced (``--force``). Library calls replace (a Python caller
#: names its files deliberately); the command line sets it from ``--force`` (:func:`replacing`).
_REPLACE: contextvars.ContextVar[bool] = contextvars.ContextVar("tabsafe_replace", default=True)

#: What tells tabsafe's temporary files and folders from anything else: ``.NAME.tabsafe-PID-…``.
TEMP_TAG = ".tabsafe-"


@contextlib.contextmanager
def replacing(allowed: bool) -> Iterator[None]:
    """Within the block, existing outputs are replaced only if ``allowed`` (the CLI's ``--force``)."""
    token = _REPLACE.set(bool(allowed))
    try:
        yield
    finally:
        _REPLACE.reset(token)


def referenced_files(inputs: Iterable[str | os.PathLike[str] | None]) -> list[Path]:
    """The inputs and every file they name: a data file's ``meta.yaml`` and the hierarchy files it
    lists; for a YAML input (a release manifest, a config, an audit spec), every string in it that
    names an existing file beside it. No output may be one of them."""
    out: list[Path] = []
    seen: set[Path] = set()  # a meta.yaml both given and found beside the data is read once
    for item in inputs:
        if not item or Path(item) in seen:
            continue
        path = Path(item)
        seen.add(path)
        out.append(path)
        meta = path.parent / "meta.yaml"
        if path.suffix.lower() in {".parquet", ".pq", ".csv"} and meta.is_file():
            out.append(meta)
            if meta not in seen:
                seen.add(meta)
                out += _named_in_yaml(meta)
        elif path.suffix.lower() in {".yaml", ".yml"} and path.is_file():
            out += _named_in_yaml(path)
    return out


def _named_in_yaml(path: Path) -> list[Path]:
    """Files a small YAML file names (strings that are paths of existing files, relative to it)."""
    try:
        if path.stat().st_size > 1_000_000:
            return []
        data = load_yaml_shared(path.read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - an unreadable file is the reader's error to report, not this guard's
        return []
    found: list[Path] = []
    stack: list[Any] = [data]
    while stack and len(found) < 10_000:
        item = stack.pop()
        if isinstance(item, Mapping):
            stack += list(item.values())
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str) and 0 < len(item) < 4096 and "\n" not in item and _looks_like_a_file(item):
            with contextlib.suppress(OSError, ValueError):
                candidate = Path(item) if Path(item).is_absolute() else path.parent / item
                if candidate.is_file():
                    found.append(candidate)
    return found


def _looks_like_a_file(text: str) -> bool:
    """A string a YAML file may name a file with: it holds a path separator or ends in a file
    suffix. Codelists (thousands of codes such as ``R1A001`` in a census's meta.yaml) are not
    looked up on disk one by one: that cost a second at every command's start."""
    if "/" in text or os.sep in text:
        return True
    suffix = text.rpartition(".")[2] if "." in text else ""
    return 0 < len(suffix) <= 8 and suffix.isalpha()


def check_output(path: str | os.PathLike[str], *, inputs: Sequence[Path] = (), planned: Iterable[Path] = (),
                 option: str = "out") -> Path:
    """The one rule for a path a command writes (module docstring); returns it as a Path or raises
    one :class:`InputError` naming the option and the path."""
    target = Path(path)
    where = str(target)
    if not target.name or target.name in {".", ".."}:
        raise InputError(f"{param(option)} needs a file name, not a folder", where=where)
    if target.is_dir():
        raise InputError(f"{param(option)} is a folder; give a file name", where=where)
    if not target.parent.exists():
        raise InputError("output folder does not exist", where=str(target.parent))
    if not target.parent.is_dir():
        raise InputError("output folder is not a folder", where=str(target.parent))
    for inp in inputs:
        if _same(target, inp):
            raise InputError(f"{param(option)} is an input of this command or a file its inputs name; it would be "
                             "overwritten", where=where)
    for other in planned:
        if _same(target, other):
            raise InputError(f"{param(option)} names a file another output of this command writes", where=where)
    if target.exists() and not target.is_file():  # a device, a pipe: never replaced, not even with --force
        raise InputError(f"{param(option)} names something that is not a regular file", where=where)
    if (target.exists() or target.is_symlink()) and not _REPLACE.get():
        raise InputError(f"{param(option)} exists; give --force to replace it (tabsafe replaces no file unasked)",
                         where=where)
    if not os.access(target.parent, os.W_OK):
        raise InputError("output folder is not writable", where=str(target.parent))
    clean_stale(target.parent, target.name)
    return target


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def clean_stale(folder: Path, name: str) -> None:
    """Remove the temporary files and folders of ``name`` that a killed run left in ``folder``
    (``.NAME.tabsafe-PID-…`` whose process is gone)."""
    prefix = f".{name}{TEMP_TAG}"
    try:
        entries = [e for e in folder.iterdir() if e.name.startswith(prefix)]
    except OSError:
        return
    for entry in entries:
        pid_text = entry.name[len(prefix):].split("-", 1)[0]
        if not pid_text.isdigit() or _alive(int(pid_text)):
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()


def temp_prefix(name: str) -> str:
    """The prefix of this process's temporary file or folder for the output ``name``."""
    return f".{name}{TEMP_TAG}{os.getpid()}-"


class Outputs:
    """The files one command writes, checked up front and committed together.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with Outputs() as out:
    ...     p = out.plan(d / "a.txt")
    ...     out.write_text(p, "hello")
    >>> (d / "a.txt").read_text()
    'hello'
    """

    def __init__(self, inputs: Sequence[str | os.PathLike[str] | None] = ()) -> None:
        self.inputs = referenced_files(inputs)
        self.planned: dict[Path, str] = {}
        self.temps: dict[Path, Path] = {}
        self.committed: list[Path] = []

    def plan(self, path: str | os.PathLike[str], *, kind: str = "release", option: str = "out") -> Path:
        """Check ``path`` as an output before any work is done; ``kind`` is ``release`` (umask)
        or ``evaluation`` (private)."""
        target = check_output(path, inputs=self.inputs, planned=self.planned, option=option)
        self.planned[target] = kind
        return target

    @contextlib.contextmanager
    def open(self, path: Path) -> Iterator[Path]:
        """A temporary path to write ``path``'s content to (committed with the others)."""
        if path not in self.planned:
            raise RuntimeError(f"output {path} was not planned")  # pragma: no cover - a bug
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path.name), suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmp_path = Path(tmp)
        self.temps[path] = tmp_path
        try:
            yield tmp_path
        except BaseException:
            self._drop(path)
            raise

    def write_text(self, path: Path, text: str) -> None:
        with self.open(path) as tmp:
            tmp.write_text(text, encoding="utf-8", newline="\n")

    def write_arrow(self, path: Path, data: pa.Table) -> None:
        fmt = output_format(path)
        with self.open(path) as tmp:
            _write_arrow(data, tmp, fmt)

    def _drop(self, path: Path) -> None:
        tmp = self.temps.pop(path, None)
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def commit(self) -> list[Path]:
        """Give every file its permissions and rename all into place."""
        missing = [p for p in self.planned if p not in self.temps]
        if missing:
            raise RuntimeError(f"output {missing[0]} was planned but not written")  # pragma: no cover
        mode = 0o666 & ~_umask()
        for path, tmp in self.temps.items():
            os.chmod(tmp, 0o600 if self.planned[path] == "evaluation" else mode)
        try:
            for path, tmp in list(self.temps.items()):
                os.replace(tmp, path)
                self.committed.append(path)
                del self.temps[path]
        except BaseException:
            # a failed rename (disk full, Ctrl-C) must not leave temporary files behind
            self.abort()
            raise
        return self.committed

    def abort(self) -> None:
        for path in list(self.temps):
            self._drop(path)

    def __enter__(self) -> Outputs:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, kind: str = "release") -> Iterator[Path]:
    """One output, written to a temporary file and renamed into place only if the block succeeds."""
    with Outputs() as out:
        target = out.plan(path, kind=kind)
        with out.open(target) as tmp:
            yield tmp


def output_format(path: str | os.PathLike[str]) -> str:
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in {".parquet", ".pq"}:
        return "parquet"
    raise InputError(f"unknown output format {suffix or '(none)'!r}; use .csv or .parquet", where=str(path))


def _write_arrow(data: pa.Table, tmp: Path, fmt: str) -> None:
    if fmt == "csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(data, tmp)
    else:
        import pyarrow.parquet as pq

        # column statistics cost half the writing time and serve no reader of a table
        pq.write_table(data, tmp, write_statistics=False)


def write_frame(data: pa.Table, path: str | os.PathLike[str], *, kind: str = "release") -> Path:
    """Write an Arrow table as CSV or Parquet (by extension), atomically."""
    fmt = output_format(path)
    with atomic_path(path, kind=kind) as tmp:
        _write_arrow(data, tmp, fmt)
    return Path(path)


def _with_zeros(table: Table, zero_cells: str) -> Table:
    if zero_cells not in ZERO_CELLS:
        raise InputError(f"{param('zero_cells')} must be one of {', '.join(ZERO_CELLS)}; got {zero_cells!r}")
    if zero_cells == "all" or (zero_cells == "auto" and table.n_cells <= AUTO_DENSE_CELLS):
        return table.densify()
    return table


def release_arrow(release: Release, *, zero_cells: str = "auto") -> pa.Table:
    """The Arrow table of a release: the cells and their published columns.

    Without every grid cell (``zero_cells="omit"``, or ``"auto"`` on a grid above
    :data:`AUTO_DENSE_CELLS`), a release lists the cells whose published ``count`` is not zero:
    which cells were stored says which have records, so it must not show through.
    """
    import numpy as np

    from tabsafe.model.result import Release

    if not isinstance(release, Release):
        raise TypeError("a release file is written from a Release")
    table = _with_zeros(release.table, zero_cells)
    if not table.is_dense:
        counts = table.counts  # the main value column (a magnitude release: its totals)
        keep = np.isnan(counts) | (counts != 0) if counts.dtype.kind == "f" else counts != 0
        table = table.take(keep)
    return table.to_arrow()


def evaluation_arrow(table: Table, columns: Sequence[str] | None = None, *, zero_cells: str = "auto") -> pa.Table:
    """The Arrow table of an evaluation output (original values allowed)."""
    table = _with_zeros(table, zero_cells)
    return table.to_arrow(columns)


def write_release(release: Release, path: str | os.PathLike[str], *, zero_cells: str = "auto") -> Path:
    """Write a release file (published values only; permissions from the umask)."""
    return write_frame(release_arrow(release, zero_cells=zero_cells), path, kind="release")


def write_evaluation(table: Table, path: str | os.PathLike[str], columns: Sequence[str] | None = None, *,
                     zero_cells: str = "auto") -> Path:
    """Write an evaluation file (original values, keys; private to the user)."""
    return write_frame(evaluation_arrow(table, columns, zero_cells=zero_cells), path, kind="evaluation")


def write_table(table: Table, path: str | os.PathLike[str], *, columns: Sequence[str] | None = None,
                evaluation: bool = True, zero_cells: str = "auto") -> Path:
    """Write a table of original values: always an evaluation output (kept for callers of the
    earlier API; releases are written from a Release with :func:`write_release`)."""
    if not evaluation:
        raise InputError("a Table holds original values: write a Release for publication")
    return write_evaluation(table, path, columns, zero_cells=zero_cells)


def read_meta(path: str | os.PathLike[str], *, only: Sequence[str] | None = None) -> dict[str, Hierarchy]:
    """Read a data set's ``meta.yaml``: the codelist (flat) of every declared variable (of the
    variables in ``only``, when given).

    The file's ``hierarchies`` section only names hierarchy files that may be passed with
    ``--hierarchy``; declared codelists are flat, so tables get subtotals only when asked.
    """
    import yaml

    from tabsafe.model.hierarchy import Hierarchy

    path = Path(path)
    try:
        data = load_yaml_shared(path.read_text(encoding="utf-8")) or {}  # read only
    except OSError as exc:
        raise InputError(f"cannot read metadata: {exc.strerror}", where=str(path)) from None
    except (yaml.YAMLError, UnicodeDecodeError):
        raise InputError("metadata is not valid YAML", where=str(path)) from None
    variables = data.get("variables") if isinstance(data, Mapping) else None
    if not isinstance(variables, Mapping):
        raise InputError("metadata needs a 'variables' mapping", where=str(path))
    out: dict[str, Hierarchy] = {}
    for name, spec in variables.items():
        if only is not None and str(name) not in only:
            continue
        codes: Any = spec.get("codes") if isinstance(spec, Mapping) else spec
        if not isinstance(codes, list):
            raise InputError(f"variable {name!r} needs a list of codes", where=str(path))
        out[str(name)] = Hierarchy.flat(codes, source=f"{path.name}:{name}")
    return out


def read_labels(path: str | os.PathLike[str]) -> dict[str, dict[str, str]]:
    """The code labels a ``meta.yaml`` declares (variable → code → label), if any."""
    try:
        data = load_yaml(Path(path).read_text(encoding="utf-8")) or {}
    except Exception:  # noqa: BLE001 - labels are optional decoration
        return {}
    out: dict[str, dict[str, str]] = {}
    for name, spec in (data.get("variables") or {}).items():
        if isinstance(spec, Mapping) and isinstance(spec.get("labels"), Mapping):
            out[str(name)] = {str(k): str(v) for k, v in spec["labels"].items()}
    return out


def write_json(path: str | os.PathLike[str], payload: Any, *, kind: str = "release") -> Path:
    import json

    text = json.dumps(payload, indent=2, default=str) + "\n"
    with atomic_path(path, kind=kind) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)



class OutputFolder:
    """A folder a command fills (``synth``, ``demo``), built in a temporary folder beside it and
    moved into place only when complete.

    The folder may be new, empty, or hold only files this command writes (``owned``: relative
    paths such as ``"hierarchies/area.hrc"``; an entry ending in ``/`` owns a whole folder, e.g. a
    Parquet folder Spark writes) — those are a run before this one, and are replaced. A folder
    with anything else in it, at any depth (``--out .``, a folder of the user's, a hierarchy file
    the user put in ``hierarchies/``), is refused before any work: a command never deletes what it
    did not create. The temporary folder is ``.NAME.tabsafe-PID-…``; one a killed run left is
    removed by the next run.
    """

    def __init__(self, path: str | os.PathLike[str], owned: Sequence[str], *, option: str = "out") -> None:
        target = Path(path)
        where = str(target)
        if target.is_symlink() or target.exists() and not target.is_dir():
            raise InputError(f"{param(option)} is a file, not a folder", where=where)
        if target.exists():
            others = _foreign(target, owned)
            if others:
                raise InputError(
                    f"{param(option)} holds {len(others)} entr{'y' if len(others) == 1 else 'ies'} this command did "
                    f"not write (e.g. {others[0]!r}); give a new or empty folder", where=where)
        parent = target.resolve().parent
        if not parent.exists():
            raise InputError("the folder's parent does not exist", where=str(parent))
        if not os.access(parent, os.W_OK):
            raise InputError("the folder's parent is not writable", where=str(parent))
        self.target = target
        self.owned = tuple(owned)
        self.tmp: Path | None = None

    def __enter__(self) -> Path:
        parent = self.target.resolve().parent
        name = self.target.resolve().name
        clean_stale(parent, name)
        self.tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(name), dir=parent))
        return self.tmp

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        assert self.tmp is not None
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        try:
            self._move()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _move(self) -> None:
        assert self.tmp is not None
        mode = 0o777 & ~_umask()
        os.chmod(self.tmp, mode)
        if not self.target.exists():
            os.replace(self.tmp, self.target)
            return
        others = _foreign(self.target, self.owned)  # checked again: the user may have added files meanwhile
        if others:
            raise InputError(f"the folder gained an entry this command did not write ({others[0]!r}) while it ran; "
                             "nothing was replaced", where=str(self.target))
        for entry in sorted(self.tmp.iterdir()):
            dest = self.target / entry.name
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)  # holds only owned files (checked above)
            elif dest.exists() or dest.is_symlink():
                dest.unlink()
            os.replace(entry, dest)


def _foreign(target: Path, owned: Sequence[str]) -> list[str]:
    """Entries under ``target`` (relative paths) that are not among ``owned`` (module
    :class:`OutputFolder`); folders on the way to an owned entry are not foreign."""
    whole = {o.rstrip("/") for o in owned if o.endswith("/")}
    files = {o for o in owned if not o.endswith("/")}
    prefixes = {str(Path(o).parent.as_posix()) for o in files | whole} | {
        "/".join(Path(o).parts[:i]) for o in files | whole for i in range(1, len(Path(o).parts))}
    out: list[str] = []
    for root, dirs, names in os.walk(target):
        base = Path(root).relative_to(target)
        for d in list(dirs):
            rel = (base / d).as_posix()
            if rel in whole and not os.path.islink(os.path.join(root, d)):
                dirs.remove(d)  # a folder the command owns whole (e.g. Spark's Parquet folder)
            elif rel not in prefixes or os.path.islink(os.path.join(root, d)):
                out.append(rel)
                dirs.remove(d)
        out += [(base / n).as_posix() for n in names if (base / n).as_posix() not in files]
    return sorted(out)


def _is_log(path: Path) -> bool:
    """Whether ``path`` is empty or a log tabsafe wrote (its last line a JSON event with ``what``)."""
    import json

    size = path.stat().st_size
    if size == 0:
        return True
    with open(path, "rb") as f:
        f.seek(max(0, size - 65536))
        tail = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    try:
        record = json.loads(tail.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return False
    return isinstance(record, dict) and "what" in record and "t" in record


@contextlib.contextmanager
def log_file(path: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str] | None] = ()) -> Iterator[Any]:
    """The ``--log-json`` stream: a new file, or a tabsafe log to append to (a log never loses
    lines); never an input nor a file an input names, never a file of another kind. When the
    command fails the lines it added are taken back (a file it made is removed), so a failed
    command leaves nothing behind."""
    target = Path(path)
    where = str(target)
    if target.is_dir():
        raise InputError(f"{param('log_json')} is a folder; give a file name", where=where)
    for inp in referenced_files(inputs):
        if _same(target, inp):
            raise InputError(f"{param('log_json')} is an input of this command or a file its inputs name",
                             where=where)
    if not target.parent.is_dir():
        raise InputError("output folder does not exist", where=str(target.parent))
    existed = target.exists()
    if existed and (not target.is_file() or not _is_log(target)):
        raise InputError(f"{param('log_json')} names a file that is not a tabsafe log; give a new file", where=where)
    try:
        size = target.stat().st_size if existed else 0
        stream = open(target, "a", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot open the log: {exc.strerror}", where=where) from None
    try:
        yield stream
    except BaseException:
        stream.close()
        with contextlib.suppress(OSError):
            if existed:
                os.truncate(target, size)
            else:
                target.unlink()
        raise
    stream.close()
