"""`python -m checkers import porcupine-kv`: appends and gets per key, gets split into the appended
values, the cut before a key's first put, the keys it refuses and why; every history it writes passes
the history validator, and Porcupine's own kv files import."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers.__main__ import COMMANDS
from checkers.importers import porcupine
from checkers.importers.porcupine import split_known
from checkers.importers.writer import Refused, write
from checkers.jsonlines import HistoryValidator, records
from nodes.cliparse import EXIT_BAD_ARGS, run_subcommands

FIXTURES = Path(__file__).parent / "thirdparty" / "porcupine"


def kv(process: int, kind: str, f: str, key: str, value: str | None) -> str:
    shown = "nil" if value is None else json.dumps(value)
    return f'{{:process {process}, :type :{kind}, :f :{f}, :key "{key}", :value {shown}}}\n'


def source(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "kv.txt"
    path.write_text("".join(lines))
    return path


def history(folder: Path) -> list[dict[str, Any]]:
    return list(records(folder / "history.jsonl", HistoryValidator()))


def imported(tmp_path: Path, *lines: str) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """key -> its written history, and key -> why it was refused."""
    result = porcupine.convert(source(tmp_path, *lines))
    written = write(result, tmp_path / "out") if result.folders else []
    return {folder.key: history(path) for folder, path in written}, result.refused


def ops(lines: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(x["type"], x["process"], x["f"], x["value"], x.get("error")) for x in lines]


def cli(*argv: str) -> int:
    try:
        return run_subcommands("python -m checkers", "", COMMANDS, ["import", *argv])
    except SystemExit as e:
        return int(e.code or 0)


def test_split_known_counts_the_ways_a_value_splits():
    assert split_known("", {"a"}) == (1, [])
    assert split_known("x 0 1 yx 0 10 y", {"x 0 1 y", "x 0 10 y", "x 0 0 y"}) == (1, ["x 0 1 y", "x 0 10 y"])
    assert split_known("abc", {"a", "ab", "bc", "c"})[0] == 2
    assert split_known("abd", {"a", "b"}) == (0, [])


def test_appends_are_appends_and_a_get_a_read_of_the_whole_log(tmp_path):
    folders, refused = imported(
        tmp_path,
        kv(0, "invoke", "append", "k", "x 0 0 y"),
        kv(1, "invoke", "get", "k", None),
        kv(0, "ok", "append", "k", "x 0 0 y"),
        kv(1, "ok", "get", "k", ""),
        kv(1, "invoke", "append", "k", "x 1 0 y"),
        kv(1, "ok", "append", "k", "x 1 0 y"),
        kv(0, "invoke", "get", "k", None),
        kv(0, "ok", "get", "k", "x 0 0 yx 1 0 y"),
        kv(2, "invoke", "get", "other", None),
        kv(2, "ok", "get", "other", ""),
    )
    assert refused == {}
    assert ops(folders["k"]) == [
        ("invoke", 0, "append", {"id": "x 0 0 y"}, None),
        ("invoke", 1, "read", {}, None),
        ("ok", 0, "append", {"id": "x 0 0 y"}, None),
        ("ok", 1, "read", {"from": 0, "to": -1, "entries": []}, None),
        ("invoke", 1, "append", {"id": "x 1 0 y"}, None),
        ("ok", 1, "append", {"id": "x 1 0 y"}, None),
        ("invoke", 0, "read", {}, None),
        ("ok", 0, "read", {"from": 0, "to": 1, "entries": [[0, "x 0 0 y"], [1, "x 1 0 y"]]}, None),
    ]
    assert [x["time"] for x in folders["k"]] == [1, 2, 3, 4, 5, 6, 7, 8]  # the source's lines
    test = json.loads((tmp_path / "out" / "k" / "test.json").read_text())
    assert test["source"]["importer"] == "porcupine-kv" and test["source"]["key"] == "k"
    assert test["read_mode"] == "linearizable" and test["inputs"] == ["history"]


def test_a_key_is_cut_before_its_first_put(tmp_path):
    folders, refused = imported(
        tmp_path,
        kv(0, "invoke", "append", "k", "x 0 0 y"),
        kv(0, "ok", "append", "k", "x 0 0 y"),
        kv(1, "invoke", "get", "k", None),
        kv(2, "invoke", "put", "k", "x 2 0 y"),
        kv(1, "ok", "get", "k", "x 2 0 y"),  # after the cut: the get ends as info
        kv(2, "ok", "put", "k", "x 2 0 y"),
        kv(0, "invoke", "append", "k", "x 0 1 y"),
        kv(0, "ok", "append", "k", "x 0 1 y"),
    )
    assert refused == {}
    assert ops(folders["k"]) == [
        ("invoke", 0, "append", {"id": "x 0 0 y"}, None),
        ("ok", 0, "append", {"id": "x 0 0 y"}, None),
        ("invoke", 1, "read", {}, None),
        ("info", 1, "read", {}, "cut before the key's first put (line 4)"),
    ]
    notes = json.loads((tmp_path / "out" / "k" / "test.json").read_text())["source"]["notes"]
    assert notes == ["cut before its first put (line 4): 2 operations from the put on left out, 1 open at "
                     "the cut ended as info"]


def test_a_value_appended_again_after_its_first_was_acknowledged_is_its_second_copy(tmp_path):
    folders, refused = imported(
        tmp_path,
        kv(0, "invoke", "append", "k", "v"),
        kv(0, "ok", "append", "k", "v"),
        kv(0, "invoke", "append", "k", "v"),
        kv(0, "ok", "append", "k", "v"),
        kv(1, "invoke", "get", "k", None),
        kv(1, "ok", "get", "k", "vv"),
    )
    assert refused == {}
    assert [x["value"] for x in folders["k"]][2:] == [
        {"id": "v#2"}, {"id": "v#2"}, {}, {"from": 0, "to": 1, "entries": [[0, "v"], [1, "v#2"]]}]


def test_values_no_append_wrote_split_by_the_pattern(tmp_path):
    folders, _ = imported(
        tmp_path,
        kv(0, "invoke", "append", "k", "x 0 0 y"),
        kv(0, "ok", "append", "k", "x 0 0 y"),
        kv(1, "invoke", "get", "k", None),
        kv(1, "ok", "get", "k", "x 0 0 yx 9 9 y"),
    )
    assert folders["k"][-1]["value"]["entries"] == [[0, "x 0 0 y"], [1, "x 9 9 y"]]
    notes = json.loads((tmp_path / "out" / "k" / "test.json").read_text())["source"]["notes"]
    assert notes == [
        "1 get returned values no append of the key wrote: split by the x <client> <seq> y pattern"]


def test_an_invoke_without_completion_gets_an_info_at_the_end(tmp_path):
    folders, _ = imported(tmp_path, kv(0, "invoke", "append", "k", "a"), kv(1, "invoke", "get", "k", None),
                          kv(1, "ok", "get", "k", "a"))
    assert ops(folders["k"])[-1] == ("info", 0, "append", {"id": "a"}, "no completion in the source")


REFUSED_KEYS = {
    "a put first": (
        (kv(0, "invoke", "put", "k", "a"), kv(0, "ok", "put", "k", "a")),
        "line 1: the key's first operation is a put"),
    "an unsplittable get": (
        (kv(0, "invoke", "append", "k", "a"), kv(0, "ok", "append", "k", "a"),
         kv(1, "invoke", "get", "k", None), kv(1, "ok", "get", "k", "ab")),
        "line 4: the get's value 'ab' is not a concatenation of the key's appended values"),
    "an ambiguous get": (
        (kv(0, "invoke", "append", "k", "a"), kv(1, "invoke", "append", "k", "ab"),
         kv(2, "invoke", "append", "k", "b"), kv(3, "invoke", "append", "k", "ba"),
         kv(4, "invoke", "get", "k", None), kv(4, "ok", "get", "k", "aba")),
        "line 6: the get's value 'aba' splits into the key's appended values in more than one way"),
    "a repeat while the first is open": (
        (kv(0, "invoke", "append", "k", "v"), kv(1, "invoke", "append", "k", "v")),
        "line 2: value 'v' is appended to key k again while its append at line 1 was not acknowledged"),
}


@pytest.mark.parametrize("case", list(REFUSED_KEYS))
def test_a_key_that_cannot_be_mapped_is_refused_and_the_others_written(tmp_path, case, capsys):
    lines, message = REFUSED_KEYS[case]
    other = (kv(9, "invoke", "append", "other", "z"), kv(9, "ok", "append", "other", "z"))
    path = source(tmp_path, *lines, *other)
    assert cli("porcupine-kv", str(path), str(tmp_path / "out")) == 0
    out = capsys.readouterr().out
    assert f"key 'k': refused: {message}" in out
    assert f"key 'other' -> {tmp_path / 'out' / 'other'}: append 1 (ok 1, fail 0, info 0)" in out
    assert not (tmp_path / "out" / "k").exists()
    assert message in json.loads((tmp_path / "out" / "import.json").read_text())["refused"]["k"]


def test_when_every_key_is_refused_nothing_is_written_and_it_exits_254(tmp_path, capsys):
    path = source(tmp_path, kv(0, "invoke", "put", "k", "a"))
    assert cli("porcupine-kv", str(path), str(tmp_path / "out")) == EXIT_BAD_ARGS
    assert "every key was refused (k: line 1: the key's first operation is a put" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text, message", [
    ('{:process 0, :type :invoke, :f :cas, :key "k", :value "a"}\n', "line 1: :f :cas is not one of"),
    ('{:process 0, :type :invoke, :f :get, :value nil}\n', "line 1: no :key"),
    ('{:process 0, :type :ok, :f :get, :key "k", :value ""}\n',
     "line 1: a :ok :get of process 0, which has no :get open"),
    ('{:process :nemesis, :type :info, :f :kill, :key "k"}\n', "line 1: :process must be an integer"),
])
def test_a_malformed_file_is_refused_with_its_line(tmp_path, capsys, text, message):
    path = source(tmp_path, text)
    with pytest.raises(Refused):
        porcupine.convert(path)
    assert cli("porcupine-kv", str(path), str(tmp_path / "out")) == EXIT_BAD_ARGS
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("name", ["c01-ok", "c01-bad", "c10-ok", "c10-bad"])
def test_porcupines_kv_files_import(tmp_path, name, capsys):
    assert cli("porcupine-kv", str(FIXTURES / f"{name}.txt"), str(tmp_path / "out")) == 0
    out = capsys.readouterr().out
    manifest = json.loads((tmp_path / "out" / "import.json").read_text())
    for key, folder in manifest["folders"].items():
        lines = history(tmp_path / "out" / folder)
        assert lines and all(x["process"] != "nemesis" for x in lines)
        assert f"key {key!r} -> {tmp_path / 'out' / folder}: " in out
    if name == "c01-ok":
        assert sorted(manifest["folders"]) == [str(k) for k in range(10)] and manifest["refused"] == {}
        assert "cut before its first put (line 29): 3 operations from the put on left out" in out
    if name == "c10-bad":
        assert sorted(manifest["refused"]) == ["2", "8"]  # their first operation is a put


def test_an_importer_bug_is_one_line_and_exits_255(tmp_path, capsys, monkeypatch):
    import checkers.importers.cli

    def broken(path: Path) -> Any:
        raise RuntimeError("the splitter lost its place\nsecond line")

    monkeypatch.setitem(checkers.importers.cli.IMPORTERS, "porcupine-kv", broken)
    path = source(tmp_path, kv(0, "invoke", "append", "k", "a"))
    assert cli("porcupine-kv", str(path), str(tmp_path / "out")) == 255
    err = capsys.readouterr().err
    assert err == "import: internal error: RuntimeError: the splitter lost its place\n"
    assert not (tmp_path / "out").exists()
