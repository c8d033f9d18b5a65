"""Argument parsing shared by every command line of the project.

Bad arguments exit 254 (the project's exit code for them), not argparse's 2, which means
"unknown" in a verdict.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_BAD_ARGS = 254
EXIT_INTERNAL = 255


class UsageError(ValueError):
    """Bad arguments a command finds after parsing; `run_subcommands` prints its usage and exits 254."""


def non_negative(text: str) -> int:
    """An argparse type: a whole number, 0 or more."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative; pass 0 or more")
    return value


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that exits 254 with a usage message on bad arguments."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_ARGS, f"{self.prog}: error: {message}\n")


def run_subcommands(
    prog: str, description: str, commands: dict[str, str], argv: Sequence[str] | None = None
) -> int:
    """Dispatch `prog COMMAND ...` to modules that define `add_arguments(parser)` and `run(args)`.

    `commands` maps a command name to the module implementing it; modules are imported
    only when their command runs, so one command's imports never slow another. Every bad
    argument of a command, also an unknown flag or a `UsageError` its `run` raises, exits 254
    with that command's usage.
    """
    parser = Parser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parsers: dict[str, Parser] = {}
    for name, module_name in commands.items():
        module = importlib.import_module(module_name) if name == chosen else None
        doc = (module.__doc__ or "").strip().splitlines()[0] if module and module.__doc__ else None
        p = parsers[name] = sub.add_parser(name, help=doc, description=doc)
        if module is not None:
            module.add_arguments(p)
            p.set_defaults(_run=module.run)
    args, unknown = parser.parse_known_args(argv)
    command = parsers[args.command]
    if unknown:
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    runner: Callable[[argparse.Namespace], int] = args._run
    try:
        return runner(args)
    except UsageError as e:
        command.error(str(e))
