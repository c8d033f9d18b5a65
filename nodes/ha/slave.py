"""The slave's side (RocketMQ's HAClient), as plain state; `nodes.ha.node` drives it.

A slave reports to its master the last index it holds *durably* (fsynced), never one it
only wrote: a master counting written-but-unflushed entries as replicated would
acknowledge writes a slave's power loss can still lose (the RocketMQ bug class where a
SYNC_MASTER acknowledged writes no slave had). It reports when that durable offset moves
(after each batch it wrote is flushed), every `report_interval_ms` while idle, and at once
when it starts following a master or cut its log. It counts its master as gone when it
heard nothing from it (entries or heartbeats) for `housekeeping_ms`.
"""

from __future__ import annotations

from nodes.ha.config import HaConfig


class Reporter:
    """When the slave reports, and what it knows of its master's liveness and log end."""

    def __init__(self, config: HaConfig, now: float) -> None:
        self._config = config
        self.reported = -2  # the durable offset last reported (-2: none yet)
        self.next_report = now
        self.last_contact: float | None = None  # when the master was last heard from
        self.master_end = -1

    def restart(self, now: float) -> None:
        """A new master (or epoch): report at once, nothing heard from it yet."""
        self.reported, self.next_report, self.last_contact, self.master_end = -2, now, None, -1

    def heard(self, now: float, master_end: int) -> None:
        self.last_contact = now
        self.master_end = master_end

    def master_alive(self, now: float) -> bool:
        last = self.last_contact
        return last is not None and now - last <= self._config.housekeeping_ms

    def due(self, durable: int, now: float) -> bool:
        """Whether to report now: the durable offset moved, or the interval passed."""
        return durable != self.reported or now >= self.next_report

    def sent(self, durable: int, now: float) -> None:
        self.reported = durable
        self.next_report = now + self._config.report_interval_ms

    def force(self, now: float) -> None:
        """Report at the next chance (the log was cut)."""
        self.next_report = now
