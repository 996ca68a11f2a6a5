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
    "audit": ("tabsafe.risk.audit_cli", "differencing audit of tables released together"),
    "demo": ("tabsafe.cli.demo", "the main job end to end on synthetic data"),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, like every other user error
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        if argv[:1] == ["protect"] and {"-h", "--help"} & set(argv) and "--method" in argv[:-1]:
            # `tabsafe protect --method M --help`: the method's own options.
            from tabsafe.cli.protect import method_parser

            method_parser(argv[argv.index("--method") + 1]).print_help()
            return 0
        args, rest = parser.parse_known_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        mod = importlib.import_module(args._module)
        if rest and not getattr(mod, "ACCEPTS_EXTRA", False):
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        args._extra = rest
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
