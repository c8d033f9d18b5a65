"""The asyncio node: one port for peers and clients, the logic driven by real time, the store.

The logic is the DLedger core (`nodes.core`) or, with `ServerConfig.ha`, RocketMQ's
master-slave replication (`nodes.ha.node`); the server sees it only as a `NodeLogic`
(`nodes.logic`). Everything runs on one event loop thread except disk flushes: the
store's own background thread (`Flusher.STORE_THREAD`), or group-commit flushes in an
executor thread (`Flusher.GROUP_COMMIT`: `--flush sync`, and any master-slave node, so
that a slave reports its durable offset as soon as it can; see `ServerConfig.durability`).
Inputs (frames, ticks, finished flushes) go into the logic; once per loop turn `_drive`
hands its outputs to the driver (`nodes.driver`, the same code the simulator runs), which
persists term and vote, writes the store, and calls back here to send peer messages,
answer clients and write events. The guarded rules the core, driver and recovery fired
(`nodes.coverage`) go to events.jsonl as `rules` lines: one at startup for recovery's,
then from the tick loop at most every `RULES_EVERY_S` when something fired, and one at a
clean shutdown.

A frame that cannot be parsed closes its connection; a frame that parses but does not
decode, or has an unknown type, is answered with `ErrorResponse`. Either way the node logs
it and goes on: nothing from the wire reaches the store except through the core. What a
node sends must fit in a frame too: an append with a body larger than `max_body` (what
fits in a data segment and in a push or a read answer carrying it alone) is refused with
UNEXPECTED_ARGUMENT, a read answer is cut by bytes (its `last_index` says where), and a
message that still cannot be framed is logged and dropped (see `_Connection.reply`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from nodes import coverage
from nodes import messages as m
from nodes.clientapi import (
    AppendRequest,
    ErrorResponse,
    GetRequest,
    LeadershipTransferRequest,
    MetadataRequest,
    PromoteRequest,
    PullRequest,
)
from nodes.clock import NodeClock
from nodes.codec import CodecError
from nodes.controlfile import PREFERRED_FILE, UNCHANGED, ControlFile
from nodes.core import Core, CoreConfig
from nodes.driver import Driver
from nodes.events import EventLog
from nodes.ha.config import BrokerRole, HaConfig
from nodes.ha.node import HaNode
from nodes.logic import ASYNC_FLUSH, Durability, Flusher, HaControl, NodeLogic, Ready
from nodes.peers import HA_MAX_BUFFERED, Address, PeerLink, buffer_limit
from nodes.protocol import (
    DLEDGER_PEER_TYPES,
    FIRST_PEER_TYPE,
    HA_PEER_TYPES,
    PeerHello,
    WireLimits,
    wire_codec,
    wire_limits,
)
from nodes.store.mmapstore import DEFAULT_DATA_SEGMENT, DEFAULT_INDEX_SEGMENT, MmapStore
from nodes.store.termfile import TERM_FILE, TermState, load_checkpoint, load_term
from nodes.timing import Timing
from nodes.wire import RECV_BYTES, FrameError, FrameParser, frame_message

log = logging.getLogger(__name__)

TICK_S = 0.005
ASYNC_FLUSH_MS = 10.0
MAX_READ_ENTRIES = 10000
RULES_EVERY_S = 1.0  # how often at most the rules fired go to events.jsonl


@dataclass(frozen=True)
class ServerConfig:
    node: str
    peers: dict[str, Address]
    data_dir: Path
    group: str = ""
    durability: Durability = ASYNC_FLUSH
    timing: Timing = field(default_factory=Timing)
    read_mode: m.ReadMode = m.ReadMode.READ_INDEX
    preferred_leader: str | None = None
    listen_host: str = "0.0.0.0"
    data_segment_size: int = DEFAULT_DATA_SEGMENT
    index_segment_size: int = DEFAULT_INDEX_SEGMENT
    log_dir: Path | None = None  # events.jsonl (and node.log, set up by serve); None: data_dir
    ha: HaConfig | None = None  # master-slave mode (None: DLedger)
    flush_delay_ms: float = 0.0  # a slow disk: each group-commit flush waits this long first

    @property
    def logs(self) -> Path:
        return self.log_dir or self.data_dir


class _Waiter(NamedTuple):
    """A client request waiting for the core's answer (a tuple: one is made per append)."""

    conn: _Connection
    request_id: int
    count: int = 1  # type: ignore[assignment]  # a field named as tuple.count: fine at run time


