"""The node's `rules` lines in events.jsonl: the guarded rules fired, written at startup for
recovery, from the tick loop while it runs, and at a clean shutdown."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from checkers.run.exercised import exercised
from nodes import coverage
from nodes.clock import NodeClock
from nodes.events import EVENTS_FILE, EventLog
from nodes.peers import Address
from nodes.server import NodeServer, ServerConfig
from nodes.store.mmapstore import MmapStore
from nodes.store.readfile import read_entries
from tests.support.localcluster import LocalCluster
from tests.support.waiting import wait_until

DATA_SEGMENT = 1 << 16
INDEX_SEGMENT = 32 * 100


def rules_lines(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line for line in lines if line["event"] == "rules"]


def test_a_rules_line_holds_the_counts_and_the_usual_fields(tmp_path):
    events = EventLog(tmp_path, "n1", NodeClock(tmp_path))
    events.rules({"push.truncate": 2, "append.timeout": 1})
    events.close()
    [line] = rules_lines(tmp_path / EVENTS_FILE)
    assert line["counts"] == {"append.timeout": 1, "push.truncate": 2} and line["node"] == "n1"
    assert isinstance(line["time_ns"], int) and isinstance(line["real_ns"], int)


def test_the_rules_recovery_fired_are_written_before_the_server_runs(tmp_path):
    data = tmp_path / "n1"
    store = MmapStore(data, data_segment_size=DATA_SEGMENT, index_segment_size=INDEX_SEGMENT,
                      flush_interval_ms=None)
    for i in range(5):
        store.append_leader(1, f"entry-{i}".encode() * 4)
    store.close()
    last = list(read_entries(data))[-1]
    segment = data / "data" / f"{last.pos - last.pos % DATA_SEGMENT:020d}"
    content = bytearray(segment.read_bytes())
    content[last.pos % DATA_SEGMENT + last.size - 3] ^= 0xFF  # a torn last entry: its CRC fails
    segment.write_bytes(bytes(content))
    coverage.take()  # whatever other tests in this process fired
    config = ServerConfig(node="n1", peers={"n1": Address("127.0.0.1", 1)}, data_dir=data,
                          data_segment_size=DATA_SEGMENT, index_segment_size=INDEX_SEGMENT)
    server = NodeServer(config)
    try:
        assert server.store.end_index == 3
        assert [line["counts"] for line in rules_lines(data / EVENTS_FILE)] == [{"recovery.cut-tail": 1}]
    finally:
        asyncio.run(server.close())


@pytest.mark.cluster
def test_a_live_cluster_writes_the_rules_its_elections_and_appends_fire(local_cluster):
    cluster: LocalCluster = local_cluster(3)
    logs = {node: cluster.data_dir(node) / EVENTS_FILE for node in cluster.ids}

    def fired(rule: str) -> int:
        return sum(line["counts"].get(rule, 0) for path in logs.values() for line in rules_lines(path))

    first = cluster.wait_for_leader()
    with cluster.client(timeout=5) as client:
        client.append(b"one")  # committed: some follower matched the leader's COMPARE first
        # written by the running nodes' tick loops (within about a second), not at shutdown
        wait_until(lambda: fired("push.compare.match") >= 1, 10, "a rules line with push.compare.match")
    cluster.kill(first)
    rest = [n for n in cluster.ids if n != first]
    second = cluster.wait_for_leader(among=rest)
    with cluster.client(timeout=5, nodes=rest) as client:
        client.append(b"two")
    for node in rest:
        assert cluster.stop(node) == 0
    # the second leader's follower matched too, counted at the latest by its clean shutdown
    assert fired("push.compare.match") >= 2
    for path in logs.values():
        for line in rules_lines(path):
            assert set(line) == {"event", "time_ns", "real_ns", "node", "counts"}
            assert all(rule in coverage.RULES and n > 0 for rule, n in line["counts"].items())
    found = exercised(logs)
    assert found["elections"] >= 2 and found["leader_changes"] >= 1
    assert {first, second} <= set(found["leaders"])
