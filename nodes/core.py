"""The DLedger consensus core: election, push replication, client requests, as one sans-IO state machine.

No sockets, threads, clocks or sleeps: a driver (the asyncio server, the simulator) feeds
it inputs and carries out its outputs.

Inputs (each takes the driver's current time in ms, `now`, from one monotonic clock):
`tick(now)` at least every few ms (10 ms is plenty), `receive(sender, message, now)` for
each peer message, `client_append / client_read / client_transfer` for clients, and
`store_progress(now)` after the store flushed more of the log.

The core never does IO: it reads its store through a read-only interface and returns
every store write as an output (entries to append, truncate after index N, the commit
index to record), in order, as etcd's raft does (`nodes.logview`). Flushing, and deciding
what a full disk means, are the driver's job (`nodes.driver`).

Outputs accumulate until the driver calls `ready()`, which returns them as a `Ready`
(`nodes.logic`, the seam's words) and starts a new batch. The driver MUST, in this order:

1. make `ready.persist` (term, vote) durable (fsync) if it is not None;
2. carry out `ready.writes` on the store, in order (without waiting for an fsync), and
   record `ready.store_commit` as the store's committed index; this must be done before
   the core gets its next input, because from then on the core reads them from the store;
3. then send `ready.messages` (in order, to each `(peer, message)`);
4. deliver `ready.completions` to clients, log `ready.role_changes` and `ready.commit_index`.

Flushing: when `CoreConfig.ack` is `Ack.FSYNCED` (`--flush sync`) an entry counts toward
the leader's own match index, and a follower acknowledges it, only once
`store.flushed_index` covers it; the driver flushes when `store.flushed_index <
store.end_index` (group commit: after any batch of inputs) and then calls
`store_progress(now)`. With `Ack.WRITTEN` (`--flush async`, DLedger's) the core counts
and acknowledges entries as soon as they are written, so a power loss can lose entries
the cluster considered committed. `nodes.logic.durability` decides it from the flag.

A new core starts as CANDIDATE with the persisted term and vote; the store is its log.
"""

from __future__ import annotations

