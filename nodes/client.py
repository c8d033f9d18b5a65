"""Client library for a DLedger group: leader discovery, redirects, timeouts, failure kinds.

The same client talks to a master-slave group (`serve --mode master-slave`): its leader is
the master, and `pull` (a consumer's read by offset) and `promote` (make a slave the
master) are for that mode only.

    client = Client(parse_peers("n1=127.0.0.1:9001,n2=127.0.0.1:9002"), timeout=3.0)
    ack = client.append(b"p1-1")          # AppendAck(first_index, last_index, term, node)

Every call has a deadline (`timeout` seconds, per call). Failures come in two kinds, which a
history must tell apart:

* `DefiniteFailure`: the operation surely did not happen (no node could be reached, the
  leader refused it with NOT_LEADER, LEADER_PENDING_FULL, ...). The harness records `fail`.
* `IndeterminateFailure`: it may or may not have happened (the deadline passed after the
  request was sent, the connection broke mid-call, the leader answered
  WAIT_QUORUM_ACK_TIMEOUT). The harness records `info`.

The client finds the leader through METADATA and remembers it. While the outcome is still
definite (nothing sent, or a definite refusal) it keeps looking for the leader until the
deadline, following NOT_LEADER redirects. A `Client` is not
thread-safe: give each worker thread its own.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nodes.clientapi import (
    DEFINITE_APPEND_FAILURES,
    AppendRequest,
    Code,
    ErrorResponse,
    GetRequest,
    LeadershipTransferRequest,
    MetadataRequest,
    PromoteRequest,
    PullRequest,
)
from nodes.codec import CodecError, MessageCodec
from nodes.messages import (
    AppendResponse,
    MetadataResponse,
    PromoteResponse,
    PullResponse,
    ReadResponse,
    TransferResponse,
)
from nodes.peers import Address
from nodes.protocol import wire_codec
from nodes.store.logstore import Entry
from nodes.wire import RECV_BYTES, FrameError, FrameParser, encode_frame

RETRY_PAUSE_S = 0.05  # between rounds over the nodes while no leader is known


class ClientError(Exception):
    """A call that did not succeed."""

    def __init__(self, message: str, code: Code = Code.UNKNOWN, leader: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.leader = leader


class DefiniteFailure(ClientError):
    """The operation surely did not take effect (record as `fail`)."""


class IndeterminateFailure(ClientError):
    """The operation may or may not have taken effect (record as `info`)."""


@dataclass(frozen=True, slots=True)
class AppendAck:
    first_index: int
    last_index: int
    term: int
    node: str


@dataclass(frozen=True, slots=True)
class ReadResult:
    """The entries of `first..last_index`: `last_index` is below the asked last index when the
    node cut its answer to fit one frame (ask again from `last_index + 1` for the rest)."""

    entries: list[Entry]
    commit_index: int
    node: str
    last_index: int
    leader: str | None = None  # the leader (master) the serving node knows


@dataclass(frozen=True, slots=True)
class TransferResult:
    term: int
    node: str


@dataclass(frozen=True, slots=True)
class PullResult:
    """A pull's entries from `node`, where to pull next (`next_offset`, from `suggest`), and
    the range that node serves (`min_offset..max_offset`)."""

    entries: list[Entry]
    next_offset: int
    min_offset: int
    max_offset: int
    suggest: str | None
    node: str
    leader: str | None = None  # the master the serving node knows


@dataclass(frozen=True, slots=True)
class PromoteResult:
    epoch: int
    node: str


class _Unsent(Exception):
    """The request never left (connect or send failed): its outcome is definite."""


class _NoTime(_Unsent):
    """The deadline passed before the request could be sent."""


class _Lost(Exception):
    """The request was sent but no answer came back."""


class _Connection:
    """One blocking TCP connection to one node, matching replies by request id."""

    def __init__(self, node: str, address: Address, codec: MessageCodec) -> None:
        self._name = f"{node} at {address}"
        self._address = address
        self._codec = codec
        self._sock: socket.socket | None = None
        self._parser = FrameParser()
        self._next_id = 1
        # replies are read into this one buffer: a fresh 64 KiB bytes object per recv, cut
        # down to the few bytes that came, fragments the C heap of a long-running caller
        self._recv_buf = bytearray(RECV_BYTES)

    def call(self, request: Any, deadline: float) -> Any:
        """Send `request`, return the decoded reply; _Unsent or _Lost on failure."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _NoTime("deadline passed before sending")
        type_id, payload = self._codec.encode(request)
        request_id = self._next_id
        self._next_id = (self._next_id + 1) & 0xFFFFFFFF or 1
        frame = encode_frame(type_id, request_id, payload)
        try:
            sock = self._connect(remaining)
            sock.settimeout(remaining)
            sock.sendall(frame)
        except OSError as exc:
            self.close()
            raise _Unsent(f"{self._name}: {exc.strerror or exc}") from exc
        try:
            return self._await(request_id, deadline)
        except (OSError, FrameError, CodecError, _Lost) as exc:
            self.close()
            raise _Lost(f"{self._name}: {exc or type(exc).__name__}") from exc

    def _connect(self, timeout: float) -> socket.socket:
        if self._sock is None:
            sock = socket.create_connection((self._address.host, self._address.port), timeout=timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
            self._parser = FrameParser()
        return self._sock

    def _await(self, request_id: int, deadline: float) -> Any:
        assert self._sock is not None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Lost("timed out waiting for the reply")
            self._sock.settimeout(remaining)
            n = self._sock.recv_into(self._recv_buf)
            if not n:
                raise _Lost("connection closed by the node")
            with memoryview(self._recv_buf) as view:
                frames = self._parser.feed(view[:n])
            for frame in frames:
                if frame.request_id == request_id:  # replies to earlier timed-out calls are skipped
                    return self._codec.decode(frame.msg_type, frame.payload)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class Client:
    """Talks to a DLedger group given its peers; see the module doc for failure kinds."""

    def __init__(
        self, peers: dict[str, Address], group: str = "", timeout: float = 3.0, max_redirects: int = 5
    ) -> None:
        if not peers:
            raise ValueError("a client needs at least one peer address")
        self.peers = dict(peers)
        self.group = group
        self.timeout = timeout
        self.max_redirects = max_redirects
        self.leader: str | None = None
        self._codec = wire_codec()
        self._conns: dict[str, _Connection] = {}

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- calls ---------------------------------------------------------------------------

    def metadata(self, node: str | None = None, timeout: float | None = None) -> MetadataResponse:
        """Metadata from `node`, or from the first node that answers."""
        deadline = self._deadline(timeout)
        errors: list[str] = []
        for candidate in [node] if node else self._order():
            try:
                reply = self._conn(candidate).call(MetadataRequest(self.group), deadline)
            except (_Unsent, _Lost) as exc:
                errors.append(str(exc))
                continue
            self._expect(reply, MetadataResponse, candidate)
            if reply.leader in self.peers:
                self.leader = reply.leader
            return reply
        raise DefiniteFailure("no node answered METADATA: " + "; ".join(errors), Code.NETWORK_ERROR)

    def append(self, body: bytes, timeout: float | None = None) -> AppendAck:
        """Append one body; see `append_batch`."""
        return self.append_batch([body], timeout)

    def append_batch(self, bodies: Sequence[bytes], timeout: float | None = None) -> AppendAck:
        """Append bodies at consecutive indexes on the leader and wait for their commit."""
        request = AppendRequest(list(bodies), self.group)
        node, reply = self._leader_call(request, AppendResponse, self._deadline(timeout), idempotent=False)
        if reply.code == Code.SUCCESS:
            return AppendAck(reply.first_index, reply.last_index, reply.term, node)
        kind = DefiniteFailure if reply.code in DEFINITE_APPEND_FAILURES else IndeterminateFailure
        raise kind(f"{node} answered {reply.code.name}", reply.code, reply.leader)

    def get(
        self,
        first: int,
        last: int | None = None,
        node: str | None = None,
        mode: str = "",
        timeout: float | None = None,
    ) -> ReadResult:
        """Entries `first..last` (one when last is None) in the node's or the given read mode.

        With `node`, ask that node only (no redirect); otherwise ask the leader. A large range
        may come back shorter: `last_index` says how far the answer goes.
        """
        request = GetRequest(first, first if last is None else last, self.group, mode)
        node, reply = self._read_call(request, ReadResponse, node, timeout)
        return ReadResult(reply.entries, reply.commit_index, node, reply.last_index, reply.leader)

    def transfer(self, to: str, timeout: float | None = None) -> TransferResult:
        """Ask the leader to hand leadership to `to`; returns once `to` leads."""
        if to not in self.peers:
            raise ValueError(f"transfer target {to!r} is not a peer; peers are {sorted(self.peers)}")
        node, reply = self._leader_call(
            LeadershipTransferRequest(to, self.group),
            TransferResponse,
            self._deadline(timeout),
            idempotent=True,
        )
        if reply.code != Code.SUCCESS:
            definite = reply.code in (Code.NOT_LEADER, Code.UNSUPPORTED)
            kind = DefiniteFailure if definite else IndeterminateFailure
            raise kind(f"{node} answered {reply.code.name}", reply.code, reply.leader)
        self.leader = to
        return TransferResult(reply.term, node)

    def pull(
        self, offset: int, max_entries: int = 32, node: str | None = None, timeout: float | None = None
    ) -> PullResult:
        """Master-slave mode: up to `max_entries` entries from `offset` on, from `node`, or from
        the master when None; the answer says which node to pull from next (`suggest`)."""
        request = PullRequest(offset, max_entries, self.group)
        node, reply = self._read_call(request, PullResponse, node, timeout)
        return PullResult(reply.entries, reply.next_offset, reply.min_offset, reply.max_offset, reply.suggest,
                          node, reply.leader)

    def promote(self, node: str, role: str = "", timeout: float | None = None) -> PromoteResult:
        """Master-slave mode: make `node` the master (`role` SYNC_MASTER or ASYNC_MASTER; ""
        keeps the flavour of the master it followed). Returns once it is."""
        reply = self._single_call(node, PromoteRequest(role, self.group), PromoteResponse,
                                  self._deadline(timeout))
        if reply.code != Code.SUCCESS:
            raise DefiniteFailure(f"{node} answered {reply.code.name}", reply.code, reply.leader)
        self.leader = node
        return PromoteResult(reply.epoch, node)

    # -- plumbing ------------------------------------------------------------------------

    def _deadline(self, timeout: float | None) -> float:
        return time.monotonic() + (self.timeout if timeout is None else timeout)

    def _order(self) -> list[str]:
        """Nodes to try: the known leader first, then the others in random order."""
        others = [n for n in self.peers if n != self.leader]
        random.shuffle(others)
        return ([self.leader] if self.leader else []) + others

    def _conn(self, node: str) -> _Connection:
        conn = self._conns.get(node)
        if conn is None:
            conn = self._conns[node] = _Connection(node, self.peers[node], self._codec)
        return conn

    def _expect(self, reply: Any, kind: type, node: str) -> None:
        if isinstance(reply, ErrorResponse):
            raise DefiniteFailure(
                f"{node} refused the request: {reply.code.name}: {reply.message}", reply.code, reply.leader
            )
        if not isinstance(reply, kind):
            raise IndeterminateFailure(
                f"{node} answered with {type(reply).__name__}, not {kind.__name__}", Code.UNKNOWN
            )

    def _read_call(
        self, request: Any, kind: type, node: str | None, timeout: float | None
    ) -> tuple[str, Any]:
        """A read-only request to `node` (no redirect), or to the leader; DefiniteFailure
        unless it answers SUCCESS."""
        deadline = self._deadline(timeout)
        if node is not None:
            reply = self._single_call(node, request, kind, deadline)
        else:
            node, reply = self._leader_call(request, kind, deadline, idempotent=True)
        if reply.code != Code.SUCCESS:
            raise DefiniteFailure(f"{node} answered {reply.code.name}", reply.code, reply.leader)
        return node, reply

    def _single_call(self, node: str, request: Any, kind: type, deadline: float) -> Any:
        if node not in self.peers:
            raise ValueError(f"node {node!r} is not a peer; peers are {sorted(self.peers)}")
        try:
            reply = self._conn(node).call(request, deadline)
        except _Unsent as exc:
            raise DefiniteFailure(str(exc), Code.NETWORK_ERROR) from exc
        except _Lost as exc:
            raise IndeterminateFailure(str(exc), Code.TIMEOUT) from exc
        self._expect(reply, kind, node)
        return reply

    def _discover(self, deadline: float, errors: dict[str, str]) -> None:
        """Learn the leader through METADATA from the first node that names another one.

        A node that names only itself may be a leader cut off from the others that does not
        know it yet (its writes would time out again): it is believed only when no other node
        names a leader. Each node gets a share of the call's time, so one paused node cannot use
        all of it.
        """
        share = self.timeout / (len(self.peers) + 1)
        self_claim: str | None = None
        for node in self._order():
            try:
                reply = self._conn(node).call(
                    MetadataRequest(self.group), min(deadline, time.monotonic() + share)
                )
            except (_Unsent, _Lost) as exc:
                if not isinstance(exc, _NoTime):
                    errors[node] = str(exc)
                continue
            if isinstance(reply, MetadataResponse) and reply.leader in self.peers:
                if reply.leader != node:
                    self.leader = reply.leader
                    return
                self_claim = node
        if self_claim is not None:
            self.leader = self_claim

    def _leader_call(self, request: Any, kind: type, deadline: float, idempotent: bool) -> tuple[str, Any]:
        """Send to the leader, following redirects and retrying while the outcome stays definite.

        A lost request of a non-idempotent call ends the call as indeterminate; an idempotent
        one (a read) is retried elsewhere until the deadline.
        """
        errors: dict[str, str] = {}  # the last error of each node
        answered = False
        redirects = 0
        while True:
            if self.leader is None:
                self._discover(deadline, errors)
            for node in self._order():
                target: str | None = node
                while target is not None and time.monotonic() < deadline:
                    try:
                        reply = self._conn(target).call(request, deadline)
                    except (_Unsent, _Lost) as exc:
                        if self.leader == target:
                            self.leader = None
                        if isinstance(exc, _Lost) and not idempotent:
                            raise IndeterminateFailure(str(exc), Code.TIMEOUT) from exc
                        if not isinstance(exc, _NoTime):
                            errors[target] = str(exc)
                        break
                    answered = True
                    self._expect(reply, kind, target)
                    if reply.code != Code.NOT_LEADER:
                        self.leader = target
                        return target, reply
                    errors[target] = f"{target}: NOT_LEADER (leader {reply.leader})"
                    self.leader = reply.leader if reply.leader in self.peers else None
                    redirects += 1
                    follow = self.leader != target and redirects <= self.max_redirects
                    target = self.leader if follow else None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                detail = "; ".join(errors.values()) or "no attempt"
                if answered:
                    raise DefiniteFailure(f"no leader found before the deadline: {detail}", Code.NOT_LEADER)
                raise DefiniteFailure(f"no node answered: {detail}", Code.NETWORK_ERROR)
            time.sleep(min(RETRY_PAUSE_S, remaining))


def commit_index_of(client: Client, node: str, timeout: float = 2.0) -> int | None:
    """The node's own commit index, or None when it does not answer."""
    try:
        return client.get(0, 0, node=node, mode="follower", timeout=timeout).commit_index
    except ClientError:
        return None
