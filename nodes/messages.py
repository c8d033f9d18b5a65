"""Every peer message and client request/response of the DLedger core, as frozen dataclasses.

Fields use simple types only (int, str, bool, bytes, `list[Entry]`, optionals of those and
IntEnum codes) so a wire format can serialise any of them generically from its type hints.

Peer messages travel one way: a response names the request it answers by echoing its
`seq`. The sender of a message is known to the driver (the connection it came on) and is
passed to `Core.receive` beside it, so responses do not repeat it.

Append outcomes: SUCCESS is definite; NOT_LEADER, LEADER_PENDING_FULL, LEADER_TRANSFERRING,
DISK_FULL and UNEXPECTED_ARGUMENT (a body too large) are definite refusals (nothing was
appended); TERM_CHANGED, WAIT_QUORUM_ACK_TIMEOUT and DISK_ERROR are *indeterminate* (the
entry may still commit under a later leader), so a client must record them as unknown, not
failed. So are the master-slave mode's SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT and
FLUSH_DISK_TIMEOUT: the master wrote the entry before answering (as RocketMQ's broker does).

The master-slave mode (`nodes.ha`) adds its own peer messages (HaReport, HaPush,
HaTruncate, HaEpoch) and client answers (PullResponse, PromoteResponse).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from nodes.store.logstore import Entry


class ResponseCode(IntEnum):
    """DLedger's `DLedgerResponseCode`, same names and numbers, and RocketMQ's HA codes."""

    UNKNOWN = -1
    # RocketMQ's broker codes (its `ResponseCode`, same names and numbers), answered to appends
    # in master-slave mode; each leaves the entry in the master's log (indeterminate outcome)
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    SUCCESS = 200
    TIMEOUT = 300
    METADATA_ERROR = 301
    NETWORK_ERROR = 302
    UNSUPPORTED = 303
    UNKNOWN_GROUP = 400
    UNKNOWN_MEMBER = 401
    UNEXPECTED_MEMBER = 402
    EXPIRED_TERM = 403
    NOT_LEADER = 404
    NOT_FOLLOWER = 405
    INCONSISTENT_STATE = 406
    INCONSISTENT_TERM = 407
    INCONSISTENT_INDEX = 408
    INCONSISTENT_LEADER = 409
    INDEX_OUT_OF_RANGE = 410
    UNEXPECTED_ARGUMENT = 411
    REPEATED_REQUEST = 412
    REPEATED_PUSH = 413
    DISK_ERROR = 414
    DISK_FULL = 415
    TERM_NOT_READY = 416
    FALL_BEHIND_TOO_MUCH = 417
    TAKE_LEADERSHIP_FAILED = 418
    INDEX_LESS_THAN_LOCAL_BEGIN = 419
    INTERNAL_ERROR = 500
    TERM_CHANGED = 501
    WAIT_QUORUM_ACK_TIMEOUT = 502
    LEADER_PENDING_FULL = 503
    ILLEGAL_MEMBER_STATE = 504
    LEADER_NOT_READY = 505
    LEADER_TRANSFERRING = 506


class VoteResult(IntEnum):
    """DLedger's `VoteResponse.RESULT`."""

    UNKNOWN = 0
    ACCEPT = 1
    REJECT_UNKNOWN_LEADER = 2
    REJECT_UNEXPECTED_LEADER = 3
    REJECT_EXPIRED_VOTE_TERM = 4
    REJECT_ALREADY_VOTED = 5
    REJECT_ALREADY_HAS_LEADER = 6
    REJECT_TERM_NOT_READY = 7
    REJECT_TERM_SMALL_THAN_LEDGER = 8
    REJECT_EXPIRED_LEDGER_TERM = 9
    REJECT_SMALL_LEDGER_END_INDEX = 10
    REJECT_TAKING_LEADERSHIP = 11


