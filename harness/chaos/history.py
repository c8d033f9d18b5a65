"""The history: every client and nemesis operation, streamed to `history.jsonl` as it happens.

Lines follow docs/formats.md's history contract (Jepsen's fields). Each line is written and
flushed when the operation is invoked or completes, so a run killed half-way still leaves
a usable, checkable prefix.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, Literal

from checkers.jsonlines import refused_by_non_leader

OpType = Literal["invoke", "ok", "fail", "info"]
Process = int | str
log = logging.getLogger("harness")


class History:
    """A thread-safe, append-only writer of history lines with run-relative times."""

    def __init__(self, path: Path, start_ns: int | None = None) -> None:
        self.path = path
        self.start_ns = time.monotonic_ns() if start_ns is None else start_ns
        # the wall clock at history time 0, to place the nodes' event lines on the history's time line
        self.start_wall_ns = time.time_ns() - (time.monotonic_ns() - self.start_ns)
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self._index = 0
        self._open: dict[Process, str] = {}
        self.counts: dict[str, int] = {"ok": 0, "fail": 0, "info": 0}  # appends and reads
        self.refused_directed = 0  # of the fails: reads asked of one node, refused (it did not lead)
        self.consumes: dict[str, int] = {"ok": 0, "fail": 0, "info": 0}

    def now(self) -> int:
        """Nanoseconds since the run started."""
        return time.monotonic_ns() - self.start_ns

    def invoke(self, process: Process, f: str, value: Any, node: str | None = None) -> int:
        """Record an invocation; returns its history index."""
        with self._lock:
            if process in self._open:
                raise RuntimeError(f"process {process} invoked {f} while {self._open[process]} is open")
            self._open[process] = f
            return self._write(process, "invoke", f, value, node, None)

    def complete(self, process: Process, op_type: OpType, f: str, value: Any,
                 node: str | None = None, error: str | None = None) -> int:
        """Record the completion of the process's open invocation."""
        with self._lock:
            if self._open.get(process) != f:
                raise RuntimeError(f"process {process} completed {f} without an open invoke of it")
            del self._open[process]
            if isinstance(process, int):
                (self.consumes if f == "consume" else self.counts)[op_type] += 1
                if refused_by_non_leader(op_type, value, error):
                    self.refused_directed += 1
            return self._write(process, op_type, f, value, node, error)

    def open_processes(self) -> dict[Process, str]:
        """Processes whose last invocation has not completed yet."""
        with self._lock:
            return dict(self._open)

    def _write(self, process: Process, op_type: str, f: str, value: Any,
               node: str | None, error: str | None) -> int:
        if self._file.closed:  # a call that outlived the run: its op stays open (indeterminate)
            log.warning("history closed: %s %s of process %s not recorded", op_type, f, process)
            return -1
        line: dict[str, Any] = {"index": self._index, "time": self.now(), "type": op_type,
                                "process": process, "f": f, "value": value}
        if node is not None:
            line["node"] = node
        if error is not None:
            line["error"] = error
        self._file.write(json.dumps(line, separators=(",", ":")) + "\n")
        self._file.flush()
        self._index += 1
        return line["index"]

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
