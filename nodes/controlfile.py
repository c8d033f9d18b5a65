"""Control files: small text files in the data dir that steer a running node from outside.

The clock nemesis writes `clock-offset-ms`, the leader-churn nemesis `preferred-leader`.
A node polls each file every tick; one `stat` tells whether it changed (by mtime and size,
and a writer replaces the file with a rename, so a reader never sees half a value).
"""

from __future__ import annotations

import os
from pathlib import Path

UNCHANGED = object()
PREFERRED_FILE = "preferred-leader"  # the peer to hand leadership to, or empty for none


class ControlFile:
    """One control file; `poll()` returns its new text, None once it is removed, else UNCHANGED."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None

    def poll(self) -> str | object | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._stamp is None:
                return UNCHANGED
            self._stamp = None
            return None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return UNCHANGED
        self._stamp = stamp
        return self.path.read_text(encoding="utf-8", errors="replace").strip()
