"""`python -m checkers import jepsen`: each shape of Jepsen history it maps, what it refuses (exit 254,
naming the line), and how it treats OUTDIR; every history it writes passes the history validator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers.__main__ import COMMANDS
from checkers.importers import jepsen
from checkers.importers.writer import MANIFEST, Refused, sha256, write
from checkers.jsonlines import HistoryValidator, records
from nodes.cliparse import EXIT_BAD_ARGS, run_subcommands

KAFKA = """\
{:index 0, :time 10, :process 0, :type :invoke, :f :send, :value [[:send :x :a]]}
{:index 1, :time 11, :process 0, :type :ok, :f :send, :value [[:send :x [0 :a]]]}
{:index 2, :time 12, :process 1, :type :invoke, :f :poll, :value [[:poll]]}
{:index 3, :time 13, :process 1, :type :ok, :f :poll, :value [[:poll {:x [[0 :a]]}]]}
"""


def source(tmp_path: Path, text: str, name: str = "history.edn") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def history(folder: Path) -> list[dict[str, Any]]:
    """The folder's history.jsonl, read through the checker's own validator."""
    return list(records(folder / "history.jsonl", HistoryValidator()))


def imported(tmp_path: Path, text: str, name: str = "history.edn") -> dict[str, list[dict[str, Any]]]:
    """key -> the history written for it."""
    written = write(jepsen.convert(source(tmp_path, text, name)), tmp_path / "out")
    return {folder.key: history(path) for folder, path in written}


def ops(lines: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(type, process, f, value) of each line: what the tests compare."""
    return [(x["type"], x["process"], x["f"], x["value"]) for x in lines]


def cli(*argv: str) -> int:
    try:
        return run_subcommands("python -m checkers", "", COMMANDS, ["import", *argv])
    except SystemExit as e:
        return int(e.code or 0)


# -- shapes ------------------------------------------------------------------------------------


def test_a_send_is_an_append_at_its_offset_and_a_poll_a_consume(tmp_path):
    (lines,) = imported(tmp_path, KAFKA).values()
    assert ops(lines) == [
        ("invoke", 0, "append", {"id": "a"}),
        ("ok", 0, "append", {"id": "a", "log_index": 0}),
        ("invoke", 1, "consume", {"consumer": 1, "from": 0}),
        ("ok", 1, "consume", {"consumer": 1, "from": 0, "to": 0, "entries": [[0, "a"]], "offset": 1}),
    ]
    assert [x["index"] for x in lines] == [0, 1, 2, 3]
    assert [x["time"] for x in lines] == [10, 11, 12, 13]  # the source's :time
    assert [x["source_line"] for x in lines] == [1, 2, 3, 4]


def test_json_lines_a_json_array_and_an_edn_vector_read_as_history_edn(tmp_path):
    expected = ops(next(iter(imported(tmp_path / "edn", KAFKA).values())))
    as_json = [
        {"index": 0, "time": 10, "process": 0, "type": "invoke", "f": "send", "value": [["send", "x", "a"]]},
        {"index": 1, "time": 11, "process": 0, "type": "ok", "f": "send", "value": [["send", "x", [0, "a"]]]},
        {"index": 2, "time": 12, "process": 1, "type": "invoke", "f": "poll", "value": [["poll"]]},
        {"index": 3, "time": 13, "process": 1, "type": ":ok", "f": ":poll",  # keywords as ":name" too
         "value": [["poll", {"x": [[0, "a"]]}]]},
    ]
    texts = {
        "lines.json": "".join(json.dumps(op) + "\n" for op in as_json),
        "array.json": json.dumps(as_json, indent=1),
        "vector.edn": "[" + KAFKA + "]",
        "records.edn": "".join(f"#jepsen.history.Op{line}\n" for line in KAFKA.splitlines()),
    }
    for name, text in texts.items():
        (tmp_path / name).mkdir()
        (lines,) = imported(tmp_path / name, text, name).values()
        assert ops(lines) == expected, name


def test_without_time_the_line_is_the_time(tmp_path):
    text = "\n".join(line.replace(":time 1", ":timex 1") for line in KAFKA.splitlines())
    (lines,) = imported(tmp_path, text).values()
    assert [x["time"] for x in lines] == [1, 2, 3, 4]


