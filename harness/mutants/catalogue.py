"""The catalogue of seeded bugs: small, plausible mistakes in `nodes/` the harness must catch.

Each `Mutant` is a few-line change a Raft, DLedger or RocketMQ developer could well write:
a rule dropped, a check against the wrong index, a write made durable too late. Its `run`
is the end-to-end cell meant to catch it (`python -m harness run` flags) and its `sim` the
`simulate-many` flags aimed at it (the hunt runs them when the default rotation, which
includes master-slave seeds, finds nothing). The figures of how often each is caught live
with the hunt and bench/README.md, not here.
"""

from __future__ import annotations

from harness.mutants.model import Edit, Mutant

LONG = ("--time-limit", "60")  # as long as the default run: a nightly runs a few of these
# DLedger's own timing (6 s failover): a crash-restart (about a second) lands inside the election
# its death started, where a forgotten vote or a re-led term can do harm
SLOW_ELECTIONS = ("--timing", "dledger")
LEASE = ("--read-mode", "lease")
# the nodes that fsynced the newest entries lose power and stay down while one of them and the lagging
# minority decide: what was counted before an fsync is gone
LAGGING = ("--nodes", "5", "--nemesis", "lagging-majority", *LONG)
# simulate-many flags aimed at a kind of bug (beyond the default rotation)
CHURN = ("--nodes", "3", "--mixes", "leaderkill,crash,leadercrash", "--steps", "8000")  # leaders die young
REPAIR = ("--nodes", "3", "--mixes", "partition,crash,powerloss,repaircrash")  # power lost after a truncation
REPAIR_CHURN = ("--nodes", "3", "--mixes",
                "partition,crash,powerloss,repaircrash;leaderkill,crash,leadercrash")
PAUSED = ("--mixes", "pause;pause,partition", "--clients", "6")  # a frozen leader woken with reads queued
TRANSFERS = ("--mixes", "transfer,delay;transfer,pause;transfer,oneway,loss")
SELF_VOTER = ("--nodes", "3", "--mixes", "votecrash,leaderkill;votecrash,pause")  # a loser restarts, stands
LATE_VOTES = ("--nodes", "3", "--mixes", "delay,dup,partition;pause,partition,crash")  # stale requests
POWER = ("--nodes", "3", "--mixes", "powerloss,crash,leadercrash;powerloss,partition,leaderkill")
TORN = ("--mixes", "powerloss,repaircrash,partition;powerloss,crash,leadercrash")  # torn and reordered writes
# leaders killed before their no-op spreads, then a repair cut by a power loss: Figure 7's logs (a
# follower's no-op of a later term rewritten by an earlier one), where an old entry can follow a
# rewritten one that is as long as its predecessor and of a lower term
FIGURE7 = ("--nodes", "3", "--mixes", "leaderkill,leadercrash,repaircrash")