class PushType(IntEnum):
    """DLedger's `PushEntryRequest.Type`: what a replication push asks of a follower."""

    APPEND = 1
    COMMIT = 2
    COMPARE = 3
    TRUNCATE = 4


class ReadMode(IntEnum):
    """How a read is served (see docs/dledger.md, "Read modes")."""

    READ_INDEX = 1
    LEASE = 2
    COMMITTED = 3
    FOLLOWER = 4
    UNSAFE = 5

    @property
    def label(self) -> str:
        """The command-line / test.json spelling: `read-index`, `lease`, ..."""
        return self.name.lower().replace("_", "-")

    @property
    def linearizable(self) -> bool:
        """Whether reads in this mode are linearizable (the rest answer from a prefix of the log)."""
        return self in (ReadMode.READ_INDEX, ReadMode.LEASE)

    @classmethod
    def parse(cls, text: str) -> ReadMode:
        """`read-index` -> READ_INDEX; ValueError naming the valid modes otherwise."""
        for mode in cls:
            if mode.label == text:
                return mode
        valid = ", ".join(m.label for m in cls)
        raise ValueError(f"unknown read mode {text!r}: use one of {valid}")


# --- election -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """A candidate asks for a vote at `term`, showing its log end.

    `transfer` is set by a transferee taking leadership on the leader's request, in the term
    the leader handed over only; it passes the lease guard (our addition) that otherwise
    keeps a live leader's followers loyal.
    """

    term: int
    candidate: str
    ledger_end_index: int
    ledger_end_term: int
    seq: int
    transfer: bool


@dataclass(frozen=True, slots=True)
class VoteResponse:
    """The voter's answer; `term` is the voter's current term."""

    term: int
    result: VoteResult
    seq: int


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """The leader's periodic heartbeat; each round has a fresh `seq` (read-index uses it)."""

    term: int
    leader: str
    seq: int


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    """A follower's answer to a heartbeat: SUCCESS, EXPIRED_TERM, INCONSISTENT_LEADER ..."""

    term: int
    code: ResponseCode
    seq: int


# --- replication ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PushRequest:
    """One replication push from the leader's dispatcher for this follower.

    `index`/`index_term` is the entry the follower must hold for the push to apply: the
    compared entry (COMPARE), the entry to keep as the last one (TRUNCATE), or the entry
    just before `entries` (APPEND). `entries` are consecutive (APPEND only).
    """

    term: int
    leader: str
    seq: int
    type: PushType
    index: int
    index_term: int
    commit_index: int
    entries: list[Entry]


@dataclass(frozen=True, slots=True)
class PushResponse:
    """A follower's answer to a push.

    `match_index`: on SUCCESS, the follower's log matches the leader's up to here and is
    durable under the flush policy (-1 otherwise). `end_index`: the follower's log end.
    `hint_index`: on INCONSISTENT_STATE, where the leader should compare next (fast
    conflict back-off: below the whole conflicting term).
    """

    term: int
    code: ResponseCode
    seq: int
    type: PushType
    match_index: int
    end_index: int
    hint_index: int


# --- leadership transfer --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TransferRequest:
    """The leader tells a caught-up transferee to take leadership at `term + 1`."""

    term: int
    leader: str
    seq: int


# --- client API -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AppendResponse:
    """Outcome of `Core.client_append`: the bodies got `first_index..last_index` in `term`."""

    code: ResponseCode
    term: int
    first_index: int
    last_index: int
    leader: str | None


@dataclass(frozen=True, slots=True)
class ReadResponse:
    """Outcome of `Core.client_read`: the entries of the range the mode allows.

    `commit_index` is the serving node's commit index when it answered; for the
    `unsafe` mode `entries` may go beyond it. `last_index` (our addition) is the last index
    of the asked range this answer covers: the asked last index, or the last entry's when
    the entries were cut to fit one reply (ask again from the next index); -1 on a refusal.
    """

    code: ResponseCode
    entries: list[Entry]
    commit_index: int
    leader: str | None
    last_index: int