def test_each_key_gets_its_folder_and_a_test_json_saying_where_it_came_from(tmp_path):
    text = KAFKA + """\
{:process 2, :type :invoke, :f :send, :value [[:send 7 100]]}
{:process 2, :type :ok, :f :send, :value [[:send 7 [3 100]]]}
"""
    path = source(tmp_path, text)
    written = write(jepsen.convert(path), tmp_path / "out")
    assert [(f.key, p.name) for f, p in written] == [("x", "x"), ("7", "7")]
    test = json.loads((tmp_path / "out" / "7" / "test.json").read_text())
    assert test["read_mode"] == "linearizable" and test["inputs"] == ["history"] and "nodes" not in test
    assert test["source"]["importer"] == "jepsen"
    assert test["source"]["file"] == str(path)
    assert test["source"]["sha256"] == sha256(path)
    assert test["source"]["key"] == "7" and test["source"]["ops"] == 1
    assert ops(history(tmp_path / "out" / "7")) == [
        ("invoke", 2, "append", {"id": "100"}),
        ("ok", 2, "append", {"id": "100", "log_index": 3}),
    ]
    manifest = json.loads((tmp_path / "out" / MANIFEST).read_text())
    assert manifest["folders"] == {"x": "x", "7": "7"} and manifest["refused"] == {}


def test_the_sends_of_one_operation_are_concurrent_appends_by_helper_processes(tmp_path):
    (lines,) = imported(tmp_path, """\
{:process 0, :type :invoke, :f :send, :value [[:send :x :a] [:send :x :b] [:send :x :c]]}
{:process 3, :type :invoke, :f :send, :value [[:send :x :d]]}
{:process 0, :type :info, :f :send, :value [[:send :x [0 :a]] [:send :x :b] [:send :x :c]]}
{:process 3, :type :ok, :f :send, :value [[:send :x [1 :d]]]}
{:process 0, :type :invoke, :f :send, :value [[:send :x :e] [:send :x :f]]}
{:process 0, :type :ok, :f :send, :value [[:send :x [2 :e]] [:send :x :f]]}
""").values()
    assert ops(lines) == [
        ("invoke", 0, "append", {"id": "a"}),
        ("invoke", 4, "append", {"id": "b"}),  # helpers are numbered after the source's processes
        ("invoke", 5, "append", {"id": "c"}),
        ("invoke", 3, "append", {"id": "d"}),
        ("info", 0, "append", {"id": "a"}),  # an offset on an info send is not where it landed for sure
        ("info", 4, "append", {"id": "b"}),
        ("info", 5, "append", {"id": "c"}),
        ("ok", 3, "append", {"id": "d", "log_index": 1}),
        ("invoke", 0, "append", {"id": "e"}),
        ("invoke", 4, "append", {"id": "f"}),  # a helper is reused once its append completed
        ("ok", 0, "append", {"id": "e", "log_index": 2}),
        ("ok", 4, "append", {"id": "f"}),  # acknowledged without saying where
    ]
    notes = json.loads((tmp_path / "out" / "x" / "test.json").read_text())["source"]["notes"]
    assert any("helper processes 4 to 5" in n for n in notes)


def test_a_consumer_pulls_from_its_offset_and_first_from_the_groups(tmp_path):
    (lines,) = imported(tmp_path, """\
{:process 0, :type :invoke, :f :poll, :value [[:poll]]}
{:process 0, :type :ok, :f :poll, :value [[:poll {:x []}]]}
{:process 0, :type :invoke, :f :poll, :value [[:poll] [:poll]]}
{:process 0, :type :ok, :f :poll, :value [[:poll {:x [[0 :a] [1 :b]]}] [:poll {:x [[2 :c]]}]]}
{:process 1, :type :invoke, :f :poll, :value [[:poll]]}
{:process 1, :type :fail, :f :poll, :value [[:poll {:x [[3 :d]]}]]}
{:process 1, :type :invoke, :f :poll, :value [[:poll]]}
{:process 1, :type :ok, :f :poll, :value [[:poll {:x [[5 :f]]}]]}
{:process 0, :type :invoke, :f :poll, :value [[:poll]]}
{:process 0, :type :info, :f :poll, :value [[:poll]]}
""").values()
    assert ops(lines) == [
        ("invoke", 0, "consume", {"consumer": 0, "from": 0}),
        ("ok", 0, "consume", {"consumer": 0, "from": 0, "to": -1, "entries": [], "offset": 0}),
        ("invoke", 0, "consume", {"consumer": 0, "from": 0}),
        ("ok", 0, "consume", {"consumer": 0, "from": 0, "to": 2, "entries": [[0, "a"], [1, "b"], [2, "c"]],
                              "offset": 3}),
        # A new consumer starts at the group's committed offset; a failed poll moves nothing.
        ("invoke", 1, "consume", {"consumer": 1, "from": 3}),
        ("fail", 1, "consume", {"consumer": 1, "from": 3, "entries": [[3, "d"]]}),
        ("invoke", 1, "consume", {"consumer": 1, "from": 3}),
        ("ok", 1, "consume", {"consumer": 1, "from": 3, "to": 5, "entries": [[5, "f"]], "offset": 6}),
        ("invoke", 0, "consume", {"consumer": 0, "from": 3}),
        ("info", 0, "consume", {"consumer": 0, "from": 3}),
    ]