_ELECTION: tuple[Mutant, ...] = (
    Mutant(
        "vote-without-log-check", "election",
        "A node grants its vote to a candidate whose log is behind its own.",
        (Edit("election.py", "    if ledger is not None:\n        return ledger, None\n", ""),),
        ("--nemesis", "part-kill,kill,partition", *LONG),
    ),
    Mutant(
        "vote-log-check-index-only", "election",
        "The up-to-date check compares only log lengths, so a longer log of an older term wins votes.",
        (Edit("election.py",
              "    if req.ledger_end_term < view.ledger_end_term:\n"
              "        return VoteResult.REJECT_EXPIRED_LEDGER_TERM\n"
              "    if req.ledger_end_term == view.ledger_end_term and req",
              "    if req"),),
        ("--nemesis", "part-kill,partition,kill", *LONG),
    ),
    Mutant(
        "vote-not-persisted", "election",
        "A node grants a vote without saving it, so after a restart it can vote again in the same term.",
        (Edit("core.py", "self.vote_for = req.candidate\n            self._persist()",
              "self.vote_for = req.candidate"),),
        ("--nodes", "3", *SLOW_ELECTIONS, "--nemesis", "bounce,kill", *LONG),
    ),
    Mutant(
        "vote-saved-only-on-term-change", "election",
        "The term file is rewritten only when the term changes, so a vote for another node is never saved.",
        (Edit("driver.py", "if state != self._persisted:", "if state.term != self._persisted.term:"),),
        ("--nodes", "3", *SLOW_ELECTIONS, "--nemesis", "bounce,kill", *LONG),
    ),
    Mutant(
        "vote-twice-in-term", "election",
        "A node that already voted in a term votes again for another candidate while it knows no leader.",
        (Edit("election.py", "            return VoteResult.REJECT_ALREADY_VOTED, None\n", ""),),
        ("--nodes", "3", *SLOW_ELECTIONS, "--nemesis", "bounce,partition", *LONG),
    ),
    Mutant(
        "vote-log-check-term-only", "election",
        "The up-to-date check compares only last terms, so a shorter log ending in the same term wins votes.",
        (Edit("election.py",
              "    if req.ledger_end_term == view.ledger_end_term"
              " and req.ledger_end_index < view.ledger_end_index:\n"
              "        return VoteResult.REJECT_SMALL_LEDGER_END_INDEX\n",
              ""),),
        ("--nemesis", "part-kill,partition,kill", *LONG),
        CHURN,
    ),
    Mutant(
        "leader-ignores-higher-term", "election",
        "A leader that hears a higher term in a reply does not step down.",
        (Edit("core.py",
              "        if term > self.term:\n"
              "            self._adopt_next_round(term)\n"
              "            return False\n",
              ""),),
        ("--nemesis", "stale-leader,partition,pause", *LONG),
    ),
    Mutant(
        "releads-term-after-restart", "election",
        "A node that voted for itself and restarts campaigns again in the same term, as DLedger does.",
        (Edit("core.py", "ParseResult.WAIT_TO_VOTE_NEXT if vote == node_id else ", ""),),
        (*SLOW_ELECTIONS, "--nemesis", "bounce,power-loss", *LONG),
    ),
    Mutant(
        "releads-term-after-step-down", "election",
        "A leader that steps down campaigns again in the term it led, and can lead it a second time.",
        (Edit("core.py", "            self._never_lead_this_term_again()\n", ""),),
        ("--nemesis", "partition,pause,kill", *LONG),
    ),
)

_REPLICATION: tuple[Mutant, ...] = (
    Mutant(
        "append-without-prev-check", "replication",
        "A follower appends pushed entries without checking that it holds the entry before them.",
        (Edit("replication.py", "if not _holds(store, req.index",
              "if req.type is not PushType.APPEND and not _holds(store, req.index"),),
        ("--nemesis", "partition,kill,packet", *LONG),
        REPAIR_CHURN,
    ),
    Mutant(
        "append-keeps-conflicting-entries", "replication",
        "A follower skips pushed entries at indexes it already has, even when their terms differ.",
        (Edit("replication.py", " and store.term_at(entries[k].index) == entries[k].term", ""),),
        ("--nemesis", "partition,part-kill,kill", *LONG),
    ),
    Mutant(
        "truncate-below-acknowledged", "replication",
        "A follower applies a late TRUNCATE where it says, cutting entries it acknowledged since.",
        (Edit("replication.py", "keep = max(req.index, commit, verified)", "keep = max(req.index, commit)"),),
        ("--nemesis", "packet,partition,kill", "--packet-modes", "duplicate,delay", *LONG),
        LATE_VOTES,
    ),
    Mutant(
        "commit-earlier-term-by-counting", "replication",
        "A new leader commits an entry of an earlier term as soon as a majority holds it (Raft's Figure 8).",
        (Edit("replication.py", "return entry_term == term", "return entry_term <= term"),),
        ("--nemesis", "kill,partition,part-kill", *LONG),
        CHURN,
    ),
    Mutant(
        "follower-commit-beyond-match", "replication",
        "A follower takes the leader's commit index up to its own log end, past what it knows matches.",
        (Edit("core.py", "min(leader_commit, self._leader_match)",
              "min(leader_commit, self.log.end_index)"),),
        ("--read-mode", "follower", "--nemesis", "partition,part-kill,kill", *LONG),
    ),
    Mutant(
        "commit-quorum-off-by-one", "replication",
        "The leader commits once one node fewer than a majority holds an entry.",
        (Edit("core.py", "quorum_index(matches, self.quorum)", "quorum_index(matches, self.quorum - 1)"),),
        ("--nemesis", "partition,kill", *LONG),
    ),
)

