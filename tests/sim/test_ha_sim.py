"""The simulator in master-slave mode (nodes/sim/hamode.py): break one guard of RocketMQ's
replication at a time (a switch in the test, never in the product) and require the simulator
to find the damage within a bounded number of seeds; with the guards intact the same seeds
stay clean, and a seed replays byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from nodes.ha.epochs import EpochMap
from nodes.ha.master import Streams
from nodes.ha.node import HaNode
from nodes.logic import Ack
from nodes.messages import AppendResponse, EpochStart, HaPush, HaReport, PromoteResponse, ResponseCode
from nodes.sim.cli import flush_policy
from nodes.sim.cluster import SimResult, run_seed
from nodes.sim.config import SimConfig
from nodes.sim.faults import parse_faults
from nodes.sim.many import MIXES, configs
from nodes.sim.trace import describe
from nodes.store.logstore import Entry

SYNC, ASYNC = "master-slave-sync", "master-slave-async"
SEEDS = 200  # a broken guard must show within this many seeds
CLEAN_SEEDS = 60  # the correct code runs these clean in each mode

Patch = Callable[[pytest.MonkeyPatch], None]


def run_one(seed: int, mode: str, faults: str = "all") -> SimResult:
    """One seed as the searches run it: 3 and 5 nodes in turn, 3000 steps."""
    return run_seed(SimConfig(seed=seed, nodes=(3, 5)[seed % 2], steps=3000, mode=mode,
                              faults=parse_faults(faults, mode)))


def first_violation(mode: str, faults: str = "all", seeds: int = SEEDS) -> SimResult | None:
    results = (run_one(seed, mode, faults) for seed in range(seeds))
    return next((r for r in results if r.violation is not None), None)


# ---- the breaks --------------------------------------------------------------------------


def _reports_written_end(mp: pytest.MonkeyPatch) -> None:
    """A slave reports its written log end as its durable offset, not its flushed end."""

    def report(self: HaNode) -> None:
        end = self.log.end_index
        if self.master != self.node_id and self._reporter.due(end, self._now):
            self._send(self.master, HaReport(self.term, self.master, end, end, list(self.epochs.starts)))
            self._reporter.sent(end, self._now)

    mp.setattr(HaNode, "_report", report)


def _succeeds_on_timeout(mp: pytest.MonkeyPatch) -> None:
    """A SYNC_MASTER answers SUCCESS when its slave wait times out (its own fsync done)."""

    def expire(self: HaNode, now: float) -> None:
        for p in self._waiting.expired(now):
            own_done = self.config.ack is Ack.WRITTEN or self._durable() >= p.last
            code = ResponseCode.SUCCESS if own_done else ResponseCode.FLUSH_DISK_TIMEOUT
            self._complete(p.request_id, AppendResponse(code, self.term, p.first, p.last, self.node_id))

    mp.setattr(HaNode, "_expire", expire)


def _counts_unverified(mp: pytest.MonkeyPatch) -> None:
    """The master counts a slave's durable offset before checking its log matches the master's."""
    real = Streams.on_report

    def on_report(self: Streams, peer: str, report: HaReport, mine: EpochMap, my_end: int,
                  now: float) -> int | None:
        point = real(self, peer, report, mine, my_end, now)
        self._slaves[peer].acked = min(report.offset, report.end_index)
        return point

    mp.setattr(Streams, "on_report", on_report)
    mp.setattr(Streams, "max_acked", lambda self: max((st.acked for st in self._slaves.values()), default=-1))


def _promotes_in_old_epoch(mp: pytest.MonkeyPatch) -> None:
    """A promoted slave masters the epoch it knows (the old master's) instead of the next one."""
    real = HaNode.client_promote

    def promote(self: HaNode, request_id: int, role: str, now: float) -> None:
        if self._active:
            real(self, request_id, role, now)
            return
        self._now = now
        self._take_mastership(self.term, self.flavour)
        self._complete(request_id, PromoteResponse(ResponseCode.SUCCESS, self.term, self.node_id))

    mp.setattr(HaNode, "client_promote", promote)


def _appends_unanchored(mp: pytest.MonkeyPatch) -> None:
    """A slave appends a push that starts inside or right after its log without checking that
    the push continues it (the stream's anchor: nodes/ha/node.py, "Replication")."""

    def append_pushed(self: HaNode, entries: list[Entry]) -> None:
        end = self.log.end_index
        fresh = entries[max(0, end + 1 - entries[0].index):]
        if fresh and fresh[0].index == end + 1:
            self.log.append(fresh)
            self.epochs.appended(fresh)

    mp.setattr(HaNode, "_append_pushed", append_pushed)


@dataclass(frozen=True)
class Broken:
    what: str
    breaks: Patch
    mode: str
    kinds: set[str]
    faults: str = "all"


BROKEN = [
    Broken("slave reports its written end", _reports_written_end, SYNC, {"acknowledged append"}),
    Broken("SUCCESS on slave timeout", _succeeds_on_timeout, SYNC, {"acknowledged append"}),
    Broken("unverified slave offset counted", _counts_unverified, SYNC, {"acknowledged append"}),
    Broken("promotion keeps the epoch", _promotes_in_old_epoch, SYNC, {"election safety"}),
    Broken("promotion keeps the epoch", _promotes_in_old_epoch, ASYNC, {"election safety"}),
    # a power loss that undoes a truncation (repaircrash) under a lossy link
    Broken("unanchored push appended", _appends_unanchored, SYNC, {"log matching"},
           "repaircrash,loss,dup,delay,failover"),
]


@pytest.mark.parametrize("broken", BROKEN, ids=lambda b: f"{b.what} ({b.mode})")
def test_each_broken_guard_is_found(broken: Broken, monkeypatch: pytest.MonkeyPatch) -> None:
    broken.breaks(monkeypatch)
    found = first_violation(broken.mode, broken.faults)
    assert found is not None, f"{broken.what}: no violation in {SEEDS} seeds"
    assert found.violation is not None and found.violation.kind in broken.kinds, found.summary()


@pytest.mark.parametrize("faults", sorted({b.faults for b in BROKEN}))
@pytest.mark.parametrize("mode", [SYNC, ASYNC])
def test_the_correct_code_is_clean_and_live(mode: str, faults: str) -> None:
    for seed in range(CLEAN_SEEDS):
        result = run_one(seed, mode, faults)
        assert result.violation is None, result.summary()
        assert result.stats["probe-ok"] == 1  # liveness: after healing the master took an append, and
        # every node caught up


def test_failovers_promote_and_bring_the_old_master_back_as_a_slave() -> None:
    promoted = 0
    for seed in range(20):
        result = run_one(seed, SYNC, "failover,crash")
        assert result.violation is None, result.summary()
        promoted += result.stats["fault-failover"]
    assert promoted >= 20


def test_a_master_slave_seed_replays_byte_for_byte() -> None:
    config = SimConfig(seed=7, nodes=5, steps=3000, mode=SYNC, faults=parse_faults("all", SYNC))
    assert run_seed(config).summary() == run_seed(config).summary()
    cmd = [sys.executable, "-m", "nodes", "simulate", "--seed", "7", "--nodes", "3", "--steps", "1500",
           "--mode", ASYNC]
    first = subprocess.run(cmd, capture_output=True, check=True, timeout=120).stdout
    second = subprocess.run(cmd, capture_output=True, check=True, timeout=120,
                            env={**os.environ, "PYTHONHASHSEED": "123"}).stdout
    assert first == second and b"master-slave-async" in first and b"no violation" in first


def test_a_fault_the_mode_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="do not apply"):
        SimConfig(seed=1, mode=SYNC, faults=("transfer",))
    cmd = [sys.executable, "-m", "nodes", "simulate", "--seed", "1", "--mode", SYNC, "--faults", "votecrash"]
    proc = subprocess.run(cmd, capture_output=True, timeout=60)
    assert proc.returncode == 254 and b"error" in proc.stderr