import dataclasses
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodes.coverage import hit
from nodes.election import ParseResult, Role, Rule, VoteRound, VoterView, judge_heartbeat, judge_vote
from nodes.logic import NOTHING, Ack, Ready, RoleChange
from nodes.logview import LogView, ReadableLog
from nodes.messages import (
    AppendResponse,
    ClientResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    MetadataResponse,
    PeerMessage,
    PushRequest,
    PushResponse,
    PushType,
    ReadMode,
    ReadResponse,
    ResponseCode,
    TransferRequest,
    TransferResponse,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from nodes.reads import Confirmations, PendingRead, read_range
from nodes.replication import Dispatcher, commits_by_counting, handle_push, quorum_index
from nodes.store.logstore import MAGIC_NOOP
from nodes.timing import Timing
from nodes.transfer import LeaderTransfer, refusal


@dataclass(frozen=True, slots=True)
class CoreConfig:
    """How a core behaves beyond its timing.

    `lease_guard` (our addition, off by default as in DLedger): followers that heard from
    a live leader within `timing.leader_lost_ms` refuse higher-term candidates (except a
    transferee), which is what makes `lease` reads safe; a leader that told a transferee
    to campaign serves none for the rest of its term, since that transferee may still win
    after the transfer timed out. Without the guard lease reads answer UNSUPPORTED.
    `preferred_leader`: a leader hands over to this peer when it is caught up.
    `ack`: what an entry needs before it counts and is acknowledged (see the module doc).
    `max_read_bytes`: a read answers with entries whose bodies add up to at most this (the
    first entry always) and says in `last_index` where it stopped; None for no limit.
    """

    timing: Timing = field(default_factory=Timing)
    ack: Ack = Ack.FSYNCED
    lease_guard: bool = False
    preferred_leader: str | None = None
    max_read_bytes: int | None = None


@dataclass(slots=True)
class _PendingAppend:
    last: int
    request_id: int
    first: int
    deadline: float


class Core:
    """One DLedger member's consensus state machine."""

    def __init__(
        self,
        node_id: str,
        peers: Sequence[str],
        store: ReadableLog,
        term: int = 0,
        vote: str | None = None,
        config: CoreConfig | None = None,
        rng: random.Random | None = None,
        now: float = 0.0,
    ) -> None:
        if node_id not in peers:
            raise ValueError(f"node id {node_id!r} is not among the peers {list(peers)}")
        if len(set(peers)) != len(peers):
            raise ValueError(f"peers {list(peers)} contain duplicates")
        self.node_id = node_id
        self.peers = list(peers)
        self.members = frozenset(peers)
        self.others = [p for p in peers if p != node_id]
        self.quorum = len(peers) // 2 + 1
        self.log = LogView(store)
        self.config = config or CoreConfig()
        self.timing = self.config.timing
        self._sync = self.config.ack is Ack.FSYNCED
        self._rng = rng or random.Random()
        self._now = now
        self._out = Ready()
        self._seq = 0
        self.term = term
        self.vote_for = vote
        self.role = Role.CANDIDATE
        self.leader: str | None = None
        self.commit_index = min(store.committed_index, store.end_index)
        # candidate
        self._known_max_term = term
        self._increase_term_now = False
        # We differ: a node that voted for itself in its persisted term may have led it and
        # lost unflushed entries of that term; it must not lead that term again, so its
        # first round raises the term (DLedger would re-campaign in the same term). A node
        # that voted for another cannot have led it: a round passes only with its own vote.
        self._last_parse = ParseResult.WAIT_TO_VOTE_NEXT if vote == node_id else ParseResult.WAIT_TO_REVOTE
        self._next_vote_at = now
        self._round: VoteRound | None = None
        self._taking: int | None = None  # the term a transfer handed this node (termToTakeLeadership)
        # follower
        self._last_leader_contact = now
        self._guard_until = now + self.timing.leader_lost_ms  # a restarted node cannot know the lease
        self._follower_timeout = self._draw_follower_timeout()
        self._leader_match = -1
        self._deferred_acks: list[tuple[int, str, PushResponse]] = []
        # leader
        self._dispatchers: dict[str, Dispatcher] = {}
        self._confirm = Confirmations(self.others, self.quorum, now)
        self._next_heartbeat_at = now
        self._term_start = -1
        self._pending: deque[_PendingAppend] = deque()
        self._reads: list[PendingRead] = []
        self._transfer: LeaderTransfer | None = None
        # set once a transferee was told to campaign: it may still win after the transfer
        # timed out (its votes need no lease guard), so no lease read for the rest of the term
        self._lease_forfeited = False
        self._next_preferred_check = now
        self._emit_role()

    # ---- driver API ------------------------------------------------------------------

    def ready(self) -> Ready:
        """The outputs accumulated since the last call (see the module docstring).

        Reads waiting for a leadership check share one heartbeat round, sent here.
        """
        if self._reads and self.role is Role.LEADER and self._reads[-1].need_seq > self._confirm.last_seq:
            self._send_heartbeats(self._now)
        writes = self.log.take_writes()
        out = self._out
        if not writes and not out:
            return NOTHING  # most calls (a tick, a drive after a flush) have nothing to carry out
        out.writes = writes
        self._out = Ready()
        return out

    def tick(self, now: float) -> None:
        """Time passed: run the timers of the current role."""
        self._now = now
        if self._transfer is not None and self._transfer.expired(now):
            hit("transfer.timeout")
            self._finish_transfer(ResponseCode.TIMEOUT)
        if self.role is Role.LEADER:
            self._leader_tick(now)
        elif self.role is Role.FOLLOWER:
            if now - self._last_leader_contact > self._follower_timeout:
                self._become_candidate(self.term)
                self._candidate_tick(now)
        else:
            self._candidate_tick(now)

    def receive(self, sender: str, message: PeerMessage, now: float) -> None:
        """A peer message arrived from `sender`."""
        self._now = now
        if sender not in self.members or sender == self.node_id:
            return
        handler = _HANDLERS[type(message)]
        handler(self, sender, message)

    def store_progress(self, now: float) -> None:
        """The store flushed more (`store.flushed_index` moved): release what waited for it."""
        self._now = now
        if self._deferred_acks:
            durable = self._durable_index()
            waiting = []
            for need, peer, resp in self._deferred_acks:
                if need <= durable:
                    self._send(peer, resp)
                else:
                    waiting.append((need, peer, resp))
            self._deferred_acks = waiting
        self._record_commit()
        if self.role is Role.LEADER:
            self._advance_commit()

    def client_append(self, request_id: int, bodies: Sequence[bytes], now: float) -> None:
        """Append `bodies` as consecutive entries; completes once committed (or refused)."""
        self._now = now
        code = self._append_refusal(len(bodies))
        if code is not None:
            self._complete(request_id, AppendResponse(code, self.term, -1, -1, self.leader))
            return
        indexes = self.log.append_many(self.term, bodies)
        first, last = indexes.start, indexes.stop - 1
        self._pending.append(_PendingAppend(last, request_id, first, now + self.timing.append_timeout_ms))
        self._replicate()

    def client_read(self, request_id: int, first: int, last: int, mode: ReadMode, now: float) -> None:
        """Read entries `first..last` under `mode`; completes now or after a leadership check."""
        self._now = now
        if mode is ReadMode.FOLLOWER:
            self._complete_read(request_id, first, last)
            return
        if self.role is not Role.LEADER:
            self._reply_read(request_id, ResponseCode.NOT_LEADER)
            return
        if mode is ReadMode.COMMITTED:
            self._complete_read(request_id, first, last)
            return
        if mode is ReadMode.UNSAFE:
            self._complete_read(request_id, first, last, self.log.end_index)
            return
        if mode is ReadMode.LEASE:
            if not self.config.lease_guard:
                self._reply_read(request_id, ResponseCode.UNSUPPORTED)
                return
            if self._lease_covers_read():
                self._complete_read(request_id, first, last)
                return
            hit("lease.read-waits")
        self._reads.append(
            PendingRead(
                request_id, first, last, self._confirm.last_seq + 1, now + self.timing.read_timeout_ms
            )
        )

    def client_transfer(self, request_id: int, transferee: str, now: float) -> None:
        """Hand leadership to `transferee` (DLedger's LEADERSHIP_TRANSFER)."""
        self._now = now
        if self.role is not Role.LEADER:
            self._complete(request_id, TransferResponse(ResponseCode.NOT_LEADER, self.term, self.leader))
            return
        disp = self._dispatchers.get(transferee)
        code = refusal(
            transferee,
            self.node_id,
            self.members,
            self._transfer is not None,
            self.log.end_index,
            disp.match_index if disp else -1,
            self.timing.transfer_max_lag,
        )
        if code is not None:
            self._complete(request_id, TransferResponse(code, self.term, self.leader))
            return
        self._start_transfer(transferee, request_id)

    def set_preferred_leader(self, peer: str | None) -> None:
        """Change the preferred leader at run time (None: no preference)."""
        if peer is not None and peer not in self.peers:
            raise ValueError(f"preferred leader {peer!r} is not one of the peers {sorted(self.peers)}")
        self.config = dataclasses.replace(self.config, preferred_leader=peer)

    def metadata(self) -> MetadataResponse:
        """DLedger's METADATA: the members and the leader this node knows."""
        return MetadataResponse(list(self.peers), self.leader, self.term, self.role.value)

    @property
    def taking_term(self) -> int | None:
        """The term a leader last handed this node by transfer (it takes leadership while that
        is its term), until it follows or leads in that term or a later one."""
        return self._taking

    # ---- output helpers --------------------------------------------------------------

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _send(self, peer: str, message: PeerMessage) -> None:
        self._out.messages.append((peer, message))

    def _complete(self, request_id: int, response: ClientResponse) -> None:
        self._out.completions.append((request_id, response))

    def _persist(self) -> None:
        self._out.persist = (self.term, self.vote_for)

    def _emit_role(self) -> None:
        self._out.role_changes.append(RoleChange(self.term, self.role, self.leader, self.log.end_index))

    def _durable_index(self) -> int:
        end = self.log.end_index
        return min(self.log.flushed_index, end) if self._sync else end

    def _draw_follower_timeout(self) -> float:
        return self.timing.leader_lost_ms + self._rng.random() * self.timing.follower_jitter_ms

    def _set_commit(self, index: int) -> None:
        if index > self.commit_index:
            self.commit_index = index
            self._out.commit_index = index
            self._record_commit()

    def _record_commit(self) -> None:
        """Tell the store the commit index, never past what is durable (a power loss could
        otherwise bring back an older entry under a committed index)."""
        index = min(self.commit_index, self._durable_index())
        if index > self.log.committed_index:
            self._out.store_commit = index

    # ---- role changes ----------------------------------------------------------------

    def _become_candidate(self, term: int) -> None:
        """DLedger's changeRoleToCandidate: remember `term` as the highest known; no term change yet."""
        if term < self.term:
            return
        self._known_max_term = max(self._known_max_term, term)
        was = self.role
        if was is Role.LEADER:
            self._leave_leadership()
            self._never_lead_this_term_again()
        if was is not Role.CANDIDATE or self.leader is not None:
            self.role, self.leader = Role.CANDIDATE, None
            self._drop_follower_state()
            self._emit_role()

    def _never_lead_this_term_again(self) -> None:
        """We differ: a node leads a term at most once, so after leading its next round raises
        the term (DLedger re-campaigns in the same term and can lead it a second time)."""
        self._last_parse = ParseResult.WAIT_TO_VOTE_NEXT

    def _become_follower(self, leader: str) -> None:
        """Follow `leader` in the current term (DLedger's changeRoleToFollower)."""
        if self.role is Role.LEADER:
            self._leave_leadership()
        self.role, self.leader = Role.FOLLOWER, leader
        self._round = None
        self._last_parse = ParseResult.WAIT_TO_REVOTE
        self._drop_follower_state()
        self._last_leader_contact = self._now
        self._follower_timeout = self._draw_follower_timeout()
        if self._taking is not None and self.term >= self._taking:
            self._taking = None
        self._emit_role()
        if self._transfer is not None and leader == self._transfer.transferee:
            self._finish_transfer(ResponseCode.SUCCESS)

    def _become_leader(self) -> None:
        now = self._now
        self.role, self.leader = Role.LEADER, self.node_id
        self._round = None
        self._taking = None
        self._emit_role()
        end = self.log.end_index
        self._dispatchers = {p: Dispatcher(p, end, now) for p in self.others}
        self._confirm = Confirmations(self.others, self.quorum, now)
        self._lease_forfeited = False
        self._term_start = self.log.append_leader(self.term, b"", MAGIC_NOOP).index
        self._send_heartbeats(now)
        self._replicate()

    def _leave_leadership(self) -> None:
        for p in self._pending:
            self._complete(
                p.request_id, AppendResponse(ResponseCode.TERM_CHANGED, self.term, p.first, p.last, None)
            )
        self._pending.clear()
        for r in self._reads:
            self._reply_read(r.request_id, ResponseCode.NOT_LEADER)
        self._reads.clear()
        self._dispatchers = {}

    def _drop_follower_state(self) -> None:
        self._leader_match = -1
        self._deferred_acks.clear()

    def _set_term(self, term: int) -> None:
        if term != self.term:
            self.term, self.vote_for = term, None
            self._persist()

    # ---- election --------------------------------------------------------------------

    def _voter_view(self) -> VoterView:
        guard = self.config.lease_guard and (
            self._lease_valid() if self.role is Role.LEADER else self._now < self._guard_until
        )
        return VoterView(
            self.node_id,
            self.members,
            self.term,
            self.vote_for,
            self.leader,
            self.log.end_index,
            self.log.end_term,
            self._taking_leadership(),
            guard,
        )

    def _waits_out_lease(self) -> bool:
        """We differ (lease reads only): a node whose guard holds stands for no term, its own
        included, unless handed one by transfer. Only a restarted node campaigns with its
        guard up (a follower's timeout outlasts it): it may have confirmed a leader's lease
        just before it went down, and the voters' guard covers only others' candidates."""
        return self.config.lease_guard and self._now < self._guard_until and not self._taking_leadership()

    def _taking_leadership(self) -> bool:
        """DLedger's isTakingLeadership: in the term a transfer handed this node."""
        return self._taking is not None and self.term == self._taking

    def _vote_interval(self) -> float:
        t = self.timing
        if self._taking_leadership():
            lo, hi = t.take_leadership_min_vote_ms, t.take_leadership_max_vote_ms
        else:
            lo, hi = t.min_vote_interval_ms, t.max_vote_interval_ms
        return self._now + lo + self._rng.random() * (hi - lo)

    def _candidate_tick(self, now: float) -> None:
        rnd = self._round
        if rnd is not None:
            if now >= rnd.deadline:
                self._finish_round(rnd)
            return
        if now < self._next_vote_at and not self._increase_term_now:
            return
        if not self._increase_term_now and self._waits_out_lease():
            hit("vote.wait.lease-guard")
            self._next_vote_at = self._guard_until
            return
        if self._last_parse is ParseResult.WAIT_TO_VOTE_NEXT or self._increase_term_now:
            self._set_term(max(self._known_max_term, self.term + 1))  # DLedger's nextTerm
            self._last_parse = ParseResult.WAIT_TO_REVOTE
            if self._increase_term_now:  # adopt the higher term, then wait before campaigning
                self._increase_term_now = False
                self._next_vote_at = self._vote_interval()
                return
        # the transfer flag passes the voters' lease guards, so only in the term the leader
        # handed over: in a later one another node may lead by now, with a lease of its own
        end, end_term, transfer = self.log.end_index, self.log.end_term, self._taking_leadership()
        req = VoteRequest(self.term, self.node_id, end, end_term, self._next_seq(), transfer)
        rnd = self._round = VoteRound(self.term, req.seq, now + self.timing.vote_wait_ms, len(self.peers))
        result = judge_vote(req, self._voter_view(), self_vote=True)
        if result is VoteResult.ACCEPT and self.vote_for != self.node_id:
            self.vote_for = self.node_id
            self._persist()
        rnd.count(self.node_id, result, self.term)
        for peer in self.others:
            self._send(peer, req)
        if rnd.decided(self.quorum):
            self._finish_round(rnd)

    def _finish_round(self, rnd: VoteRound) -> None:
        self._round = None
        if self.role is not Role.CANDIDATE or rnd.term != self.term:
            return
        result, rule = rnd.parse(self.quorum)
        self._last_parse = result
        if result is ParseResult.PASSED and self.vote_for == self.node_id:
            self._become_leader()
            return
        if result is ParseResult.PASSED:
            # We differ: the others' votes alone do not make a leader. A candidate that voted
            # for another in this term (DLedger lets it win) could, restarted with that vote,
            # win the same term again; it tries again in the next term instead.
            self._last_parse = ParseResult.WAIT_TO_VOTE_NEXT
        if result is ParseResult.REVOTE_IMMEDIATELY or self._probed(result):
            self._next_vote_at = self._now
        elif self.vote_for not in (None, self.node_id) and rule is Rule.LEADER_KNOWN:
            # We differ: a voter that still follows, in the term whose vote we gave away, the
            # leader we lost has not timed out yet; it will within a follower jitter if that
            # leader is gone: ask again after the shortest vote interval, not a leader-lost wait
            self._next_vote_at = self._now + self.timing.min_vote_interval_ms
        else:
            self._next_vote_at = self._vote_interval() + self._backoff(rule)
        if rule is Rule.HIGHER_TERM_SEEN:
            self._become_candidate(rnd.known_max_term)

    def _probed(self, result: ParseResult) -> bool:
        """We differ: a round in a term whose vote this node gave to another cannot pass; when
        it shows a quorum reachable and no leader known, the next term's round starts at once
        (DLedger waits a vote interval first). It still raises no term without a quorum."""
        return result is ParseResult.WAIT_TO_VOTE_NEXT and self.vote_for not in (None, self.node_id)

    def _backoff(self, rule: Rule) -> float:
        """What a candidate waits beyond a vote interval after a round `rule` decided: longer
        when a voter knows a leader or the others' logs are ahead."""
        if rule is Rule.LEADER_KNOWN:
            return self.timing.leader_lost_ms
        if rule is Rule.BIGGER_LEDGERS:
            return self.timing.max_vote_interval_ms
        return 0.0

    def _on_vote_request(self, sender: str, req: VoteRequest) -> None:
        result = judge_vote(req, self._voter_view())
        if result is VoteResult.REJECT_TERM_NOT_READY:
            self._adopt_next_round(req.term)
        elif result is VoteResult.ACCEPT and self.vote_for != req.candidate:
            self.vote_for = req.candidate
            self._persist()
        term = self.term
        if result is VoteResult.REJECT_TERM_SMALL_THAN_LEDGER:
            term = max(term, self.log.end_term)
        self._send(sender, VoteResponse(term, result, req.seq))

    def _on_vote_response(self, sender: str, resp: VoteResponse) -> None:
        rnd = self._round
        if rnd is None or resp.seq != rnd.seq or self.role is not Role.CANDIDATE:
            return
        if resp.result is VoteResult.ACCEPT and resp.term != rnd.term:
            return  # granted in another term: a request of an earlier incarnation that used this seq
        rnd.count(sender, resp.result, resp.term)
        if rnd.decided(self.quorum):
            self._finish_round(rnd)

    # ---- heartbeats ------------------------------------------------------------------

    def _send_heartbeats(self, now: float) -> None:
        seq = self._next_seq()
        self._confirm.start(seq, now)
        self._next_heartbeat_at = now + self.timing.heartbeat_ms
        msg = HeartbeatRequest(self.term, self.node_id, seq)
        for peer in self.others:
            self._send(peer, msg)
        self._serve_reads()

    def _on_heartbeat(self, sender: str, req: HeartbeatRequest) -> None:
        code = judge_heartbeat(req.term, req.leader, self.node_id, self.members, self.term, self.leader)
        if code is ResponseCode.SUCCESS:
            if self.leader is None:
                self._become_follower(req.leader)
            self._last_leader_contact = self._now
            self._guard_until = self._now + self.timing.leader_lost_ms
        elif code is ResponseCode.TERM_NOT_READY:
            self._adopt_next_round(req.term)
        self._send(sender, HeartbeatResponse(self.term, code, req.seq))

    def _on_heartbeat_response(self, sender: str, resp: HeartbeatResponse) -> None:
        if not self._reply_counts(resp.term):
            return
        conf = self._confirm
        if conf.answer(sender, resp.seq, resp.code):
            self._serve_reads()
        if resp.seq == conf.last_seq and conf.round_complete and conf.success < self.quorum:
            if conf.success + conf.not_ready >= self.quorum:
                self._next_heartbeat_at = self._now
            elif conf.inconsistent:
                self._become_candidate(self.term)

    def _adopt_next_round(self, term: int) -> None:
        """A higher term was seen: become candidate and raise the term at the next round
        (a vote round of an older term still waiting for answers is abandoned)."""
        if term > self.term:
            self._round = None
            if self.role is not Role.FOLLOWER:
                hit("step-down.higher-term")
        self._become_candidate(term)
        self._increase_term_now = True

    def _reply_counts(self, term: int) -> bool:
        """For a reply to the leader: adopt a higher term, else True if it is for this leadership."""
        if term > self.term:
            self._adopt_next_round(term)
            return False
        return self.role is Role.LEADER and term == self.term

    def _leader_tick(self, now: float) -> None:
        if self._lost_quorum_contact(now):
            hit("lease.expired-step-down")
            self._become_candidate(self.term)  # lost quorum contact
            return
        if now >= self._next_heartbeat_at:
            self._send_heartbeats(now)
        self._expire_clients(now)
        if self.config.preferred_leader is not None and now >= self._next_preferred_check:
            self._next_preferred_check = now + self.timing.preferred_check_ms
            self._check_preferred(now)
        self._replicate()

    def _lost_quorum_contact(self, now: float) -> bool:
        """Whether no heartbeat round a quorum acknowledged went out within `leader_lost_ms`."""
        return now - self._confirm.confirmed_at > self.timing.leader_lost_ms

    # ---- replication -----------------------------------------------------------------

    def _replicate(self) -> None:
        """Leader: let every dispatcher send what it can, then notify a caught-up transferee."""
        now, store, term, commit, t = self._now, self.log, self.term, self.commit_index, self.timing
        leader, next_seq, send = self.node_id, self._next_seq, self._send
        for disp in self._dispatchers.values():
            disp.pump(now, store, term, leader, commit, t, next_seq, send)
        self._advance_commit()
        tr = self._transfer
        if tr is not None and not tr.notified and self.role is Role.LEADER:
            transferee = self._dispatchers.get(tr.transferee)
            if transferee is not None and transferee.match_index >= self.log.end_index:
                tr.notified = self._lease_forfeited = True
                self._send(tr.transferee, TransferRequest(self.term, self.node_id, self._next_seq()))

    def _advance_commit(self) -> None:
        if self.role is not Role.LEADER:
            return
        matches = [d.match_index for d in self._dispatchers.values()]
        matches.append(self._durable_index())
        index = quorum_index(matches, self.quorum)
        if index <= self.commit_index:
            return
        if not commits_by_counting(self.log.term_at(index), self.term):
            hit("commit.earlier-term-guard")
            return
        self._set_commit(index)
        pending = self._pending
        while pending and pending[0].last <= index:
            p = pending.popleft()
            self._complete(
                p.request_id, AppendResponse(ResponseCode.SUCCESS, self.term, p.first, p.last, self.node_id)
            )
        self._serve_reads()

    def _on_push(self, sender: str, req: PushRequest) -> None:
        if req.term < self.term:
            code = ResponseCode.EXPIRED_TERM
        elif req.term > self.term:
            code = ResponseCode.INCONSISTENT_TERM
        elif req.leader != self.leader or self.role is not Role.FOLLOWER:
            code = ResponseCode.INCONSISTENT_LEADER
        else:
            code = None
        if code is not None:
            self._send(sender, PushResponse(self.term, code, req.seq, req.type, -1, self.log.end_index, -1))
            return
        self._last_leader_contact = self._now
        if req.type is PushType.COMMIT:
            self._follower_commit(req.commit_index)
            # the match it knows of: a restarted follower reports -1, and the leader compares again
            self._send(
                sender,
                PushResponse(
                    self.term, ResponseCode.SUCCESS, req.seq, req.type, self._leader_match,
                    self.log.end_index, -1,
                ),
            )
            return
        end_before = self.log.end_index
        out = handle_push(self.log, req, self.commit_index, self._leader_match)
        if out.code is not ResponseCode.SUCCESS:
            self._send(
                sender,
                PushResponse(
                    self.term, out.code, req.seq, req.type, -1, self.log.end_index, out.hint_index
                ),
            )
            return
        if self.log.end_index < end_before:  # acks waiting for entries that are gone never go out
            self._deferred_acks = [a for a in self._deferred_acks if a[0] <= self.log.end_index]
        self._leader_match = max(self._leader_match, out.match_index)
        self._follower_commit(req.commit_index)
        resp = PushResponse(
            self.term, ResponseCode.SUCCESS, req.seq, req.type, out.match_index, self.log.end_index, -1
        )
        if out.match_index <= self._durable_index():
            self._send(sender, resp)
        else:
            self._deferred_acks.append((out.match_index, sender, resp))

    def _follower_commit(self, leader_commit: int) -> None:
        self._set_commit(min(leader_commit, self._leader_match))

    def _on_push_response(self, sender: str, resp: PushResponse) -> None:
        if not self._reply_counts(resp.term):
            return
        disp = self._dispatchers.get(sender)
        if disp is None:
            return
        disp.on_response(resp, self._now, self.log, self.timing)
        self._replicate()

    # ---- clients ---------------------------------------------------------------------

    def _append_refusal(self, count: int) -> ResponseCode | None:
        if self.role is not Role.LEADER:
            return ResponseCode.NOT_LEADER
        if self._transfer is not None:
            return ResponseCode.LEADER_TRANSFERRING
        if count < 1:
            return ResponseCode.UNEXPECTED_ARGUMENT
        if self.log.end_index - self.commit_index + count > self.timing.max_pending_appends:
            return ResponseCode.LEADER_PENDING_FULL
        return None

    def _expire_clients(self, now: float) -> None:
        self._expire_appends(now)
        self._expire_reads(now)

    def _expire_appends(self, now: float) -> None:
        """Answer WAIT_QUORUM_ACK_TIMEOUT to the appends not committed by their deadline."""
        pending = self._pending
        while pending and pending[0].deadline <= now:
            p = pending.popleft()
            hit("append.timeout")
            self._complete(
                p.request_id,
                AppendResponse(
                    ResponseCode.WAIT_QUORUM_ACK_TIMEOUT, self.term, p.first, p.last, self.node_id
                ),
            )

    def _expire_reads(self, now: float) -> None:
        """Answer TIMEOUT to the reads no leadership check confirmed by their deadline."""
        if self._reads:
            waiting = []
            for r in self._reads:
                if r.deadline <= now:
                    hit("read-index.timeout")
                    self._reply_read(r.request_id, ResponseCode.TIMEOUT)
                else:
                    waiting.append(r)
            self._reads = waiting

    def _term_committed(self) -> bool:
        return self.commit_index >= self._term_start

    def _lease_covers_read(self) -> bool:
        """Whether a lease read may be served now, without a heartbeat round: the lease holds
        and the leader's own term has committed (so the commit index is the cluster's)."""
        return self._lease_valid() and self._term_committed()

    def _lease_valid(self) -> bool:
        return self._lease_valid_at(self._now)

    def _lease_valid_at(self, now: float) -> bool:
        t = self.timing
        return (
            now < self._confirm.confirmed_at + t.leader_lost_ms * (1.0 - t.lease_drift_ratio)
            and self._transfer is None
            and not self._lease_forfeited
        )

    def serves_lease_reads(self, now: float) -> bool:
        """Whether this node would answer a lease read at local time `now` without a
        heartbeat round (for the simulator's lease check; changes nothing)."""
        return (
            self.config.lease_guard
            and self.role is Role.LEADER
            and self._lease_valid_at(now)
            and self._term_committed()
        )

    def _serve_reads(self) -> None:
        if not self._reads or not self._term_committed():
            return
        waiting = []
        for r in self._reads:
            if self._confirm.confirms(r.need_seq):
                hit("read-index.confirmed")
                self._complete_read(r.request_id, r.first, r.last)
            else:
                waiting.append(r)
        self._reads = waiting

    def _complete_read(self, request_id: int, first: int, last: int, limit: int | None = None) -> None:
        """Answer a read with the entries of `first..last` up to `limit` (default: the commit index)."""
        top = self.commit_index if limit is None else limit
        entries, covered = read_range(self.log, first, last, top, self.config.max_read_bytes)
        self._complete(
            request_id, ReadResponse(ResponseCode.SUCCESS, entries, self.commit_index, self.leader, covered)
        )

    def _reply_read(self, request_id: int, code: ResponseCode) -> None:
        """Refuse a read with `code`."""
        self._complete(request_id, ReadResponse(code, [], self.commit_index, self.leader, -1))

    # ---- leadership transfer ---------------------------------------------------------

    def _start_transfer(self, transferee: str, request_id: int | None) -> None:
        self._transfer = LeaderTransfer(
            transferee, request_id, self.term, self._now + self.timing.transfer_timeout_ms
        )
        self._replicate()

    def _finish_transfer(self, code: ResponseCode) -> None:
        tr = self._transfer
        self._transfer = None
        if tr is not None and tr.request_id is not None:
            self._complete(tr.request_id, TransferResponse(code, self.term, self.leader))

    def _on_transfer(self, sender: str, req: TransferRequest) -> None:
        if req.term != self.term or req.leader != self.leader or self.role is not Role.FOLLOWER:
            return
        self._taking = self.term + 1
        self._adopt_next_round(self.term + 1)
        self._candidate_tick(self._now)

    def _check_preferred(self, now: float) -> None:
        preferred = self.config.preferred_leader
        disp = self._dispatchers.get(preferred or "")
        if (
            disp is None
            or self._transfer is not None
            or now - disp.last_ack_at > self.timing.leader_lost_ms
            or self.log.end_index - disp.match_index > self.timing.transfer_max_lag
        ):
            return
        self._start_transfer(disp.peer, None)


# a peer message's handler, by its type (after the class: mypyc compiles no method references in a class body)
_HANDLERS: dict[type, Callable[[Core, str, Any], None]] = {
    VoteRequest: Core._on_vote_request,
    VoteResponse: Core._on_vote_response,
    HeartbeatRequest: Core._on_heartbeat,
    HeartbeatResponse: Core._on_heartbeat_response,
    PushRequest: Core._on_push,
    PushResponse: Core._on_push_response,
    TransferRequest: Core._on_transfer,
}