def test_entries_are_written_as_polled_even_out_of_order(tmp_path):
    (lines,) = imported(tmp_path, """\
{:process 0, :type :invoke, :f :poll, :value [[:poll]]}
{:process 0, :type :ok, :f :poll, :value [[:poll {:x [[3 :c] [1 :a]]}]]}
""").values()
    assert lines[1]["value"] == {
        "consumer": 0, "from": 0, "to": 3, "entries": [[3, "c"], [1, "a"]], "offset": 2}


def test_a_poll_that_names_no_key_goes_to_the_only_key_or_is_left_out(tmp_path):
    (lines,) = imported(tmp_path / "one", """\
{:process 0, :type :invoke, :f :poll, :value [[:poll]]}
{:process 0, :type :ok, :f :poll, :value [[:poll {}]]}
{:process 1, :type :invoke, :f :send, :value [[:send :x :a]]}
{:process 1, :type :ok, :f :send, :value [[:send :x [0 :a]]]}
""").values()
    assert [x["f"] for x in lines] == ["consume", "consume", "append", "append"]
    folders = imported(tmp_path / "two", """\
{:process 0, :type :invoke, :f :poll, :value [[:poll]]}
{:process 0, :type :ok, :f :poll, :value [[:poll {}]]}
{:process 1, :type :invoke, :f :send, :value [[:send :x :a]]}
{:process 1, :type :ok, :f :send, :value [[:send :x [0 :a]]]}
{:process 1, :type :invoke, :f :send, :value [[:send :y :a]]}
{:process 1, :type :ok, :f :send, :value [[:send :y [0 :a]]]}
""")
    assert {key: [x["f"] for x in lines] for key, lines in folders.items()} == {
        "x": ["append", "append"], "y": ["append", "append"]}
    notes = json.loads((tmp_path / "two" / "out" / "x" / "test.json").read_text())["source"]["notes"]
    assert any("1 poll of the source named no key" in n for n in notes)


def test_list_append_transactions_and_simple_ops(tmp_path):
    folders = imported(tmp_path, """\
{:process 0, :type :invoke, :f :txn, :value [[:append 5 1]]}
{:process 0, :type :ok, :f :txn, :value [[:append 5 1]]}
{:process 1, :type :invoke, :f :txn, :value [[:r 5 nil]]}
{:process 1, :type :ok, :f :txn, :value [[:r 5 [1]]]}
{:process 1, :type :invoke, :f :txn, :value [[:r 6 nil]]}
{:process 1, :type :ok, :f :txn, :value [[:r 6 nil]]}
{:process 2, :type :invoke, :f :append, :value 9}
{:process 2, :type :ok, :f :append, :value 9}
{:process 2, :type :invoke, :f :read, :value nil}
{:process 2, :type :ok, :f :read, :value [9]}
{:process 2, :type :invoke, :f :read, :value nil}
{:process 2, :type :fail, :f :read, :value nil}
""")
    assert {key: ops(lines) for key, lines in folders.items()} == {
        "5": [("invoke", 0, "append", {"id": "1"}), ("ok", 0, "append", {"id": "1"}),
              ("invoke", 1, "read", {}), ("ok", 1, "read", {"from": 0, "to": 0, "entries": [[0, "1"]]})],
        "6": [("invoke", 1, "read", {}), ("ok", 1, "read", {"from": 0, "to": -1, "entries": []})],
        "log": [("invoke", 2, "append", {"id": "9"}), ("ok", 2, "append", {"id": "9"}),
                ("invoke", 2, "read", {}), ("ok", 2, "read", {"from": 0, "to": 0, "entries": [[0, "9"]]}),
                ("invoke", 2, "read", {}), ("fail", 2, "read", {})],
    }


