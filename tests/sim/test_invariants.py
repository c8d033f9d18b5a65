"""The simulator's incremental log-matching check and the change tracking it relies on."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from functools import partial

import pytest

from nodes.coverage import RULES, UNREACHABLE
from nodes.driver import apply_writes
from nodes.logview import Append, StoreWrite, Truncate
from nodes.sim.cluster import run_seed
from nodes.sim.config import SimConfig
from nodes.sim.coverage import coverage_table
from nodes.sim.disk import UNCHANGED, SimDisk
from nodes.sim.invariants import Invariants, Violation, check_log_matching, check_new_entries
from nodes.store.logstore import Entry
from nodes.store.mmapstore import MmapStore
from tests.support.scripted import entries


def _write(disk: SimDisk, store: MmapStore, *writes: StoreWrite) -> None:
    apply_writes(store, list(writes))
    disk.applied(list(writes))


def test_the_disk_remembers_the_lowest_index_written_or_changed_by_a_power_loss() -> None:
    disk = SimDisk(512, 320)
    store, state = disk.open()
    assert (state.term, disk.log, disk.changed_from) == (0, [], UNCHANGED)
    _write(disk, store, Append(entries(1, 1, 1)))
    store.flush()
    assert disk.changed_from == 0 and disk.log == store.get_range(0, 2)
    disk.changed_from = UNCHANGED  # checked
    _write(disk, store, Truncate(0))
    assert disk.changed_from == UNCHANGED  # a truncation alone writes nothing
    _write(disk, store, Append([Entry(1, 2, b"new"), Entry(2, 2, b"more")]))
    assert disk.changed_from == 1
    disk.changed_from = UNCHANGED
    disk.crash(True, random.Random(1), "lose-unsynced")  # the flushed entries 1 and 2 come back
    store, _state = disk.open()
    assert disk.changed_from == 1 and [e.term for e in disk.log] == [1, 1, 1]
    assert disk.log == store.get_range(0, store.end_index)


def rewrite_tail(rng: random.Random, log: list[Entry], start: int, count: int, bump: float) -> None:
    """Replace `log` from `start` on with `count` random entries (the term goes up with chance `bump`)."""
    del log[start:]
    term = log[-1].term if log else 1
    for i in range(start, start + count):
        term += rng.random() < bump
        log.append(Entry(i, term, rng.choice((b"", b"x"))))


def broken(logs: dict[str, list[Entry]], check: Callable[[], None]) -> bool:
    """Whether `logs` break log matching as a whole; the incremental `check` must say the same."""
    try:
        check_log_matching(logs)
    except Violation:
        with pytest.raises(Violation, match="log matching"):
            check()
        return True
    check()
    return False


def test_the_incremental_check_agrees_with_the_full_one() -> None:
    """Change one log from a random index on in a matching cluster: both checks must agree."""
    rng = random.Random(7)
    caught = 0
    for _ in range(3000):
        logs = {n: [Entry(i, 1 + i // 3, b"") for i in range(rng.randint(0, 6))] for n in ("a", "b", "c")}
        start = rng.randint(0, len(logs["b"]))
        rewrite_tail(rng, logs["b"], start, rng.randint(0, 4), 0.4)
        caught += broken(logs, partial(check_new_entries, "b", logs, start))
    assert caught > 100


def test_checking_each_write_agrees_with_checking_all_logs() -> None:
    """Random rewrites of log tails, each checked as it is written and against all the logs as they are."""
    rng = random.Random(11)
    caught = 0
    for _ in range(300):
        inv = Invariants()
        logs: dict[str, list[Entry]] = {n: [] for n in ("a", "b", "c")}
        for _ in range(30):
            node = rng.choice(list(logs))
            log = logs[node]
            start = rng.randint(max(0, len(log) - 3), len(log))
            rewrite_tail(rng, log, start, rng.randint(0, 3), 0.3)
            if broken(logs, partial(inv.on_write, node, log, start, logs.copy)):
                caught += 1
                break
    assert caught > 30


def test_a_node_that_leads_a_term_twice_breaks_election_safety() -> None:
    inv = Invariants()
    inv.on_election("n1", 3)
    inv.on_election("n1", 4)
    with pytest.raises(Violation, match="n1 leads term 3 a second time"):
        inv.on_election("n1", 3)
    with pytest.raises(Violation, match="n1 and n2 both leaders in term 4"):
        inv.on_election("n2", 4)


def test_the_coverage_report_counts_seeds_and_firings_and_flags_blind_spots() -> None:
    table = coverage_table(200, Counter({"push.truncate": 150, "disk-full": 1}),
                           Counter({"push.truncate": 900, "disk-full": 1}))
    rows = {r["rule"]: r for r in table.rows}
    assert set(rows) == set(RULES)
    assert (rows["push.truncate"]["seeds"], rows["push.truncate"]["fired"]) == (150, 900)
    assert "disk-full" in table.blind_spots and "push.truncate" not in table.blind_spots
    assert not set(UNREACHABLE) & set(table.blind_spots)  # explained, not blind


def test_a_simulated_run_reports_the_rules_it_fired() -> None:
    result = run_seed(SimConfig(seed=1, nodes=3, steps=2000))
    assert result.coverage["read-index.confirmed"] > 0 and result.coverage["push.compare.match"] > 0
    assert set(result.coverage) <= set(RULES)


def test_a_leader_must_hold_what_earlier_terms_committed_not_what_later_ones_did() -> None:
    inv = Invariants()
    log = entries(1, 1, 3)
    inv.on_commit("n1", log, -1, 1, 2)  # committed in term 2
    inv.on_commit("n1", log, 1, 2, 3)  # committed in term 3
    inv.on_leader("n2", 2, entries(1, 1))  # a late leader of term 2 need not hold term 3's commit
    inv.on_leader("n2", 4, log)
    with pytest.raises(Violation, match="n3 leads term 4 without committed entry 2"):
        inv.on_leader("n3", 4, entries(1, 1))
    with pytest.raises(Violation, match="n3 leads term 3 without committed entry 1"):
        inv.on_leader("n3", 3, entries(1, 2))


def test_a_new_leader_while_another_still_serves_lease_reads_breaks_lease_safety() -> None:
    inv = Invariants()
    inv.on_leases("n2", 5, {})
    with pytest.raises(Violation, match=r"n2 leads term 5 while n1 \(leader of term 4\) still serves"):
        inv.on_leases("n2", 5, {"n1": 4})


def test_a_stale_term_leader_beside_a_later_leaders_lease_is_no_lease_violation() -> None:
    """Issue 33: a node paused for 2.7 s counted a late vote and led a term below the current
    leader's, whose lease held; that leader is no threat to the lease (it cannot confirm one)."""
    inv = Invariants()
    inv.on_leases("n3", 4, {"n1": 5})
    with pytest.raises(Violation, match=r"n3 leads term 6 while n1 \(leader of term 5\)"):
        inv.on_leases("n3", 6, {"n1": 5, "n2": 7})
