"""SSH control of node containers: exec with status and timeout, file copies, a detached process, signals."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from harness.containers.db import Db
from harness.errors import CommandFailed, CommandTimeout
from harness.ssh.control import RemoteProcess

pytestmark = pytest.mark.docker


def test_exec_returns_status_and_both_streams(cluster3: Db) -> None:
    result = cluster3.ssh("n1").exec("hostname; echo oops >&2; exit 3", timeout=10)
    assert (result.status, result.stdout, result.stderr) == (3, "n1\n", "oops\n")
    assert cluster3.exec("n2", "id -un") == "root\n"
    with pytest.raises(CommandFailed, match="exited 3: oops"):
        cluster3.exec("n1", "echo oops >&2; exit 3")


def test_exec_times_out_and_the_connection_stays_usable(cluster3: Db) -> None:
    with pytest.raises(CommandTimeout, match=r"did not finish within 0\.5 s"):
        cluster3.ssh("n1").exec("sleep 5", timeout=0.5)
    assert cluster3.exec("n1", "echo still here") == "still here\n"


def test_exec_reads_large_output_without_stalling(cluster3: Db) -> None:
    out = cluster3.exec("n3", "head -c 3000000 /dev/zero | tr '\\0' x", timeout=30)
    assert out == "x" * 3_000_000


def test_upload_download_and_tree_copy(cluster3: Db, tmp_path: Path) -> None:
    payload = os.urandom(1 << 20)
    (tmp_path / "blob").write_bytes(payload)
    ssh = cluster3.ssh("n2")
    ssh.upload(tmp_path / "blob", "/tmp/blob")
    assert ssh.exec("sha256sum < /tmp/blob").stdout.split()[0] == hashlib.sha256(payload).hexdigest()
    ssh.check("mkdir -p /tmp/tree/sub && echo a > /tmp/tree/a && echo b > /tmp/tree/sub/b "
              "&& truncate -s 256M /tmp/tree/segment && echo end >> /tmp/tree/segment")
    copied = ssh.download_tree("/tmp/tree", tmp_path / "tree")
    assert sorted(p.relative_to(tmp_path / "tree").as_posix() for p in copied) == ["a", "segment", "sub/b"]
    assert (tmp_path / "tree" / "sub" / "b").read_text() == "b\n"
    segment = (tmp_path / "tree" / "segment").stat()
    assert segment.st_size == (256 << 20) + 4
    assert segment.st_blocks * 512 < 1 << 20  # the hole stayed a hole
    ssh.download("/tmp/blob", tmp_path / "back" / "blob")
    assert (tmp_path / "back" / "blob").read_bytes() == payload


def test_detached_process_survives_the_ssh_connection_and_obeys_signals(cluster3: Db) -> None:
    process = RemoteProcess(cluster3.ssh("n1"), "/tmp/sleeper.pid", "/tmp/sleeper.log")
    pid = process.start("sleep 300")
    assert process.pid() == pid and process.state() == "S"
    with pytest.raises(Exception, match="already runs"):
        process.start("sleep 300")
    cluster3.ssh("n1").close()
    cluster3.ssh("n1").connect()
    assert process.running()
    process.signal("STOP")
    assert process.state() == "T"
    process.signal("CONT")
    assert process.state() == "S"
    process.signal("TERM")
    process.wait_exit(5)
    assert not process.running()
    assert not process.signal("TERM")


@pytest.mark.parametrize("end", ["kill", "stop"])
def test_db_pauses_resumes_and_ends_the_node_process(cluster3: Db, end: str) -> None:
    cluster3.process("n2").start("sleep 300")
    cluster3.pause("n2")
    assert cluster3.process("n2").state() == "T"
    cluster3.resume("n2")
    assert cluster3.process("n2").state() == "S"
    cluster3.pause("n2")
    getattr(cluster3, end)("n2")  # stop resumes a paused process so that SIGTERM can act
    assert not cluster3.running("n2")
    assert cluster3.process("n2").state() is None
