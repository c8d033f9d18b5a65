"""The command-line tools against a live cluster, and their errors when no node answers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


def nodes_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nodes", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_append_get_metadata_transfer(local_cluster):
    cluster = local_cluster(3)
    leader = cluster.wait_for_leader()
    peers = ("--peers", cluster.peers_arg)

    appended = nodes_cli("append", *peers, "--data", "hello", "--count", "3")
    assert appended.returncode == 0, appended.stderr
    acks = [json.loads(line) for line in appended.stdout.splitlines()]
    assert [a["node"] for a in acks] == [leader] * 3
    assert len({a["index"] for a in acks}) == 3

    got = nodes_cli("get", *peers, "--index", str(acks[0]["index"]), "--last", str(acks[-1]["index"]))
    assert got.returncode == 0, got.stderr
    assert [json.loads(line)["body"] for line in got.stdout.splitlines()] == ["hello"] * 3

    meta = nodes_cli("metadata", *peers)
    assert meta.returncode == 0 and json.loads(meta.stdout)["leader"] == leader

    target = next(n for n in cluster.ids if n != leader)
    moved = nodes_cli("transfer", *peers, "--to", target)
    assert moved.returncode == 0, moved.stderr
    assert cluster.wait_for_leader() == target


def test_no_node_answering_is_a_clear_error():
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    result = nodes_cli("append", "--peers", f"n1=127.0.0.1:{port}", "--data", "x", "--timeout", "0.5")
    assert result.returncode == 1
    assert "no node answered" in result.stderr and f"n1 at 127.0.0.1:{port}" in result.stderr


def test_bad_arguments_exit_254():
    result = nodes_cli("get", "--peers", "n1=localhost", "--index", "0")
    assert result.returncode == 254 and "ID=HOST:PORT" in result.stderr
    result = nodes_cli("serve", "--id", "n9", "--peers", "n1=127.0.0.1:1", "--data-dir", "/tmp/unused")
    assert result.returncode == 254 and "not one of the peers" in result.stderr
    serve = ("serve", "--id", "n1", "--peers", "n1=127.0.0.1:1", "--data-dir", "/tmp/unused")
    result = nodes_cli(*serve, "--timing-set", "heartbeat_ms=fast")
    assert result.returncode == 254 and "'heartbeat_ms=fast' is not FIELD=VALUE" in result.stderr
    result = nodes_cli(*serve, "--timing-set", "heartbeat=1")
    assert result.returncode == 254 and "unknown timing field(s) heartbeat" in result.stderr
