"""Argument parsing shared by every command line of the project.

Bad arguments exit 254 (the project's exit code for them), not argparse's 2, which means
"unknown" in a verdict.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
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
    only when their command runs, so one command's imports never slow another (the list of
    commands in `prog --help` reads each one's `summary` from its module's source). Every bad
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
        if module is not None:
            doc = summary(name, getattr(module, "SUMMARIES", None), module.__doc__)
        elif chosen not in commands:  # the list of commands is shown: each one's line, read unimported
            doc = source_summary(name, module_name)
        else:
            doc = None
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


def summary(name: str, summaries: object, doc: str | None) -> str | None:
    """What command `name` does, for its `--help` and the list of commands: the module's
    `SUMMARIES[name]` (a module serving several commands), else its docstring's first paragraph."""
    if isinstance(summaries, dict) and isinstance(summaries.get(name), str):
        return summaries[name]
    return " ".join(doc.strip().split("\n\n")[0].split()) if doc and doc.strip() else None


def source_summary(name: str, module_name: str) -> str | None:
    """`summary` read from the module's source without importing it (so listing the commands
    never imports what they need)."""
    try:
        spec = importlib.util.find_spec(module_name)
        if spec is None or spec.origin is None:
            return None
        with open(spec.origin, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (ImportError, OSError, SyntaxError, ValueError):
        return None
    summaries = None
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "SUMMARIES" for t in targets):
            try:
                summaries = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError):
                summaries = None
    return summary(name, summaries, ast.get_docstring(tree))
