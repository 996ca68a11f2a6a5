"""The ``tabsafe`` command: one subcommand per job, each a thin shell over the library.

User errors (:class:`~tabsafe.errors.TabsafeError`) print one line to stderr and exit non-zero;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from tabsafe.errors import TabsafeError

#: command -> (module with add_arguments/run, one-line help). Modules load only when used.
COMMANDS: dict[str, tuple[str, str]] = {
    "synth": ("tabsafe.cli.synth", "write a synthetic census (persons, households, hierarchies)"),
    "tabulate": ("tabsafe.cli.tabulate", "a table with every margin and subtotal"),
    "keys": ("tabsafe.cli.keys", "attach record keys to microdata (for the cell key method)"),
    "ptable": ("tabsafe.protect.ptable_cli", "generate a cell key method p-table"),
    "protect": ("tabsafe.cli.protect", "protect a table with a registered method"),
    "risk": ("tabsafe.risk.cli", "flag unsafe cells (threshold, dominance, coalitions, zeros)"),
    "audit": ("tabsafe.risk.differencing_cli", "differencing audit of tables released together"),
    "demo": ("tabsafe.cli.demo", "the main job end to end on synthetic data"),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, like every other user error
        self.exit(2, f"{self.prog}: error: {message}\n")


def _method_in(argv: Sequence[str]) -> str | None:
    """The value of ``--method`` in a ``protect`` command line, if any."""
    for i, arg in enumerate(argv):
        if arg == "--method" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--method="):
            return arg.split("=", 1)[1]
    return None


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    from tabsafe import __version__

    parser = _Parser(prog="tabsafe", description="Protect frequency tables for release.")
    parser.add_argument("--version", action="version", version=f"tabsafe {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or not (module == exc.name or module.startswith(exc.name + ".")):
                raise
            sub._name_parser_map.pop(name, None)  # not built yet in this version
            sub._choices_actions = [a for a in sub._choices_actions if a.dest != name]
            continue
        mod.add_arguments(p)
        if name == "protect" and argv[:1] == ["protect"] and (method := _method_in(argv)):
            # The method's own options join the command's, so argparse knows every option and
            # `--help` lists them; an unknown method is reported when the command runs.
            from tabsafe.registry import get_method

            try:
                entry = get_method(method)
            except TabsafeError:
                continue
            entry.add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        mod = importlib.import_module(args._module)
        return int(mod.run(args) or 0)
    except TabsafeError as exc:
        print(f"tabsafe: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tabsafe: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
