"""The documentation against the code: docs/commands.md against the command-line parsers, and the
example commands of README.md and docs/ against the parsers and the fault catalogue.

The commands are discovered from each entry point's `COMMANDS` (what `nodes.cliparse.run_subcommands`
builds its parser from), so a new command or option without docs fails here, and so does a
documented option that no longer exists.

docs/commands.md's shape, which this test reads: one heading "`python -m TOOL COMMAND`" per
command; in its section, tables whose first cell is the option in backticks (`--name METAVAR`, or
a positional's METAVAR) and a `default` column; the sentence "Takes every option of `python -m
TOOL OTHER` except `--x`, and:" stands for OTHER's options but those named.
"""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from harness.chaos import flags
from harness.chaos.modes import MODES
from nemesis import catalogue
from nodes.cliparse import Parser, run_subcommands, source_summary, summary

REPO = Path(__file__).resolve().parents[2]
COMMANDS_MD = REPO / "docs" / "commands.md"
TOOLS = ("harness", "checkers", "nodes")
HEADING = re.compile(r"^#{2,3} `python -m (\w+)(?: ([\w-]+))?`\s*$")
INHERITS = re.compile(r"^Takes every option of `python -m (\w+) ([\w-]+)`(.*)$")
POSITIONAL = re.compile(r"^[A-Z][A-Z0-9_]*$")
# Defaults that depend on the machine or the environment: the docs say how, not the value here.
MACHINE_DEFAULTS = {("nodes", "simulate-many", "--jobs"), ("harness", "image", "--base-image")}

Command = tuple[str, str]


def commands_of(tool: str) -> dict[str, str]:
    return importlib.import_module(f"{tool}.__main__").COMMANDS


ALL: list[Command] = [(tool, name) for tool in TOOLS for name in commands_of(tool)]


def ids(command: Command) -> str:
    return " ".join(command)


def command_parser(command: Command) -> Parser:
    """The parser of `python -m TOOL NAME`, built as `run_subcommands` builds it."""
    tool, name = command
    parser = Parser(prog=f"python -m {tool} {name}")
    importlib.import_module(commands_of(tool)[name]).add_arguments(parser)
    return parser


