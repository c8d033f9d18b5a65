"""What a run asks of any system under test, played by hand on a live cluster: appends through the
seam's client, a read of them, a consumer's pulls from every node, a kill -9 of the leader, appends
that go on and are consumed from a surviving node, the final reads.

`keeps_every_acknowledged_append(db, tmp_path)` is the whole scenario; each system's Docker test
calls it on a fresh cluster of its own (tests/systems/*/test_*_cluster.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.chaos.consumers import Puller
from harness.chaos.workload import Acked, LogClient
from harness.containers.db import Db
from harness.wait import wait_for
from nodes.client import ClientError
from nodes.payload import encode_payload

APPENDS = 20
AFTER_KILL = 5
ELECT_S = 60.0  # a new leader after a kill, on a busy machine


def append_until_ok(client: LogClient, append_id: str, timeout: float = ELECT_S) -> Acked:
    """Append `append_id`, again with the same id (the system answers a landed try's index) while the
    outcome is not ok."""
    def attempt() -> Acked | None:
        try:
            return client.append(encode_payload(append_id, 64))
        except ClientError:
            return None

    return wait_for(attempt, timeout, f"{append_id} was not appended within {timeout} s", interval=0.2)


def consume(puller: Puller, node: str, offset: int, want: int) -> list[tuple[int, str | None]]:
    """Pull from `node` from `offset` until `want` entries came (a replica may lag), in order."""
    got: list[tuple[int, str | None]] = []

    def pulled_all() -> bool:
        try:
            pulled = puller.pull(offset + len(got), node)
        except ClientError:
            return False
        assert pulled.node == node and pulled.next_offset == offset + len(got) + len(pulled.entries), pulled
        got.extend(pulled.entries)
        return len(got) >= want

    wait_for(pulled_all, ELECT_S, f"{node} served {len(got)} of {want} entries from {offset}", interval=0.2)
    return got


def keeps_every_acknowledged_append(db: Db, tmp_path: Path) -> None:
    """The scenario (see the module doc); AssertionError when an acknowledged append is not in every
    node's final log at its acknowledged index."""
    system = db.system
    client, puller = system.client(db, 5.0), system.puller(db, 5.0)
    acked: dict[str, int | None] = {}
    try:
        for i in range(APPENDS):
            ack = client.append(encode_payload(f"seam-{i}", 64))
            assert not ack.fields, ack  # not a duplicate
            acked[f"seam-{i}"] = ack.log_index
        assert list(acked.values()) == list(range(APPENDS))
        served = client.read(0, APPENDS - 1)
        assert (served.value["from"], served.value["to"]) == (0, APPENDS - 1)
        assert served.value["entries"] == [[index, append_id] for append_id, index in acked.items()]
        in_order = [(index, append_id) for append_id, index in acked.items()]
        for name in db.names:
            assert consume(puller, name, 0, APPENDS) == in_order
        leader = wait_for(lambda: system.leader(db, 5.0), ELECT_S, "no leader")
        db.kill(leader)
        assert not db.running(leader)
        for i in range(AFTER_KILL):
            acked[f"after-kill-{i}"] = append_until_ok(client, f"after-kill-{i}").log_index
        assert list(acked.values()) == list(range(APPENDS + AFTER_KILL))
        survivor = next(name for name in db.names if name != leader)
        assert consume(puller, survivor, APPENDS, AFTER_KILL) == [
            (APPENDS + i, f"after-kill-{i}") for i in range(AFTER_KILL)]
        db.start(leader)
    finally:
        client.close()
        puller.close()
    finish = system.finish(db, tmp_path, 60, 5.0)
    assert finish.final_logs == {name: len(acked) for name in db.names}, finish
    for name in db.names:
        lines = [json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
        held = {line["log_index"]: line["id"] for line in lines}
        assert {append_id: held.get(index) for append_id, index in acked.items()} == {
            append_id: append_id for append_id in acked}, (name, finish.catch_up)
