"""The node clock's offset file and the events.jsonl lines."""

import json
import os

from nodes.clock import OFFSET_FILE, NodeClock
from nodes.events import EventLog


def write_offset(path, text, stamp):
    path.write_text(text)
    os.utime(path, ns=(stamp, stamp))  # a distinct mtime, as separate nemesis writes have


def test_offset_moves_now_and_wall_and_never_goes_back(tmp_path):
    clock = NodeClock(tmp_path)
    base = clock.now_ms()
    write_offset(tmp_path / OFFSET_FILE, "5000", 1)
    clock.refresh()
    assert clock.offset_ms == 5000
    assert clock.now_ms() >= base + 5000.0
    ahead = clock.now_ms()
    write_offset(tmp_path / OFFSET_FILE, "-5000", 2)
    clock.refresh()
    assert clock.now_ms() == ahead  # frozen, not backwards
    (tmp_path / OFFSET_FILE).unlink()
    clock.refresh()
    assert clock.offset_ms == 0


def test_bad_offset_keeps_the_previous_one(tmp_path):
    write_offset(tmp_path / OFFSET_FILE, "250", 1)
    clock = NodeClock(tmp_path)
    write_offset(tmp_path / OFFSET_FILE, "soon", 2)
    clock.refresh()
    assert clock.offset_ms == 250


def test_event_lines(tmp_path):
    clock = NodeClock(tmp_path)
    events = EventLog(tmp_path, "n1", clock)
    events.role(1, "candidate", None)
    events.role(1, "candidate", None)
    events.role(1, "leader", "n1")
    events.commit(1, 5)
    events.commit(1, 4)
    lines = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    events.close()
    assert [(ln["event"], ln.get("role"), ln.get("commit_index")) for ln in lines] == [
        ("role", "candidate", None), ("role", "leader", None), ("commit", None, 5)]
    assert all(ln["node"] == "n1" and isinstance(ln["time_ns"], int) for ln in lines)
    assert lines[1]["leader"] == "n1" and lines[1]["term"] == 1
