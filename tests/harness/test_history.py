"""The history writer: contract fields, pairing of invokes and completions, streaming."""

import json
import threading

import pytest

from harness.chaos.history import History


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_lines_follow_the_contract(tmp_path):
    path = tmp_path / "history.jsonl"
    with History(path) as h:
        h.invoke(3, "append", {"id": "p3-0"}, node="n2")
        h.complete(3, "ok", "append", {"id": "p3-0", "log_index": 7, "term": 2}, node="n2")
        h.invoke("nemesis", "kill", {"node": "n1"})
        h.complete("nemesis", "info", "kill", {"node": "n1"})
        h.invoke(4, "append", {"id": "p4-0"})
        h.complete(4, "info", "append", {"id": "p4-0"}, error="timeout")
    ops = lines(path)
    assert [op["index"] for op in ops] == list(range(6))
    assert [op["type"] for op in ops] == ["invoke", "ok", "invoke", "info", "invoke", "info"]
    assert ops[1]["value"]["log_index"] == 7 and ops[1]["node"] == "n2"
    assert ops[5]["error"] == "timeout" and "node" not in ops[5]
    times = [op["time"] for op in ops]
    assert times == sorted(times) and times[0] >= 0
    assert h.counts == {"ok": 1, "fail": 0, "info": 1}, "nemesis ops are not client outcomes"


def test_each_line_is_on_disk_as_soon_as_it_is_recorded(tmp_path):
    path = tmp_path / "history.jsonl"
    h = History(path)
    h.invoke(1, "read", {"from": 0, "to": 0})
    assert lines(path)[0]["f"] == "read", "a crash now must leave the invoke in the file"
    h.close()


def test_completion_without_invoke_and_double_invoke_are_refused(tmp_path):
    with History(tmp_path / "h.jsonl") as h:
        with pytest.raises(RuntimeError, match="without an open invoke"):
            h.complete(1, "ok", "append", {})
        h.invoke(1, "append", {"id": "a"})
        with pytest.raises(RuntimeError, match="while append is open"):
            h.invoke(1, "read", {})
        with pytest.raises(RuntimeError, match="without an open invoke"):
            h.complete(1, "ok", "read", {})
        assert h.open_processes() == {1: "append"}


def test_an_op_that_ends_after_the_history_closed_is_not_recorded(tmp_path):
    path = tmp_path / "history.jsonl"
    with History(path) as h:
        h.invoke(1, "append", {"id": "p1-0"})
        h.close()  # the run closes it once the last fault is stopped; a stuck call ends later
        assert h.complete(1, "ok", "append", {"id": "p1-0", "log_index": 0, "term": 1}) == -1
    assert [op["type"] for op in lines(path)] == ["invoke"]


def test_concurrent_writers_never_interleave_lines(tmp_path):
    path = tmp_path / "h.jsonl"

    def work(process):
        for i in range(200):
            h.invoke(process, "append", {"id": f"p{process}-{i}"})
            h.complete(process, "ok", "append", {"id": f"p{process}-{i}", "log_index": i, "term": 1})

    with History(path) as h:
        threads = [threading.Thread(target=work, args=(p,)) for p in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    ops = lines(path)
    assert len(ops) == 8 * 200 * 2
    assert [op["index"] for op in ops] == list(range(len(ops)))


def test_only_not_leader_refusals_of_directed_reads_are_counted_apart(tmp_path):
    asked = {"from": 0, "to": 1, "at": "n3"}
    with History(tmp_path / "h.jsonl") as h:
        for process, value, error in ((0, asked, "n3 answered NOT_LEADER"),
                                      (1, asked, "n3: connection refused"),
                                      (2, {"from": 0, "to": 1}, "n1 answered NOT_LEADER")):
            h.invoke(process, "read", value)
            h.complete(process, "fail", "read", value, error=error)
    assert h.counts["fail"] == 3 and h.refused_directed == 1