def test_nemesis_ops_are_nemesis_lines_in_every_folder(tmp_path):
    folders = imported(tmp_path, """\
{:process :nemesis, :type :info, :f :start-partition, :value nil}
{:process 0, :type :invoke, :f :send, :value [[:send :x :a]]}
{:process :nemesis, :type :info, :f :start-partition, :value [:isolated {"n1" #{"n2"}}]}
{:process 0, :type :ok, :f :send, :value [[:send :x [0 :a]]]}
{:process :nemesis, :type :info, :f :kill, :value :primaries}
{:process 1, :type :invoke, :f :send, :value [[:send :y :b]]}
{:process 1, :type :ok, :f :send, :value [[:send :y [0 :b]]]}
""")
    for lines in folders.values():
        nemesis = [(x["type"], x["f"], x["value"], x.get("error"))
                   for x in lines if x["process"] == "nemesis"]
        assert nemesis == [
            ("invoke", "start-partition", None, None),
            ("info", "start-partition", ["isolated", {"n1": ["n2"]}], None),
            ("invoke", "kill", "primaries", None),
            ("info", "kill", None, "no completion in the source"),  # left open: closed at the end
        ]


def test_an_invoke_without_completion_gets_an_info_at_the_end(tmp_path):
    (lines,) = imported(tmp_path, """\
{:process 0, :type :invoke, :f :send, :time 5, :value [[:send :x :a]]}
{:process 1, :type :invoke, :f :send, :time 6, :value [[:send :x :b]]}
{:process 1, :type :ok, :f :send, :time 9, :value [[:send :x [0 :b]]]}
""").values()
    assert lines[-1] == {"index": 3, "time": 9, "type": "info", "process": 0, "f": "append",
                         "value": {"id": "a"}, "source_line": 1, "error": "no completion in the source"}


def test_the_completions_values_are_used_when_they_differ_from_the_invokes(tmp_path):
    (lines,) = imported(tmp_path, """\
{:process 0, :type :invoke, :f :send, :value [[:send :x 1]]}
{:process 0, :type :ok, :f :send, :value [[:send :x [1 :a]]]}
""").values()
    assert ops(lines) == [
        ("invoke", 0, "append", {"id": "a"}), ("ok", 0, "append", {"id": "a", "log_index": 1})]


# -- refusals ----------------------------------------------------------------------------------