def arguments(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Every option string (and positional METAVAR) of `parser` but -h/--help, with its action."""
    found: dict[str, argparse.Action] = {}
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if action.option_strings:
            found.update(dict.fromkeys(action.option_strings, action))
        else:
            found[str(action.metavar or action.dest.upper())] = action
    return found


# -- reading docs/commands.md ----------------------------------------------------------


def sections(text: str) -> dict[tuple[str, str | None], list[str]]:
    """(tool, command or None) -> the lines of its section, up to the next heading."""
    found: dict[tuple[str, str | None], list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = HEADING.match(line)
        if match:
            current = found.setdefault((match.group(1), match.group(2)), [])
        elif line.startswith(("# ", "## ", "### ")):
            current = None
        elif current is not None:
            current.append(line)
    return found


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def option_rows(lines: list[str]) -> dict[str, str | None]:
    """Each option a table of the section documents -> its `default` cell (None: no such column)."""
    rows: dict[str, str | None] = {}
    header: list[str] = []
    for i, line in enumerate(lines):
        if not line.startswith("|"):
            header = []
            continue
        if re.match(r"^\|\s*-{3}", line):
            continue
        if i + 1 < len(lines) and re.match(r"^\|\s*-{3}", lines[i + 1]):
            header = [cell.lower() for cell in cells(line)]
            continue
        row = cells(line)
        code = re.match(r"^`([^`]+)`$", row[0])
        if not code:
            continue
        name = code.group(1).split()[0]
        if name.startswith("--") or POSITIONAL.match(name):
            rows[name] = row[header.index("default")] if "default" in header else None
    return rows


def documented(command: Command, found: dict[tuple[str, str | None], list[str]]) -> dict[str, str | None]:
    """The options docs/commands.md gives `command`: its own rows, and those it says it takes."""
    lines = found[command]
    rows = option_rows(lines)
    for line in lines:
        match = INHERITS.match(line)
        if match:
            base = (match.group(1), match.group(2))
            assert base in found, f"{ids(command)}: takes the options of {ids(base)}, which has no section"
            excepted = set(re.findall(r"`(--[\w-]+)`", match.group(3)))
            inherited = {k: v for k, v in documented(base, found).items() if k not in excepted}
            rows = {**inherited, **rows}
    return rows


@pytest.fixture(scope="module")
def doc_sections() -> dict[tuple[str, str | None], list[str]]:
    return sections(COMMANDS_MD.read_text(encoding="utf-8"))


# -- the parsers themselves ----------------------------------------------------------------


@pytest.mark.parametrize("command", ALL, ids=ids)
def test_every_option_and_command_has_help(command: Command) -> None:
    tool, name = command
    module_name = commands_of(tool)[name]
    module = importlib.import_module(module_name)
    line = summary(name, getattr(module, "SUMMARIES", None), module.__doc__)
    assert line, f"{ids(command)}: no summary (module docstring, or its SUMMARIES entry)"
    assert source_summary(name, module_name) == line, "the command list would show another summary"
    bare = [option for option, action in arguments(command_parser(command)).items()
            if not action.help or action.help == argparse.SUPPRESS or not action.help.strip()]
    assert not bare, f"{ids(command)}: options without help text: {bare}"


@pytest.mark.parametrize("command", ALL, ids=ids)
def test_help_shows_the_summary_and_every_option(command: Command,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    tool, name = command
    with pytest.raises(SystemExit) as exit_:
        run_subcommands(f"python -m {tool}", "", commands_of(tool), [name, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    missing = [option for option in arguments(command_parser(command)) if option not in out]
    assert not missing, f"`python -m {ids(command)} --help` does not show {missing}"
    module = importlib.import_module(commands_of(tool)[name])
    line = summary(name, getattr(module, "SUMMARIES", None), module.__doc__) or ""
    assert "".join(line.split()) in "".join(out.split())


@pytest.mark.parametrize("tool", TOOLS)
def test_the_list_of_commands_has_a_line_for_each(tool: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        run_subcommands(f"python -m {tool}", "", commands_of(tool), ["--help"])
    assert exit_.value.code == 0
    out = "".join(capsys.readouterr().out.split())
    for name, module_name in commands_of(tool).items():
        line = source_summary(name, module_name) or ""
        assert line, f"{tool} {name}: no summary"
        assert "".join(f"{name}{line}".split()) in out, f"`python -m {tool} --help` lacks {name}'s line"


# -- docs/commands.md against the parsers ---------------------------------------------------


def test_every_command_has_a_section_and_every_section_a_command(doc_sections: dict) -> None:
    sectioned = {key for key in doc_sections if key[1] is not None}
    assert sorted(set(ALL) - sectioned) == [], "commands with no section in docs/commands.md"
    assert sorted(sectioned - set(ALL)) == [], "sections in docs/commands.md for commands that do not exist"
    for tool in TOOLS:
        listed = re.findall(r"^\| \[`([\w-]+)`\]\(#([\w-]+)\)", "\n".join(doc_sections[(tool, None)]), re.M)
        assert [name for name, _ in listed] == list(commands_of(tool)), f"the list of {tool}'s commands"
        for name, anchor in listed:
            assert anchor == slug(f"python -m {tool} {name}"), f"{tool} {name}: link #{anchor} goes nowhere"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


@pytest.mark.parametrize("command", ALL, ids=ids)
def test_the_docs_list_exactly_the_options_of_the_parser(command: Command, doc_sections: dict) -> None:
    in_parser = set(arguments(command_parser(command)))
    in_docs = set(documented(command, doc_sections))
    assert sorted(in_parser - in_docs) == [], f"{ids(command)}: options missing from docs/commands.md"
    assert sorted(in_docs - in_parser) == [], f"{ids(command)}: docs/commands.md lists options that are gone"


def shown(default: Any) -> str | None:
    """A default as the docs write it; None for those they describe in words (none, off, lists)."""
    if default is None or isinstance(default, bool | list | tuple) or default == "":
        return None
    if isinstance(default, float):
        return f"{default:g}"
    return str(default)


@pytest.mark.parametrize("command", ALL, ids=ids)
def test_documented_defaults_are_the_parsers(command: Command, doc_sections: dict) -> None:
    docs = documented(command, doc_sections)
    wrong = []
    for option, action in arguments(command_parser(command)).items():
        expected = shown(action.default)
        cell = docs.get(option)
        if expected is None or cell is None or (*command, option) in MACHINE_DEFAULTS:
            continue
        if cell.replace("`", "").strip() != expected:
            wrong.append(f"{option}: docs say {cell!r}, the parser {expected!r}")
    assert not wrong, f"{ids(command)}: " + "; ".join(wrong)


# -- example commands in README.md and docs/ ------------------------------------------------


def example_commands() -> list[tuple[str, list[str]]]:
    """(where, argv after `python -m`) of every command line in a fenced block of README.md and docs/;
    `[--optional]` brackets are dropped; lines with `...` or `$VARIABLES` are skipped."""
    found = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        fenced = False
        pending = ""
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith("```"):
                fenced = not fenced
                continue
            if not fenced:
                continue
            pending += line.rstrip()
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            text, pending = pending, ""
            match = re.match(r"^\s*(?:[A-Z_]+=\S+\s+)*(?:\S*/)?python3? -m (\w+ .*)$", text)
            if match and "..." not in text and "$" not in text:  # placeholders, shell variables
                argv = shlex.split(match.group(1).replace("[", " ").replace("]", " "), comments=True)
                found.append((f"{path.name}:{number}", argv))
    return found


EXAMPLES = example_commands()


@pytest.mark.parametrize("where, argv", EXAMPLES, ids=[w for w, _ in EXAMPLES])
def test_example_commands_parse_and_validate(where: str, argv: list[str]) -> None:
    tool, name, *rest = argv
    assert tool in TOOLS and name in commands_of(tool), f"{where}: `python -m {tool} {name}` is no command"
    parser = command_parser((tool, name))
    try:
        args = parser.parse_args(rest)
    except SystemExit:
        pytest.fail(f"{where}: `python -m {' '.join(argv)}` does not parse")
    if (tool, name) == ("harness", "run") and args.hosts is None:
        flags.validate(args)  # no Docker needed: flag values, faults and their options


def test_the_readme_has_an_example_for_every_fault_family_and_mode() -> None:
    runs = [argv for where, argv in EXAMPLES if where.startswith("README") and argv[:2] == ["harness", "run"]]
    named: set[str] = set()
    modes: set[str] = set()
    for argv in runs:
        args = command_parser(("harness", "run")).parse_args(argv[2:])
        named.update(catalogue.resolve_words(args.nemesis))
        if "--mode" in argv:
            modes.add(args.mode)
    assert sorted(set(catalogue.FAMILIES) - named) == [], "families with no `--nemesis <family>` example"
    assert sorted(set(MODES) - modes) == [], "modes with no `--mode <mode>` example"


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
OUTSIDE = ("DESIGN.md", "DLEDGER-SPEC.md")  # the design notes the project started from, not in a clone


def _pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "bench" / "README.md"]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_of_the_docs_points_into_the_repository(page: Path) -> None:
    """A person who clones the project has every page and file the docs link to."""
    targets = [t for t in LINK.findall(page.read_text()) if not re.match(r"^[a-z]+:", t)]
    missing = [t for t in targets if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(REPO)} links to files that are not in the repository: {missing}"


def test_nothing_cites_the_design_notes_outside_the_repository() -> None:
    folders = ("docs", "nodes", "harness", "nemesis", "checkers", "systems", "tests", "bench")
    kinds = (".py", ".md", ".j2", ".sh")
    sources = [p for folder in folders for p in (REPO / folder).rglob("*") if p.suffix in kinds]
    citing = sorted(str(p.relative_to(REPO)) for p in [REPO / "README.md", *sources]
                    if p.is_file() and p != Path(__file__) and any(n in p.read_text() for n in OUTSIDE))
    assert not citing, f"these cite {' or '.join(OUTSIDE)}, which a clone does not have: {citing}"