_READS: tuple[Mutant, ...] = (
    Mutant(
        "read-index-unconfirmed", "reads",
        "A read-index read is served once the heartbeat round is sent, before a majority confirmed it.",
        (Edit("reads.py", "return seq <= self.confirmed_seq", "return seq <= self.last_seq"),),
        ("--read-mode", "read-index", "--nemesis", "stale-leader,pause", *LONG),
        PAUSED,
    ),
    Mutant(
        "lease-never-expires", "reads",
        "A leader serves lease reads while it thinks it leads, however long ago a majority confirmed it.",
        (Edit("core.py",
              "            now < self._confirm.confirmed_at"
              " + t.leader_lost_ms * (1.0 - t.lease_drift_ratio)\n"
              "            and self._transfer",
              "            self._transfer"),),
        (*LEASE, "--nemesis", "stale-leader,pause", "--stale-leader-modes", "pause", *LONG),
        PAUSED,
    ),
    Mutant(
        "lease-without-drift-margin", "reads",
        "The leader's lease lasts the followers' whole election timeout, with no margin for clock drift.",
        (Edit("core.py", " * (1.0 - t.lease_drift_ratio)", ""),),
        (*LEASE, "--nemesis", "clock,pause,partition", *LONG),
        ("--profile", "dledger", "--mixes", "skew,partition;skew,pause"),
    ),
    Mutant(
        "lease-kept-across-transfer", "reads",
        "A leader keeps serving lease reads while it hands leadership to another node.",
        (Edit("core.py", "            and self._transfer is None\n"
              "            and not self._lease_forfeited\n", ""),),
        (*LEASE, "--nemesis", "churn,pause", *LONG),
        TRANSFERS,
    ),
    Mutant(
        "lease-back-after-transfer-timeout", "reads",
        "A leader whose transfer timed out serves lease reads again, though the transferee may still win.",
        (Edit("core.py", "            and not self._lease_forfeited\n", ""),),
        (*LEASE, "--nemesis", "churn,pause,packet", *LONG),
        TRANSFERS,
    ),
    Mutant(
        "restart-stands-within-lease", "reads",
        "A restarted node campaigns at once, not waiting out a lease it may have confirmed before it died.",
        (Edit("core.py",
              "        if not self._increase_term_now and self._waits_out_lease():\n"
              "            hit(\"vote.wait.lease-guard\")\n"
              "            self._next_vote_at = self._guard_until\n"
              "            return\n",
              ""),),
        (*LEASE, "--nemesis", "bounce,pause-kill,part-kill", *LONG),
        SELF_VOTER,
    ),
    Mutant(
        "restart-forgets-lease-guard", "reads",
        "A restarted node assumes no leader holds a lease and votes for the first candidate at once.",
        (Edit("core.py", "self._guard_until = now + self.timing.leader_lost_ms", "self._guard_until = now"),),
        (*LEASE, "--nemesis", "bounce,pause-kill,part-kill", *LONG),
        SELF_VOTER,
    ),
    Mutant(
        "read-beyond-commit", "reads",
        "A read returns every stored entry of the range asked for, including ones not committed yet.",
        (Edit("reads.py", "top = min(last, limit)", "top = last"),),
        ("--nemesis", "bounce,kill", *LONG),
    ),
)