REFUSED = {
    "several keys": ("{:process 0, :type :invoke, :f :send, :value [[:send :x 1] [:send :y 1]]}",
                     "line 1: one operation writes to keys x and y"),
    "reads and writes": ("{:process 0, :type :invoke, :f :txn, :value [[:send :x 1] [:poll]]}",
                         "line 1: one operation mixes reads and writes"),
    "list reads and appends": ("{:process 0, :type :invoke, :f :txn, :value [[:append 1 2] [:r 1 nil]]}",
                               "line 1: one operation mixes reads and writes"),
    "subscribe": ("{:process 0, :type :invoke, :f :subscribe, :value [:x]}", "line 1: :subscribe changes"),
    "assign": ("{:process 0, :type :invoke, :f :assign, :value [:x]}", "line 1: :assign changes"),
    "crash": ("{:process 0, :type :invoke, :f :crash, :value nil}", "line 1: :f :crash is not a send"),
    "poll of two keys": ("{:process 0, :type :invoke, :f :poll, :value [[:poll]]}\n"
                         "{:process 0, :type :ok, :f :poll, :value [[:poll {:x [[0 1]], :y [[0 2]]}]]}",
                         "line 2: one poll returns messages of keys x and y"),
    "value sent twice": ("{:process 0, :type :invoke, :f :send, :value [[:send :x 1]]}\n"
                         "{:process 1, :type :invoke, :f :send, :value [[:send :x 1]]}",
                         "line 2: value 1 is written to key x a second time (first at line 1)"),
    "completion with no invoke": ("{:process 0, :type :ok, :f :send, :value [[:send :x [0 1]]]}",
                                  "line 1: a :ok :send of process 0, which has no :send open"),
    "second invoke": ("{:process 0, :type :invoke, :f :send, :value [[:send :x 1]]}\n"
                      "{:process 0, :type :invoke, :f :send, :value [[:send :x 2]]}",
                      "line 2: process 0 invokes :send before its :send (line 1) completed"),
    "not EDN": ('{:process 0, :type :invoke, :f :send, :value [[:send :x 1]]}\n{:process 0, :type :ok, "',
                "line 2: not valid EDN"),
    "not an op": ("[1 2]\n", "op 1: not an op map"),
    "bad type": ("{:process 0, :type :pending, :f :send, :value [[:send :x 1]]}",
                 "line 1: :type must be one of"),
    "bad process": ('{:process "p", :type :invoke, :f :send, :value [[:send :x 1]]}',
                    "line 1: :process must be an integer or :nemesis"),
    "nil message": ("{:process 0, :type :invoke, :f :poll, :value [[:poll]]}\n"
                    "{:process 0, :type :ok, :f :poll, :value [[:poll {:x [[0 nil]]}]]}",
                    "line 2: a polled message has no value"),
    "no micro-ops": ("{:process 0, :type :invoke, :f :send, :value 3}",
                     "line 1: :value is not a vector of micro-ops"),
    "empty transaction": ("{:process 0, :type :invoke, :f :txn, :value []}",
                          "line 1: :value is not a vector of micro-ops"),
    "nothing": ("{:process :nemesis, :type :info, :f :start, :value nil}",
                "no sends, polls, appends or reads"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_what_cannot_be_mapped_is_refused_with_its_line(tmp_path, case, capsys):
    text, message = REFUSED[case]
    path = source(tmp_path, text + "\n")
    with pytest.raises(Refused, match=None) as refused:
        jepsen.convert(path)
    assert message in str(refused.value)
    assert cli("jepsen", str(path), str(tmp_path / "out")) == EXIT_BAD_ARGS
    err = capsys.readouterr().err
    assert f"import: refused: {path}: " in err and message in err
    assert not (tmp_path / "out").exists()


# -- OUTDIR --------------------------------------------------------------------------------------


def test_outdir_must_be_new_or_empty_and_a_second_import_is_refused(tmp_path, capsys):
    path = source(tmp_path, KAFKA)
    (tmp_path / "empty").mkdir()
    assert cli("jepsen", str(path), str(tmp_path / "empty")) == 0
    out = capsys.readouterr().out
    assert f"key 'x' -> {tmp_path / 'empty' / 'x'}: append 1 (ok 1, fail 0, info 0); consume 1 (ok 1" in out
    before = (tmp_path / "empty" / "x" / "history.jsonl").read_bytes()
    assert cli("jepsen", str(path), str(tmp_path / "empty")) == EXIT_BAD_ARGS
    assert "exists and is not empty" in capsys.readouterr().err
    assert (tmp_path / "empty" / "x" / "history.jsonl").read_bytes() == before
    assert cli("jepsen", str(path), str(tmp_path / "new" / "deeper")) == 0
    assert (tmp_path / "new" / "deeper" / "x" / "history.jsonl").read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["deeper"]  # no staging folder left


def test_a_missing_file_and_a_bad_importer_exit_254(tmp_path, capsys):
    assert cli("jepsen", str(tmp_path / "none.edn"), str(tmp_path / "out")) == EXIT_BAD_ARGS
    assert "no such file" in capsys.readouterr().err
    assert cli("kafka", str(tmp_path / "none.edn"), str(tmp_path / "out")) == EXIT_BAD_ARGS


def test_the_fixtures_import_into_valid_history_files(tmp_path):
    """Every ported Jepsen case that imports writes histories the checker's validator accepts."""
    cases = Path(__file__).parent / "thirdparty" / "jepsen_kafka"
    expected = json.loads((cases / "expected.json").read_text())["cases"]
    for name, case in expected.items():
        if "refused" in case:
            continue
        written = write(jepsen.convert(cases / name), tmp_path / name)
        assert {folder.key for folder, _ in written} == set(case["ours"]), name
        for _, path in written:
            assert history(path), name
