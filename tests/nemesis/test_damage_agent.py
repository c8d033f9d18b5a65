"""The damage agent (nemesis/agents/damage.py) on files of formats the harness does not parse: the
newest file of a glob, damaged within its last written bytes, and a report of exactly what changed."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from nemesis.agents.damage import damage, newest, written_end

AGENT = Path(__file__).resolve().parents[2] / "nemesis" / "agents" / "damage.py"


def wal(folder: Path, name: str, content: bytes, padding: int = 0, mtime_ns: int = 0) -> Path:
    path = folder / "etcd" / "member" / "wal" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content + bytes(padding))
    if mtime_ns:
        os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def test_the_newest_file_and_its_written_end_past_preallocated_zeros(tmp_path: Path) -> None:
    old = wal(tmp_path, "0-0.wal", b"old" * 10, mtime_ns=1_000_000_000)
    new = wal(tmp_path, "1-9.wal", b"\x01" * 5000, padding=200_000, mtime_ns=2_000_000_000)
    assert newest(tmp_path, "etcd/member/wal/*.wal") == new != old
    assert written_end(new) == 5000 and written_end(wal(tmp_path, "z.wal", b"", 100)) == 0


@pytest.mark.parametrize("mode", ["bitflip", "truncate", "zero-tail"])
def test_each_mode_changes_exactly_what_it_reports(tmp_path: Path, mode: str) -> None:
    content = bytes(range(1, 256)) * 40  # no zero byte: every change shows
    path = wal(tmp_path, "0-0.wal", content, padding=10_000)
    report = damage(tmp_path, "etcd/member/wal/*.wal", mode, random.Random(3))
    after = path.read_bytes()
    at = report["offset"]
    assert report["changed"] and report["path"] == "etcd/member/wal/0-0.wal"
    assert report["written_end"] == len(content) and len(content) - 4096 <= at < len(content)
    assert after[:at] == content[:at], "nothing before the offset changed"
    if mode == "bitflip":
        assert after[at] == content[at] ^ (1 << report["bit"])
        assert after[at + 1:len(content)] == content[at + 1:]
    elif mode == "truncate":
        assert len(after) == at == report["file_size"]["after"]
    else:
        assert after[at:len(content)] == bytes(len(content) - at) and report["length"] == len(content) - at
        assert len(after) == report["file_size"]["before"]


def test_nothing_to_damage_is_said_and_changes_nothing(tmp_path: Path) -> None:
    blocks = "jetstream/*/streams/*/msgs/*.blk"
    assert damage(tmp_path, blocks, "bitflip", random.Random(1)) == {
        "changed": False, "mode": "bitflip", "glob": blocks, "reason": "no file matches"}
    path = wal(tmp_path, "0-0.wal", b"", padding=64)
    assert damage(tmp_path, "etcd/member/wal/*.wal", "truncate", random.Random(1))["changed"] is False
    assert path.read_bytes() == bytes(64)


def test_the_command_line_prints_the_report_as_json(tmp_path: Path) -> None:
    path = wal(tmp_path, "0-0.wal", b"\x07" * 100)
    done = subprocess.run([sys.executable, str(AGENT), "--dir", str(tmp_path), "--glob",
                           "etcd/member/wal/*.wal", "--mode", "zero-tail", "--seed", "5"],
                          capture_output=True, text=True, check=True)
    report = json.loads(done.stdout)
    assert report["changed"] and path.read_bytes()[report["offset"]:] == bytes(100 - report["offset"])
