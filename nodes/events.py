"""What a node tells the outside: `events.jsonl` for machines and `node.log` for people.

Both go to the node's log dir (`serve --log-dir`, by default its data dir).

`events.jsonl`, one JSON object per line, written through at once (a kill -9 loses none):

* role change: `{"event": "role", "time_ns", "node", "term", "role", "leader", "end_index"}` with
  role `"candidate"`, `"leader"` or `"follower"`, leader the known leader's id or null, and
  end_index the last index of the node's log when it took the role (a leader's: before its
  no-op; master-slave nodes leave it out);
* commit advance: `{"event": "commit", "time_ns", "node", "term", "commit_index"}`;
* term and vote: `{"event": "vote", "time_ns", "node", "term", "candidate"}`, what the node
  saved in its term file (`candidate` null: the term alone), and each vote it grants (written
  before the grant is sent); repeats of the line before are skipped;
* process start: `{"event": "start", "time_ns", "node", "term", "vote", "fresh"}`, the term
  and vote the node recovered from its term file (`fresh`: no term file and an empty store,
  a node that starts with nothing);
* clock offset applied: `{"event": "clock", "time_ns", "node", "offset_ms"}`;
* guarded rules fired: `{"event": "rules", "time_ns", "node", "counts": {rule: n, ...}}`, the
  firings of each rule of `nodes.coverage.RULES` since the process's previous rules line
  (only rules that fired, n > 0). The server writes one at startup when recovery fired a
  rule, then at most about once a second when something fired, and a last one at a clean
  shutdown: a kill -9 loses the counts of at most the last second. Counts are per process,
  so a file holding several incarnations of the node sums to all of them.

`time_ns` is the node's wall clock (including the clock nemesis's offset); `real_ns` on
every line is the machine's own wall clock, without the offset, so lines of all nodes line
up with the harness's history.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from nodes.clock import NodeClock

EVENTS_FILE = "events.jsonl"
NODE_LOG = "node.log"


class EventLog:
    """Appends role-change, commit-advance, vote, start, clock and rules lines to `<log-dir>/events.jsonl`."""

    def __init__(self, log_dir: Path, node: str, clock: NodeClock) -> None:
        self._node = node
        self._clock = clock
        self._file: TextIO = open(log_dir / EVENTS_FILE, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        self._role: tuple[int, str, str | None] | None = None
        self._commit = -1
        self._vote: tuple[int, str | None] | None = None

    def role(self, term: int, role: str, leader: str | None, end_index: int | None = None) -> None:
        """Record a role change (repeats of the current (term, role, leader) are skipped), with
        the log's end when the node took it (a Raft node's)."""
        key = (term, role, leader)
        if key == self._role:
            return
        self._role = key
        line: dict[str, object] = {"event": "role", "term": term, "role": role, "leader": leader}
        if end_index is not None:
            line["end_index"] = end_index
        self._write(line)

    def commit(self, term: int, commit_index: int) -> None:
        """Record that the commit index advanced to `commit_index` (backwards moves are skipped)."""
        if commit_index <= self._commit:
            return
        self._commit = commit_index
        self._write({"event": "commit", "term": term, "commit_index": commit_index})

    def vote(self, term: int, candidate: str | None) -> None:
        """Record the term and vote saved, or a vote granted (repeats of the last are skipped)."""
        if (term, candidate) == self._vote:
            return
        self._vote = (term, candidate)
        self._write({"event": "vote", "term": term, "candidate": candidate})

    def start(self, term: int, vote: str | None, fresh: bool) -> None:
        """Record what the starting node recovered from its term file."""
        self._write({"event": "start", "term": term, "vote": vote, "fresh": fresh})

    def clock(self, offset_ms: float) -> None:
        """Record that the node's clock now runs `offset_ms` off the machine's."""
        self._write({"event": "clock", "offset_ms": offset_ms})

    def rules(self, counts: Mapping[str, int]) -> None:
        """Record how often each guarded rule fired since the previous rules line."""
        self._write({"event": "rules", "counts": dict(sorted(counts.items()))})

    def _write(self, fields: dict[str, object]) -> None:
        line = {"time_ns": self._clock.wall_ns(), "real_ns": time.time_ns(), "node": self._node, **fields}
        self._file.write(json.dumps(line, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self._file.close()


def setup_node_log(log_dir: Path, node: str, level: int = logging.INFO) -> None:
    """Send the node's logging to `<log-dir>/node.log`, and warnings also to stderr."""
    fmt = logging.Formatter(f"%(asctime)s {node} %(levelname)s %(name)s: %(message)s")
    file_handler = logging.FileHandler(log_dir / NODE_LOG, encoding="utf-8")
    file_handler.setFormatter(fmt)
    stderr_handler = logging.StreamHandler(sys.stderr)
    stderr_handler.setFormatter(fmt)
    stderr_handler.setLevel(logging.WARNING)
    root = logging.getLogger()
    root.setLevel(level)
    root.addHandler(file_handler)
    root.addHandler(stderr_handler)
