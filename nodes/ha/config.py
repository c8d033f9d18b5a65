"""Master-slave settings: the broker role, the HA timings and limits, the persisted master.

What a node knows about its group in this mode survives restarts in the `currterm` file
the DLedger mode uses for term and vote: `currTerm` holds the epoch, `voteLeader` the
master (`n2`, or `n2/SYNC_MASTER` with the master's flavour once known: this node's own
when it is the master, else the one its master's pushes last told). The file is written
when the node takes an epoch as master, learns of a newer master or of its master's
flavour, or is promoted, and the master it names wins over the command line's `--role` and
`--master` (which decide while it names none): a slave promoted at run time stays the
master after a restart with its old command line, and a master that learned of a newer one
stays that one's slave. A master's flavour (SYNC_MASTER or ASYNC_MASTER) is its `--role`
when that is a master role, else the flavour it was promoted to, or the flavour of the
master it followed (so a slave promoted right after a restart, before its master's first
push, keeps that master's flavour). Delete `currterm` to start over from the command line.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum

from nodes.logic import Ack


class BrokerRole(StrEnum):
    """RocketMQ's `BrokerRole`."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"

    @property
    def is_master(self) -> bool:
        return self is not BrokerRole.SLAVE

    @classmethod
    def parse(cls, text: str) -> BrokerRole:
        """`SYNC_MASTER` -> SYNC_MASTER (any case); ValueError naming the valid roles otherwise."""
        try:
            return cls(text.upper())
        except ValueError:
            raise ValueError(f"unknown broker role {text!r}: use one of {', '.join(cls)}") from None


@dataclass(frozen=True, slots=True)
class HaConfig:
    """How a master-slave node behaves; durations in ms of the node's clock, lags in entries.

    `role`/`master`: this node's role and, for a slave, the master's id, when the currterm
    file names no master (see the module doc). `ack`: `Ack.FSYNCED` makes the master's own
    fsync part of every acknowledgement (RocketMQ's SYNC_FLUSH); a slave always reports only
    what it fsynced. `sync_timeout_ms`: how long a SYNC_MASTER append waits for a slave
    (RocketMQ's syncFlushTimeout). `max_slave_lag`: a slave further behind than this, after
    an append, does not count as available (haSlaveFallbehindMax, in entries here).
    `suggest_slave_lag`: a pull further behind the master's end than this is told to pull
    from a slave. `report_interval_ms`: how often a slave reports its offset when idle
    (RocketMQ: 5 s). `heartbeat_ms`: how often a master heartbeats every peer.
    `housekeeping_ms`: a slave not heard of for this long is gone for the master, a master
    not heard of for this long is gone for its slaves (RocketMQ: 20 s); a master that
    starts waits at most this long for a peer to confirm its epoch before it takes writes.
    `resend_ms`: a slave whose log end did not advance for this long while entries were in
    flight is sent them again. `max_batch_entries`/`max_batch_bytes`: one push;
    `max_inflight_entries`: entries sent beyond the slave's log end; `max_pending_appends`:
    entries appended but not acknowledged before appends are refused (LEADER_PENDING_FULL).
    `max_read_bytes`: body bytes in one read or pull answer.
    """

    role: BrokerRole
    master: str | None = None
    ack: Ack = Ack.FSYNCED
    sync_timeout_ms: float = 5000.0
    max_slave_lag: int = 10000
    suggest_slave_lag: int = 10000
    report_interval_ms: float = 500.0
    heartbeat_ms: float = 200.0
    housekeeping_ms: float = 3000.0
    resend_ms: float = 500.0
    max_batch_entries: int = 1024
    max_batch_bytes: int = 1 << 20
    max_inflight_entries: int = 4096
    max_pending_appends: int = 10000
    max_read_bytes: int | None = None

    def __post_init__(self) -> None:
        if not self.role.is_master and not self.master:
            raise ValueError("a SLAVE needs its master (--master)")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
                raise ValueError(f"{f.name} must not be negative, not {value}")
        if self.max_batch_entries < 1 or self.max_inflight_entries < 1:
            raise ValueError("max_batch_entries and max_inflight_entries must be at least 1")


@dataclass(frozen=True, slots=True)
class MasterVote:
    """The master named in the currterm file, and its flavour when this node is that master."""

    master: str
    flavour: BrokerRole | None = None

    def encode(self) -> str:
        return f"{self.master}/{self.flavour.value}" if self.flavour is not None else self.master

    @classmethod
    def decode(cls, text: str | None) -> MasterVote | None:
        """The vote written by `encode`; None for no vote."""
        if not text:
            return None
        master, sep, flavour = text.rpartition("/")
        if sep and flavour in BrokerRole.__members__:
            return cls(master, BrokerRole(flavour))
        return cls(text)
