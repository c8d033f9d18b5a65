"""After the workload: wait (bounded) for a leader and catch-up, then read every node's committed log.

Each node's committed log is read from that node alone, in `follower` mode (its own
committed entries, no redirect), in chunks, into `final/<node>.jsonl` as
`{"log_index", "term", "id"}` lines with consecutive indexes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.wait import wait_for
from nodes.client import Client, ClientError, commit_index_of
from nodes.payload import payload_id

log = logging.getLogger(__name__)
CHUNK = 1000


@dataclass
class CatchUp:
    """How the wait for catch-up ended."""

    leader: str | None
    commit_index: int
    lagging: dict[str, int]
    seconds: float

    @property
    def complete(self) -> bool:
        return self.leader is not None and not self.lagging


def observe(client: Client, names: list[str], started: float) -> CatchUp:
    """One look: the leader's confirmed commit index and the nodes whose own commit index is behind."""
    try:
        confirmed = client.get(0, 0, mode="read-index", timeout=2.0)
    except ClientError as e:
        log.info("no leader confirmed yet: %s", e)
        return CatchUp(None, -1, {n: -1 for n in names}, time.monotonic() - started)
    indexes = {n: commit_index_of(client, n) for n in names}
    target = confirmed.commit_index
    lagging = {n: -1 if i is None else i for n, i in indexes.items() if i is None or i < target}
    return CatchUp(confirmed.node, confirmed.commit_index, lagging, time.monotonic() - started)


def wait_for_catch_up(client: Client, names: list[str], timeout: float) -> CatchUp:
    """Until `timeout`: a leader answers a linearizable read and every node's commit index reaches its.

    Returns the last observation either way; the run records it and goes on to the final reads.
    """
    started = time.monotonic()
    last = [CatchUp(None, -1, {n: -1 for n in names}, 0.0)]

    def caught_up() -> bool:
        last[0] = observe(client, names, started)
        return last[0].complete

    with contextlib.suppress(HarnessError):
        wait_for(caught_up, timeout, "catch-up", interval=0.2)
    return last[0]


def read_final_log(client: Client, node: str, path: Path, timeout: float = 5.0) -> int:
    """Write the node's committed log to `path`; returns the number of entries written."""
    first, written = 0, 0
    with path.open("w", encoding="utf-8") as out:
        while True:
            result = client.get(first, first + CHUNK - 1, node=node, mode="follower", timeout=timeout)
            entries = [e for e in result.entries if e.index <= result.commit_index]
            for entry in entries:
                out.write(
                    json.dumps(
                        {
                            "log_index": entry.index,
                            "term": entry.term,
                            "id": None if entry.is_noop else payload_id(entry.body),
                        }
                    )
                    + "\n"
                )
            written += len(entries)
            if not entries or entries[-1].index >= result.commit_index:
                return written
            first = entries[-1].index + 1


def read_final_logs(client: Client, names: list[str], final_dir: Path) -> dict[str, int | str]:
    """Read every node's committed log; a node that cannot be read gets no file and its error."""
    outcome: dict[str, int | str] = {}
    for node in names:
        path = final_dir / f"{node}.jsonl"
        try:
            outcome[node] = read_final_log(client, node, path)
        except ClientError as e:
            path.unlink(missing_ok=True)
            outcome[node] = f"unreadable: {e}"
            log.warning("final read of %s failed: %s", node, e)
    return outcome