@dataclass(frozen=True, slots=True)
class TransferResponse:
    """Outcome of `Core.client_transfer`."""

    code: ResponseCode
    term: int
    leader: str | None


@dataclass(frozen=True, slots=True)
class MetadataResponse:
    """Outcome of `Core.metadata`: DLedger's METADATA (peers and the known leader).

    The server adds what its clock says: `wall_ms` (its wall clock, clock offset included)
    and `clock_offset_ms` (the offset the clock nemesis set), so a skew shows from outside.
    `mode` is `dledger` or `master-slave`; in master-slave mode `leader` is the master this
    node knows, `term` the master's epoch, `role` `leader` on the master taking writes
    (`follower` on a slave, `candidate` on a master not yet sure it still is one),
    `broker_role` RocketMQ's (SYNC_MASTER, ASYNC_MASTER, SLAVE) and `slaves` the live
    slaves a master streams to (empty elsewhere).
    """

    peers: list[str]
    leader: str | None
    term: int
    role: str
    wall_ms: int = 0
    clock_offset_ms: float = 0.0
    mode: str = "dledger"
    broker_role: str = ""
    slaves: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PullResponse:
    """Outcome of a consumer pull (master-slave mode), RocketMQ's PullMessage answer.

    `entries` from the asked offset on (what the node serves: see `nodes.ha.node`),
    `next_offset` where to pull next, `min_offset`/`max_offset` the first and last index the
    node serves, `suggest` the node to pull from next (RocketMQ's suggestWhichBrokerId: a
    slave when the consumer lags the master's end too far, the master otherwise), `leader`
    the master this node knows.
    """

    code: ResponseCode
    entries: list[Entry]
    next_offset: int
    min_offset: int
    max_offset: int
    suggest: str | None
    leader: str | None


@dataclass(frozen=True, slots=True)
class PromoteResponse:
    """Outcome of a promotion: the node is master at `epoch` (`leader` is the master it knows)."""

    code: ResponseCode
    epoch: int
    leader: str | None


# --- master-slave replication (RocketMQ HA, seed 003) -----------------------------------


@dataclass(frozen=True, slots=True)
class EpochStart:
    """In a log's epoch map: the entries from `first_index` on have term `epoch`."""

    epoch: int
    first_index: int


@dataclass(frozen=True, slots=True)
class HaReport:
    """Slave to master (RocketMQ's HAClient reportSlaveMaxOffset): the slave follows `master`
    at `epoch`, holds its log durably (fsynced) up to `offset` and written up to `end_index`;
    `epochs` is its epoch map, for the master's consistency check."""

    epoch: int
    master: str
    offset: int
    end_index: int
    epochs: list[EpochStart]


@dataclass(frozen=True, slots=True)
class HaPush:
    """Master to slave (RocketMQ's HAConnection WriteSocketService): consecutive log entries
    for the slave to append, or none (a heartbeat, also sent to every other peer so they
    learn the master's epoch). `sync` is the master's flavour (SYNC_MASTER), `end_index`
    its log end."""

    epoch: int
    master: str
    sync: bool
    end_index: int
    entries: list[Entry]


@dataclass(frozen=True, slots=True)
class HaTruncate:
    """Master to slave: the slave's log diverges from the master's after `after`; cut it there."""

    epoch: int
    master: str
    after: int


@dataclass(frozen=True, slots=True)
class HaEpoch:
    """To a node that spoke for an older epoch: the newest master this node knows."""

    epoch: int
    master: str


PeerMessage = (
    VoteRequest
    | VoteResponse
    | HeartbeatRequest
    | HeartbeatResponse
    | PushRequest
    | PushResponse
    | TransferRequest
    | HaReport
    | HaPush
    | HaTruncate
    | HaEpoch
)
ClientResponse = AppendResponse | ReadResponse | TransferResponse | PullResponse | PromoteResponse
