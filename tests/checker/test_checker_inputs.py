"""Bad input gets a clear message naming file and line; the command line's exit codes."""

from __future__ import annotations

import json
import shutil

import pytest

from checkers.__main__ import COMMANDS
from checkers.checks.check import check_many
from checkers.checks.verdict import exit_code
from checkers.jsonlines import InputError
from checkers.layout import ResultsDir
from nodes.cliparse import run_subcommands

pytestmark = pytest.mark.spark


def _copy(checked, name, tmp_path):
    return shutil.copytree(checked[name][0].path, tmp_path / name)


def _break_line(path, number, text):
    lines = path.read_text().splitlines()
    lines[number - 1] = text
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("line", "text", "message"),
    [
        (3, "{not json", "not valid JSON"),
        (
            2,
            '{"index": 1, "time": 5, "type": "bogus", "process": 0, "f": "append", "value": {"id": "x"}}',
            "`type`",
        ),
        (
            4,
            '{"index": 3, "time": 5, "type": "invoke", "process": 0, "f": "read", "value": {"from": "x"}}',
            "must be integers",
        ),
    ],
)
def test_malformed_history_line_is_named(spark, checked, tmp_path, line, text, message):
    folder = _copy(checked, "ok-0", tmp_path)
    _break_line(folder / "history.jsonl", line, text)
    with pytest.raises(InputError, match=rf"history.jsonl line {line}: .*{message}"):
        check_many([ResultsDir.open(folder)], spark)


def test_unpaired_invoke_is_named(spark, checked, tmp_path):
    folder = _copy(checked, "ok-0", tmp_path)
    lines = (folder / "history.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    dup = json.dumps({**first, "index": 1, "time": first["time"] + 1})
    rest = [json.dumps({**json.loads(x), "index": i + 2}) for i, x in enumerate(lines[1:])]
    (folder / "history.jsonl").write_text("\n".join([lines[0], dup, *rest]) + "\n")
    with pytest.raises(InputError, match=r"history.jsonl line 2: process \d+ invokes .* before"):
        check_many([ResultsDir.open(folder)], spark)


def test_malformed_final_log_and_events_lines_are_named(spark, checked, tmp_path):
    folder = _copy(checked, "ok-1", tmp_path)
    _break_line(folder / "final" / "n2.jsonl", 2, '{"log_index": "two"}')
    with pytest.raises(InputError, match=r"final/n2.jsonl line 2: `log_index`"):
        check_many([ResultsDir.open(folder)], spark)
    shutil.copy(checked["ok-1"][0].path / "final" / "n2.jsonl", folder / "final" / "n2.jsonl")
    _break_line(folder / "nodes" / "n1" / "events.jsonl", 1, '{"role": "king", "term": 1, "node": "n1"}')
    with pytest.raises(InputError, match=r"n1/events.jsonl line 1: `role`"):
        check_many([ResultsDir.open(folder)], spark)


def test_not_a_results_folder(tmp_path):
    with pytest.raises(InputError, match=r"history\.jsonl: missing"):
        ResultsDir.open(tmp_path)
    (tmp_path / "history.jsonl").write_text("")
    (tmp_path / "test.json").write_text('{"read_mode": "sometimes"}')
    with pytest.raises(InputError, match="read_mode 'sometimes' is not one of"):
        ResultsDir.open(tmp_path)


def _cli(*argv):
    return run_subcommands("python -m checkers", "", COMMANDS, argv=["check", *argv])


def test_cli_bad_arguments_and_bad_input_exit_254(checked, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        _cli(str(tmp_path), "--witnesses", "-1")
    assert e.value.code == 254
    assert _cli(str(tmp_path / "nowhere")) == 254
    assert "not a directory" in capsys.readouterr().err
    folder = _copy(checked, "ok-2", tmp_path)
    _break_line(folder / "history.jsonl", 5, "[]")
    assert _cli(str(folder)) == 254
    assert "history.jsonl line 5: a history line must be a JSON object" in capsys.readouterr().err


def test_exit_codes_follow_the_verdict():
    assert [exit_code(v) for v in (True, False, "unknown")] == [0, 1, 2]