def test_the_default_rotation_runs_a_master_slave_seed_in_eight_over_every_size_and_mix() -> None:
    count = 8 * 3 * len(MIXES)  # one master-slave seed for every size and mix
    rotation = list(configs(0, count, [3, 5, 7], list(MIXES), 4000, flush_policy("sync"), "fast", 3))
    ha = [c for c in rotation if c.mode != "dledger"]
    assert [c.seed for c in ha] == list(range(7, count, 8)) and {c.mode for c in ha} == {SYNC}
    mix = {c.seed: c.seed // 3 % len(MIXES) for c in ha}  # seed i runs mix i // sizes (nodes.sim.many)
    assert len({(c.nodes, mix[c.seed]) for c in ha}) == 3 * len(MIXES)
    assert all(c.faults == parse_faults(MIXES[mix[c.seed]], SYNC) for c in ha)
    assert sum("failover" in c.faults for c in ha) == 3 * sum("failover" in m or m == "all" for m in MIXES)
    assert not any("failover" in c.faults for c in rotation if c not in ha)


def test_the_trace_shows_master_slave_messages_briefly() -> None:
    report = HaReport(3, "n1", 5, 6, [EpochStart(1, 0), EpochStart(3, 4)])
    assert describe(report) == "HaReport(e3 n1 offset 5 end 6 epochs e1@0 e3@4)"
    push = HaPush(3, "n1", True, 9, [Entry(7, 3, b"a"), Entry(8, 3, b"b")])
    assert describe(push) == "HaPush(e3 n1 sync end 9 7..8)"