_DURABILITY: tuple[Mutant, ...] = (
    Mutant(
        "ack-before-quorum", "durability",
        "The leader acknowledges an append once it has it on its own disk, before a majority does.",
        (Edit("core.py", "pending[0].last <= index", "pending[0].last <= self._durable_index()"),),
        # Every fault at the leader: its acks of entries only it holds are lost when it is killed
        # or cut off before they spread, and read back stale in between. (kill,partition with
        # any targets came back valid at seed 5 since d1e5c2b: a cut-off leader steps down within
        # half a second and clients leave it, and a kill of the majority's new leader kept the
        # majority from electing, so the cut-off leader's acks survived the heal.)
        ("--nemesis", "bounce,partition", "--bounce-targets", "leader",
         "--partition-shapes", "leader-minority", *LONG),
    ),
    Mutant(
        "ack-before-fsync", "durability",
        "With fsync before ack, the leader counts its own entries toward a majority before they are fsynced.",
        (Edit("core.py", "min(self.log.flushed_index, end) if self._sync else end", "end"),),
        ("--flush", "sync", *LAGGING),
        POWER,
    ),
    Mutant(
        "follower-acks-unflushed", "durability",
        "With fsync before ack, a follower acknowledges entries it has written but not fsynced.",
        (Edit("core.py", "out.match_index <= self._durable_index()",
              "out.match_index <= self.log.end_index"),),
        ("--flush", "sync", *LAGGING),
        POWER,
    ),
    Mutant(
        "truncate-keeps-flushed-index", "durability",
        "Truncating the log leaves the flushed index where it was, so rewritten entries count as fsynced.",
        (Edit("store/mmapstore.py", "            self._flushed = min(self._flushed, index)\n", ""),),
        ("--flush", "sync", "--nemesis", "power-loss,partition", *LONG),
        REPAIR,
    ),
    Mutant(
        "term-file-not-fsynced", "durability",
        "The term file is renamed into place without fsyncing its directory, so a power loss forgets a vote.",
        (Edit("store/termfile.py", "    fs.fsync_dir(path.parent)\n", ""),),
        ("--nemesis", "power-loss", *LONG),
    ),
    Mutant(
        "recovery-skips-body-crc", "durability",
        "Recovery keeps an entry whose body fails its CRC.",
        (Edit("store/recovery.py", "if not entry.ok:", "if not entry.chain_crc_ok:"),),
        ("--nemesis", "disk,power-loss", *LONG),
        TORN,
    ),
    Mutant(
        "recovery-skips-chain-crc", "durability",
        "Recovery keeps an entry whose chain CRC does not follow the entry before it.",
        (Edit("store/recovery.py", "if not entry.ok:", "if not entry.body_crc_ok:"),),
        ("--nemesis", "disk,power-loss", *LONG),
        FIGURE7,
    ),
    Mutant(
        "recovery-keeps-torn-tail", "durability",
        "Recovery stops at a torn entry but neither cuts it nor writes over it: new entries go after "
        "the last file (RocketMQ's truncateDirtyFiles skipped), and the next recovery, stopping at the "
        "torn bytes again, drops them.",
        (Edit("store/recovery.py", "        cut = scan.stop.pos, scan.stop.reason\n",
              "        state.write_pos = data.segments[-1].offset + data.segment_size\n"),),
        ("--nemesis", "power-loss,disk", *LONG),
        TORN,
    ),
)

MASTER_SLAVE = ("--mode", "master-slave-sync")  # every seed in that mode (the rotation: one in eight)

_MASTER_SLAVE: tuple[Mutant, ...] = (
    Mutant(
        "slave-reports-unflushed", "master-slave",
        "A slave reports the last entry it wrote as its durable offset, before fsyncing it.",
        (Edit("ha/node.py", "durable = self._durable()", "durable = self.log.end_index"),),
        ("--mode", "master-slave-sync", "--flush", "sync", "--nemesis", "power-loss,lose-node", *LONG),
        MASTER_SLAVE,
    ),
    Mutant(
        "sync-master-acks-on-timeout", "master-slave",
        "A SYNC_MASTER whose slave does not answer in time acknowledges the append anyway.",
        (Edit("ha/node.py", "FLUSH_SLAVE_TIMEOUT if own_done", "SUCCESS if own_done"),),
        ("--mode", "master-slave-sync", "--nemesis", "partition,pause,lose-node", *LONG),
        MASTER_SLAVE,
    ),
    Mutant(
        "sync-master-counts-unverified-slave", "master-slave",
        "A SYNC_MASTER counts a slave's reported offset before checking that its log matches the master's.",
        (Edit("ha/master.py", "        st.last_report = now\n",
              "        st.last_report = now\n        st.acked = min(report.offset, report.end_index)\n"),
         Edit("ha/master.py", " if st.verified)", ")")),
        ("--mode", "master-slave-sync", "--nemesis", "isolate-lose,lose-node,kill", *LONG),
        MASTER_SLAVE,
    ),
    Mutant(
        "promote-reuses-epoch", "master-slave",
        "A promoted slave takes writes in the epoch of the master it followed instead of a new one.",
        (Edit("ha/node.py", "(self.term + 1, flavour)", "(self.term, flavour)"),),
        ("--mode", "master-slave-async", "--read-mode", "follower", "--nemesis", "isolate-lose,lose-node",
         *LONG),
        MASTER_SLAVE,
    ),
)

CATALOGUE: tuple[Mutant, ...] = _ELECTION + _REPLICATION + _READS + _DURABILITY + _MASTER_SLAVE


def mutant(name: str) -> Mutant:
    """The catalogue's mutant called `name`; KeyError listing the names when there is none."""
    for m in CATALOGUE:
        if m.name == name:
            return m
    raise KeyError(f"no mutant {name!r}; the catalogue has: {', '.join(m.name for m in CATALOGUE)}")
