"""The ``tabsafe`` command: one subcommand per job, each a thin shell over the library.

User errors (:class:`~tabsafe.errors.TabsafeError`) print one line to stderr — parameters named
as the command's options — and exit non-zero; Ctrl-C prints one line and exits 130 (outputs are
committed only at the end, so nothing partial is left). Anything else is a bug and keeps its
traceback.

Nothing heavy is imported here: a command's module is imported when that command runs (or its
help is asked for), so ``tabsafe --help`` answers at once.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from tabsafe.errors import TabsafeError, as_flag

#: command -> (module with add_arguments/run, one-line help). Modules load only when used.
COMMANDS: dict[str, tuple[str, str]] = {
    "synth": ("tabsafe.cli.synth", "write a synthetic census (persons, households, hierarchies)"),
    "tabulate": ("tabsafe.cli.tabulate", "a table with every margin and subtotal"),
    "keys": ("tabsafe.cli.keys", "attach record keys to microdata (for the cell key method)"),
    "ptable": ("tabsafe.cli.ptable", "generate a cell key method p-table"),
    "protect": ("tabsafe.cli.protect", "protect a table with registered methods (one, or a chain)"),
    "swap": ("tabsafe.cli.swap", "swap households' geography (targeted or random) or PRAM microdata before tabulation"),
    "risk": ("tabsafe.cli.risk", "flag unsafe cells (threshold, dominance, coalitions, zeros)"),
    "audit": ("tabsafe.cli.audit", "differencing audit of tables released together"),
    "measure": ("tabsafe.cli.measure", "exact risk of a method: information gain, differencing risk (JSON)"),
    "evaluate": ("tabsafe.cli.evaluate", "methods side by side on the same tables: one HTML report"),
    "serve": ("tabsafe.cli.serve", "the table builder: HTTP API and web page, every table protected"),
    "keys-admin": ("tabsafe.cli.keys_admin", "users and API keys of the table builder; its audit log"),
    "demo": ("tabsafe.cli.demo", "the main job end to end on synthetic data"),
    "argus": ("tabsafe.cli.argus", "run a tau-ARGUS batch file (.arb) headless, saying what each command became"),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, like every other user error
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def _command_in(argv: Sequence[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
        if arg in {"-h", "--help", "--version"}:
            return None
    return None


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; only the command named in ``argv`` gets its options (its module imported)."""
    from tabsafe import __version__

    parser = _Parser(prog="tabsafe", description="Protect frequency tables for release.")
    parser.add_argument("--version", action="version", version=f"tabsafe {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    wanted = _command_in(argv)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        if name == wanted:
            importlib.import_module(module).add_arguments(p, argv)
            _add_job_arguments(p)
    return parser


def _add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """Options every command has: feedback and the memory budget."""
    g = parser.add_argument_group("job")
    taken = {opt for action in parser._actions for opt in action.option_strings}
    if "--quiet" not in taken:  # a command may define it itself
        g.add_argument("--quiet", action="store_true", help="print nothing but errors")
    g.add_argument("--log-json", metavar="FILE",
                   help="append one JSON line per progress event to FILE (machine-readable log; a new file, or "
                        "an earlier tabsafe log; removed again, or cut back, when the command fails)")
    if "--force" not in taken:
        g.add_argument("--force", action="store_true",
                       help="replace output files that exist (never an input, nor a file an input names)")
    g.add_argument("--memory-limit", metavar="SIZE",
                   help="memory the job may use, e.g. 8GB (default: half of the machine); larger jobs are refused")


def inputs(args: argparse.Namespace) -> list[str]:
    """Every file the command's options name as something to read (for the log's check)."""
    names = ("data", "table", "meta", "release", "config", "spec", "job", "ptable", "matrix", "keys")
    found = [str(v) for n in names for v in [getattr(args, n, None)] if isinstance(v, (str, os.PathLike))]
    for item in getattr(args, "hierarchy", None) or []:
        found += [p.partition("=")[2].strip() for p in str(item).split(",") if "=" in p]
    return found


def _run(mod: object, args: argparse.Namespace) -> int:
    """Run a command with its feedback (progress on a terminal, JSON log) and memory budget."""
    import contextlib

    from tabsafe import io, memory, progress

    listeners: list[progress.Listener] = []
    terminal = progress.Terminal() if not args.quiet and sys.stderr.isatty() else None
    if terminal is not None:
        listeners.append(terminal)
    with contextlib.ExitStack() as stack:
        if terminal is not None:
            stack.enter_context(progress.clearing(terminal))
        stack.enter_context(io.replacing(bool(getattr(args, "force", False))))
        if args.log_json:
            listeners.append(progress.JsonLines(stack.enter_context(io.log_file(args.log_json, inputs(args)))))
        if args.quiet:
            stack.enter_context(contextlib.redirect_stdout(stack.enter_context(open(os.devnull, "w", encoding="utf-8"))))
        stack.enter_context(memory.limited(args.memory_limit))
        stack.enter_context(progress.reporting(*listeners))
        return int(mod.run(args) or 0)  # type: ignore[attr-defined]


def main(argv: Sequence[str] | None = None) -> int:
    # OpenBLAS starts one spinning thread per core when numpy is imported (0.1 s of CPU per
    # command on 2 cores, more on big servers) for dense algebra tabsafe hardly does: its work is
    # in DuckDB, HiGHS and sparse elimination. A user's own setting is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(argv)
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help, --version, or a usage error already printed in one line
            return exc.code if isinstance(exc.code, int) else 2
        if args.command is None:
            parser.print_help()
            return 2
        mod = importlib.import_module(args._module)
        return _run(mod, args)
    except TabsafeError as exc:
        print(f"tabsafe: error: {exc.render(as_flag)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tabsafe: interrupted; nothing was written", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # the machine's refusal (disk full, permission, a vanished file): one line
        print(f"tabsafe: error: {_os_error(exc)}; nothing was written", file=sys.stderr)
        return 1
    except RecursionError:
        print("tabsafe: error: an input is nested too deeply to read (a filter, a YAML or JSON file); nothing "
              "was written", file=sys.stderr)
        return 2
    except MemoryError:
        print("tabsafe: error: out of memory (the job's memory model did not foresee this; give a smaller table or "
              "--memory-limit); nothing was written", file=sys.stderr)
        return 1


def _os_error(exc: OSError) -> str:
    """An operating-system error as one line: what failed and where, never a file's content."""
    import errno

    what = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded"}.get(
        exc.errno or 0, (exc.strerror or type(exc).__name__).lower())
    where = exc.filename if isinstance(exc.filename, (str, bytes, os.PathLike)) else None
    return f"{os.fsdecode(where)}: {what}" if where else what


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