class _Connection(asyncio.BufferedProtocol):
    """One accepted connection: a client's, or a peer's once it said hello.

    Bytes are read into one buffer per connection (`get_buffer`): asyncio's default reads a
    fresh 256 KiB object per read and cuts it down to what came, which fragments the
    node's C heap over a long run.
    """

    def __init__(self, server: NodeServer) -> None:
        self._server = server
        self._parser = FrameParser()
        self._recv = memoryview(bytearray(RECV_BYTES))
        self._transport: asyncio.Transport | None = None
        self._out: list[bytes | bytearray] = []
        self.peer: str | None = None
        self.name = "?"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        host_port = transport.get_extra_info("peername")
        self.name = f"{host_port[0]}:{host_port[1]}" if host_port else "?"
        self._server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._server.connections.discard(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._recv

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._parser.feed(self._recv[:nbytes])
        except FrameError as exc:
            log.warning("closing connection from %s: %s", self.peer or self.name, exc)
            self.close()
            return
        server = self._server
        for frame in frames:
            try:
                server.on_frame(self, frame.msg_type, frame.request_id, frame.payload)
            except CodecError as exc:
                log.warning("bad frame (type %d) from %s: %s", frame.msg_type, self.peer or self.name, exc)
                server.refuse(self, frame.request_id, str(exc))
        server.schedule_drive()

    def reply(self, request_id: int, message: Any) -> None:
        """Queue a reply; all replies of a loop turn go out in one write.

        A reply that cannot be framed (too large, or not encodable) is logged; a read then
        gets an ErrorResponse instead, any other request a closed connection (the outcome of
        an append must stay unknown to its client, not become a refusal).
        """
        if self._transport is None:
            return
        codec = self._server.codec
        try:
            frame = frame_message(codec, message, request_id)
        except (ValueError, CodecError) as exc:
            log.error(
                "cannot answer request %d of %s with %s: %s",
                request_id,
                self.name,
                type(message).__name__,
                exc,
            )
            if not isinstance(message, m.ReadResponse):
                self._flush()
                self.close()
                return
            error = ErrorResponse(
                m.ResponseCode.INTERNAL_ERROR, message.leader, f"the answer does not fit: {exc}"
            )
            frame = frame_message(codec, error, request_id)
        if not self._out:
            asyncio.get_running_loop().call_soon(self._flush)
        self._out.append(frame)

    def _flush(self) -> None:
        if self._transport is not None and self._out:
            self._transport.write(b"".join(self._out))
        self._out.clear()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


class NodeServer:
    """One node: listener, peer links, logic, store, events."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.codec = wire_codec()
        data_dir = config.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        config.logs.mkdir(parents=True, exist_ok=True)
        self.clock = NodeClock(data_dir)
        self.events = EventLog(config.logs, config.node, self.clock)
        self.clock.on_change = self.events.clock
        self._preferred = ControlFile(data_dir / PREFERRED_FILE)
        if self.clock.offset_ms:
            self.events.clock(self.clock.offset_ms)
        # The store never waits for fsync inside an append: with group commit the driver runs
        # the flushes (and with `Ack.FSYNCED` the logic acks only what `flushed_index` covers);
        # otherwise (DLedger's) the store's own thread flushes every 10 ms.
        stable = load_checkpoint(data_dir)
        flusher = config.durability.flusher
        self.store = MmapStore(
            data_dir,
            data_segment_size=config.data_segment_size,
            index_segment_size=config.index_segment_size,
            flush_interval_ms=ASYNC_FLUSH_MS if flusher is Flusher.STORE_THREAD else None,
            stable_index=stable,
            refuse_lost=False,  # DLedger's way: cut at the damage and catch up from the others
        )
        log.info("store recovered: %s", self.store.recovery.summary())
        state = load_term(data_dir)
        fresh = self.store.end_index == -1 and not (data_dir / TERM_FILE).exists()
        self.events.start(state.term, state.vote_for, fresh)
        limits = wire_limits(self.codec, list(config.peers), MAX_READ_ENTRIES, config.ha is not None)
        # An entry body must fit in a data segment and in every frame that carries it.
        self.max_body = min(limits.max_body, self.store.max_body)
        self.logic = self._make_logic(state, limits)
        self._peer_types = DLEDGER_PEER_TYPES if config.ha is None else HA_PEER_TYPES
        t = config.timing
        max_buffered = (HA_MAX_BUFFERED if config.ha is not None
                        else buffer_limit(t.max_inflight_pushes, t.max_batch_bytes))
        self.links = {
            peer: PeerLink(config.node, config.group, peer, addr, self.codec, max_buffered)
            for peer, addr in config.peers.items()
            if peer != config.node
        }
        self.connections: set[_Connection] = set()
        self._pending: dict[int, list[_Waiter]] = {}
        self._batch: list[_Waiter] = []  # appends of this loop turn, handed to the core together
        self._batch_bodies: list[bytes] = []
        self._next_request = 1
        self._drive_scheduled = False
        self.driver = Driver(self.logic, self.store, data_dir, state, flusher, self)
        self._server: asyncio.Server | None = None
        self._rules_due = time.monotonic() + RULES_EVERY_S
        self._write_rules()  # what recovery fired, before the loop starts

    def _make_logic(self, state: TermState, limits: WireLimits) -> NodeLogic:
        config, now = self.config, self.clock.now_ms()
        if config.ha is not None:
            ha = dataclasses.replace(config.ha, max_read_bytes=limits.max_read_bytes)
            return HaNode(config.node, list(config.peers), self.store, ha, state.term, state.vote_for, now)
        core_config = CoreConfig(
            timing=config.timing,
            ack=config.durability.ack,
            lease_guard=config.read_mode is m.ReadMode.LEASE,
            preferred_leader=config.preferred_leader,
            max_read_bytes=limits.max_read_bytes,
        )
        peers = list(config.peers)
        return Core(config.node, peers, self.store, state.term, state.vote_for, core_config, now=now)

    # ---- lifecycle ---------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until `stop` is set, then close everything gracefully."""
        loop = asyncio.get_running_loop()
        me = self.config.peers[self.config.node]
        self._server = await loop.create_server(
            lambda: _Connection(self), self.config.listen_host, me.port, reuse_address=True
        )
        peers = ", ".join(f"{p}={a}" for p, a in self.config.peers.items())
        ha = self.config.ha
        log.info(
            "%s listening on %s:%d, peers %s, flush %s, %s",
            self.config.node,
            self.config.listen_host,
            me.port,
            peers,
            self.config.durability.flag,
            f"read mode {self.config.read_mode.label}" if ha is None else f"master-slave, {ha}",
        )
        for link in self.links.values():
            link.start()
        ticker = loop.create_task(self._tick_loop(stop), name="tick")
        stopped = loop.create_task(stop.wait(), name="stop")
        self._drive()
        await asyncio.wait([ticker, stopped], return_when=asyncio.FIRST_COMPLETED)
        for task in (ticker, stopped):
            task.cancel()
        await asyncio.gather(ticker, stopped, return_exceptions=True)
        await self.close()
        if not ticker.cancelled() and ticker.exception() is not None:
            raise ticker.exception()  # type: ignore[misc]  # the core failed: let serve exit 255

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        for link in self.links.values():
            await link.close()
        self.store.close()
        self.driver.checkpoint()
        self._write_rules()
        self.events.close()
        log.info("stopped at end index %d, committed %d", self.store.end_index, self.store.committed_index)

    async def _tick_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.clock.refresh()
            self._poll_preferred()
            now = self.clock.now_ms()
            self.logic.tick(now)
            self.driver.tick(now)
            self._drive()
            if (now_s := time.monotonic()) >= self._rules_due:
                self._rules_due = now_s + RULES_EVERY_S
                self._write_rules()
            await asyncio.sleep(TICK_S)

    def _write_rules(self) -> None:
        """A rules line with the counts fired since the last one, when any fired."""
        counts = coverage.take()
        if counts:
            self.events.rules(counts)

    def _poll_preferred(self) -> None:
        text = self._preferred.poll()
        if text is UNCHANGED:
            return
        peer = text or None
        try:
            self.logic.set_preferred_leader(peer)  # type: ignore[arg-type]
        except ValueError as exc:
            log.error("%s: %s; keeping the one before", PREFERRED_FILE, exc)
            return
        log.info("preferred leader now %s", peer)

    # ---- inputs ------------------------------------------------------------------------

    def on_frame(self, conn: _Connection, msg_type: int, request_id: int, payload: bytes) -> None:
        """Handle one frame from `conn`; CodecError for a payload that does not decode."""
        message = self.codec.decode(msg_type, payload)
        if msg_type >= FIRST_PEER_TYPE:
            self._on_peer_frame(conn, message)
            return
        handler = self._client_handlers.get(type(message))
        if handler is None:
            self.refuse(
                conn, request_id, f"{type(message).__name__} is not a request", m.ResponseCode.UNSUPPORTED
            )
            return
        if message.group and message.group != self.config.group:
            conn.reply(
                request_id,
                ErrorResponse(
                    m.ResponseCode.UNKNOWN_GROUP,
                    None,
                    f"this node serves group {self.config.group!r}, not {message.group!r}",
                ),
            )
            return
        handler(self, conn, request_id, message)

    def _on_peer_frame(self, conn: _Connection, message: Any) -> None:
        if isinstance(message, PeerHello):
            if message.node not in self.links or message.group != self.config.group:
                log.warning(
                    "refusing peer hello from %s: node %r group %r", conn.name, message.node, message.group
                )
                conn.close()
                return
            conn.peer = message.node
            return
        if conn.peer is None:
            log.warning("closing %s: peer message %s before a hello", conn.name, type(message).__name__)
            conn.close()
            return
        if type(message) not in self._peer_types:
            log.warning("dropping %s from %s: not a message of this node's mode", type(message).__name__,
                        conn.peer)
            return
        self.logic.receive(conn.peer, message, self.clock.now_ms())

    def _token(self, waiters: list[_Waiter]) -> int:
        token = self._next_request
        self._next_request += 1
        self._pending[token] = waiters
        return token

    def _on_metadata(self, conn: _Connection, request_id: int, _req: MetadataRequest) -> None:
        meta = dataclasses.replace(self.logic.metadata(), wall_ms=self.clock.wall_ns() // 1_000_000,
                                   clock_offset_ms=self.clock.offset_ms)
        conn.reply(request_id, meta)

    def refuse(
        self,
        conn: _Connection,
        request_id: int,
        text: str,
        code: m.ResponseCode = m.ResponseCode.UNEXPECTED_ARGUMENT,
    ) -> None:
        """Answer a request the node cannot take with an ErrorResponse (a definite refusal)."""
        conn.reply(request_id, ErrorResponse(code, self.logic.leader, text))

    def _on_append(self, conn: _Connection, request_id: int, req: AppendRequest) -> None:
        if not req.bodies:
            self.refuse(conn, request_id, "an append needs at least one body")
            return
        longest = max(map(len, req.bodies))
        if longest > self.max_body:
            text = f"an entry body of {longest} bytes exceeds the {self.max_body}-byte limit"
            log.warning("refusing an append from %s: %s", conn.name, text)
            self.refuse(conn, request_id, text)
            return
        self._batch.append(_Waiter(conn, request_id, len(req.bodies)))
        self._batch_bodies.extend(req.bodies)

    def _on_get(self, conn: _Connection, request_id: int, req: GetRequest) -> None:
        try:
            mode = m.ReadMode.parse(req.mode) if req.mode else self.config.read_mode
        except ValueError as exc:
            self.refuse(conn, request_id, str(exc))
            return
        if req.first < 0 or req.last < req.first or req.last - req.first >= MAX_READ_ENTRIES:
            text = (
                f"range {req.first}..{req.last}: need 0 <= first <= last, at most {MAX_READ_ENTRIES} entries"
            )
            self.refuse(conn, request_id, text)
            return
        token = self._token([_Waiter(conn, request_id)])
        self.logic.client_read(token, req.first, req.last, mode, self.clock.now_ms())

    def _on_transfer(self, conn: _Connection, request_id: int, req: LeadershipTransferRequest) -> None:
        self.logic.client_transfer(self._token([_Waiter(conn, request_id)]), req.to, self.clock.now_ms())

    def _ha_control(self, conn: _Connection, request_id: int, what: str) -> HaControl | None:
        """The logic's pulls and promotion, or None after refusing `what` in DLedger mode."""
        if isinstance(self.logic, HaControl):
            return self.logic
        self.refuse(conn, request_id, f"{what} needs --mode master-slave", m.ResponseCode.UNSUPPORTED)
        return None

    def _on_pull(self, conn: _Connection, request_id: int, req: PullRequest) -> None:
        logic = self._ha_control(conn, request_id, "a pull")
        if logic is None:
            return
        if req.offset < 0 or not 0 < req.max_entries <= MAX_READ_ENTRIES:
            text = (f"pull of {req.max_entries} from {req.offset}: need offset >= 0 and "
                    f"1..{MAX_READ_ENTRIES} entries")
            self.refuse(conn, request_id, text)
            return
        token = self._token([_Waiter(conn, request_id)])
        logic.client_pull(token, req.offset, req.max_entries, self.clock.now_ms())

    def _on_promote(self, conn: _Connection, request_id: int, req: PromoteRequest) -> None:
        logic = self._ha_control(conn, request_id, "a promotion")
        if logic is None:
            return
        if req.role:
            try:
                if not BrokerRole.parse(req.role).is_master:
                    raise ValueError(f"promote to a master role ({BrokerRole.SYNC_MASTER} or "
                                     f"{BrokerRole.ASYNC_MASTER}), not {req.role}")
            except ValueError as exc:
                self.refuse(conn, request_id, str(exc))
                return
        log.warning("promotion to master asked by %s (role %s)", conn.name, req.role or "as before")
        logic.client_promote(self._token([_Waiter(conn, request_id)]), req.role, self.clock.now_ms())

    _client_handlers: ClassVar[dict[type, Any]] = {
        MetadataRequest: _on_metadata,
        AppendRequest: _on_append,
        GetRequest: _on_get,
        LeadershipTransferRequest: _on_transfer,
        PullRequest: _on_pull,
        PromoteRequest: _on_promote,
    }

    # ---- outputs -----------------------------------------------------------------------

    def schedule_drive(self) -> None:
        """Carry out the core's outputs once this loop turn's inputs are all in."""
        if not self._drive_scheduled:
            self._drive_scheduled = True
            asyncio.get_running_loop().call_soon(self._drive)

    def _drive(self) -> None:
        self._drive_scheduled = False
        if self._batch:
            # One core call for all appends of this turn: one replication round carries them all.
            token = self._token(self._batch)
            bodies = self._batch_bodies
            self._batch, self._batch_bodies = [], []
            self.driver.client_append(token, bodies, self.clock.now_ms())
        self.driver.drive()

    # ---- the driver's host -------------------------------------------------------------

    def send(self, peer: str, message: m.PeerMessage) -> None:
        self.links[peer].send(message)

    def start_flush(self) -> None:
        flush = self.store.flush if not self.config.flush_delay_ms else self._slow_flush
        asyncio.get_running_loop().run_in_executor(None, flush).add_done_callback(self._flushed)

    def _slow_flush(self) -> int:
        time.sleep(self.config.flush_delay_ms / 1000)  # in the executor thread: a slow disk
        return self.store.flush()

    def _flushed(self, future: asyncio.Future[int]) -> None:
        exc = future.exception()
        if exc is not None:
            self.driver.flush_failed(exc)
            return
        self.driver.flushed(self.clock.now_ms())

    def complete(self, token: int, response: m.ClientResponse) -> None:
        waiters = self._pending.pop(token, ())
        if len(waiters) == 1:
            waiters[0].conn.reply(waiters[0].request_id, response)
            return
        if not isinstance(response, m.AppendResponse) or response.first_index < 0:
            for w in waiters:
                w.conn.reply(w.request_id, response)
            return
        first, code, term, leader = response.first_index, response.code, response.term, response.leader
        for w in waiters:  # a batch of appends: each request gets its own slice of the indexes
            last = first + w.count - 1
            w.conn.reply(w.request_id, m.AppendResponse(code, term, first, last, leader))
            first = last + 1

    def applied(self, ready: Ready) -> None:
        for change in ready.role_changes:
            log.info("role %s in term %d, leader %s", change.role.value, change.term, change.leader)
            self.events.role(change.term, change.role.value, change.leader, change.end_index)
        if ready.commit_index is not None:
            self.events.commit(self.logic.term, ready.commit_index)
        if ready.persist is not None:
            self.events.vote(*ready.persist)
        for peer, message in ready.messages:
            if isinstance(message, m.VoteResponse) and message.result is m.VoteResult.ACCEPT:
                self.events.vote(message.term, peer)
