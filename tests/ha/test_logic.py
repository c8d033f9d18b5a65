"""The master-slave logic (`HaNode`) through the real driver on in-memory stores, tick by tick:
offset reports, what SYNC and ASYNC masters acknowledge and when, SLAVE_NOT_AVAILABLE,
catch-up, torn slave tails, reads and pulls, promotion and the old master's return."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodes.election import Role
from nodes.ha.config import BrokerRole
from nodes.logic import Ack, HaControl, NodeLogic
from nodes.messages import (
    AppendResponse,
    HaTruncate,
    PromoteResponse,
    PullResponse,
    ReadMode,
    ReadResponse,
    ResponseCode,
    TransferResponse,
)
from tests.support.hagroup import HaGroup


def ok(response: object) -> AppendResponse:
    assert isinstance(response, AppendResponse) and response.code is ResponseCode.SUCCESS, response
    return response


def read(group: HaGroup, node: str, first: int, last: int, mode: ReadMode = ReadMode.COMMITTED) -> list[int]:
    reply = group.call(node, "read", first, last, mode)
    assert isinstance(reply, ReadResponse) and reply.code is ResponseCode.SUCCESS
    return [e.index for e in reply.entries]


def reports_within_durable(group: HaGroup) -> None:
    """No slave ever reported an offset its store had not made durable when it sent it."""
    bad = [(name, r.offset, flushed) for name, r, flushed in group.reports if r.offset > flushed]
    assert not bad, f"reported beyond what was fsynced: {bad[:5]}"


def catches_up(group: HaGroup, slave: str, top: int, master: str = "n1") -> None:
    """`slave` comes to hold the master's log up to `top` durably, having reported only that."""
    group.run_until(lambda: group.stores[slave].flushed_index == top)
    assert group.stores[slave].entries == group.stores[master].entries
    reports_within_durable(group)


@pytest.fixture
def sync_pair(tmp_path: Path) -> HaGroup:
    group = HaGroup(tmp_path, 2, BrokerRole.SYNC_MASTER)
    assert group.wait_master() == "n1"
    return group


def test_both_logics_fit_the_protocol(sync_pair: HaGroup) -> None:
    node: NodeLogic = sync_pair.node("n1")
    assert isinstance(node, HaControl)
    meta = node.metadata()
    assert (meta.mode, meta.broker_role, meta.role) == ("master-slave", "SYNC_MASTER", "leader")
    assert meta.leader == "n1"
    sync_pair.run_until(lambda: sync_pair.node("n1").metadata().slaves == ["n2"])
    slave = sync_pair.node("n2").metadata()
    assert (slave.broker_role, slave.role, slave.leader, slave.slaves) == ("SLAVE", "follower", "n1", [])
    assert slave.term == meta.term == 1  # the master took a fresh epoch when it started


def test_the_slave_reports_its_durable_offset_after_each_flush_and_when_idle(sync_pair: HaGroup) -> None:
    group = sync_pair
    first = len(group.reports)
    group.tick(100)  # 1 s idle: a report every 100 ms
    assert 8 <= len(group.reports) - first <= 12
    rid = group.append("n1", b"a", b"b", b"c")
    ok(group.wait_answer(rid))
    latest = group.reports[-1][1]
    assert (latest.offset, latest.end_index) == (2, 2)
    reports_within_durable(group)


def test_a_slave_whose_flush_is_slow_holds_the_sync_master_ack(sync_pair: HaGroup) -> None:
    group = sync_pair
    group.run_until(lambda: "n2" in group.node("n1").metadata().slaves)
    group.auto_flush["n2"] = False  # the slave writes what it gets but cannot fsync it yet
    rid = group.append("n1", b"held")
    group.tick(50)  # 500 ms: the slave has the entry, written, not durable
    assert group.stores["n2"].end_index == 0 and group.stores["n2"].flushed_index == -1
    assert group.answer(rid) is None
    assert read(group, "n1", 0, 0) == [] and read(group, "n1", 0, 0, ReadMode.UNSAFE) == [0]
    assert read(group, "n2", 0, 0) == [] and read(group, "n2", 0, 0, ReadMode.UNSAFE) == [0]
    reports_within_durable(group)
    assert all(r.offset == -1 for name, r, _ in group.reports if name == "n2")
    group.flush("n2")
    assert ok(group.wait_answer(rid)).first_index == 0
    assert read(group, "n1", 0, 0) == [0] and read(group, "n2", 0, 0) == [0]
    reports_within_durable(group)


def test_a_sync_append_no_slave_confirms_in_time_is_flush_slave_timeout(sync_pair: HaGroup) -> None:
    group = sync_pair
    group.run_until(lambda: "n2" in group.node("n1").metadata().slaves)
    group.auto_flush["n2"] = False
    rid = group.append("n1", b"late")
    reply = group.wait_answer(rid, 1500)
    assert isinstance(reply, AppendResponse) and reply.code is ResponseCode.FLUSH_SLAVE_TIMEOUT
    assert (reply.first_index, reply.last_index) == (0, 0)  # written on the master all the same
    group.auto_flush["n2"] = True
    group.run_until(lambda: read(group, "n1", 0, 0) == [0])  # confirmed later: now acknowledged


def test_slave_not_available_at_once_when_no_slave_is_live_or_close(tmp_path: Path) -> None:
    group = HaGroup(tmp_path, 2, BrokerRole.SYNC_MASTER, max_slave_lag=3, sync_timeout_ms=200.0)
    group.wait_master()
    group.run_until(lambda: "n2" in group.node("n1").metadata().slaves)
    ok(group.wait_answer(group.append("n1", b"a")))
    # the master's pushes no longer reach the slave, whose reports still do: it falls behind
    group.cut.add(("n1", "n2"))
    timeouts = [group.wait_answer(group.append("n1", b"b")) for _ in range(3)]
    assert [r.code for r in timeouts] == [ResponseCode.FLUSH_SLAVE_TIMEOUT] * 3
    rid = group.append("n1", b"c")  # index 4: the slave, durable up to 0, lags it by 4 > 3
    reply = group.answer(rid)
    assert isinstance(reply, AppendResponse) and reply.code is ResponseCode.SLAVE_NOT_AVAILABLE
    assert reply.first_index == 4  # RocketMQ writes it first, then tells the producer
    group.heal()
    group.run_until(lambda: group.stores["n2"].flushed_index == 4)
    ok(group.wait_answer(group.append("n1", b"d")))
    # the slave dies: after housekeeping it is no longer live, and appends are refused at once
    group.crash("n2")
    group.tick(int(group.configs["n1"].housekeeping_ms / group.tick_ms) + 1)
    assert group.node("n1").metadata().slaves == []
    rid = group.append("n1", b"e")
    reply = group.answer(rid)
    assert isinstance(reply, AppendResponse) and reply.code is ResponseCode.SLAVE_NOT_AVAILABLE


def test_an_async_master_acks_at_once_or_after_its_own_fsync(tmp_path: Path) -> None:
    group = HaGroup(tmp_path / "a", 2, BrokerRole.ASYNC_MASTER, ack=Ack.WRITTEN)
    group.wait_master()
    group.crash("n2")
    group.auto_flush["n1"] = False
    ok(group.answer(group.append("n1", b"now")))
    sync = HaGroup(tmp_path / "s", 2, BrokerRole.ASYNC_MASTER, ack=Ack.FSYNCED)
    sync.wait_master()
    sync.auto_flush["n1"] = False
    rid = sync.append("n1", b"after-fsync")
    sync.tick(5)
    assert sync.answer(rid) is None
    sync.flush("n1")
    ok(sync.answer(rid))


def test_a_slave_refuses_appends_and_names_its_master(sync_pair: HaGroup) -> None:
    reply = sync_pair.call("n2", "append", [b"x"])
    assert isinstance(reply, AppendResponse)
    assert (reply.code, reply.leader, reply.first_index) == (ResponseCode.NOT_LEADER, "n1", -1)
    transfer = sync_pair.call("n1", "transfer", "n2")
    assert isinstance(transfer, TransferResponse) and transfer.code is ResponseCode.UNSUPPORTED
    with pytest.raises(ValueError, match="promote a slave"):
        sync_pair.node("n1").set_preferred_leader("n2")


def test_a_slave_catches_up_after_its_link_comes_back(tmp_path: Path) -> None:
    group = HaGroup(tmp_path, 2, BrokerRole.ASYNC_MASTER, max_inflight_entries=16, max_batch_entries=4)
    group.wait_master()
    group.isolate("n1", "n2")
    for i in range(100):
        ok(group.answer(group.append("n1", f"e{i}".encode())))
    group.tick(20)
    assert group.stores["n2"].end_index == -1
    group.heal()
    catches_up(group, "n2", 99)


def test_a_slave_that_lost_its_unflushed_tail_resumes_from_its_durable_offset(tmp_path: Path) -> None:
    group = HaGroup(tmp_path, 2, BrokerRole.ASYNC_MASTER)
    group.wait_master()
    for i in range(10):
        group.append("n1", f"a{i}".encode())
    group.run_until(lambda: group.stores["n2"].flushed_index == 9)
    group.auto_flush["n2"] = False
    for i in range(10):
        group.append("n1", f"b{i}".encode())
    group.run_until(lambda: group.stores["n2"].end_index == 19)
    group.crash("n2", power_loss=True)
    assert group.stores["n2"].end_index == 9
    group.auto_flush["n2"] = True
    group.start("n2")
    catches_up(group, "n2", 19)


def test_reads_see_what_the_mode_acknowledged(tmp_path: Path) -> None:
    group = HaGroup(tmp_path, 2, BrokerRole.SYNC_MASTER)
    group.wait_master()
    group.run_until(lambda: "n2" in group.node("n1").metadata().slaves)
    for i in range(5):
        ok(group.wait_answer(group.append("n1", f"x{i}".encode())))
    assert read(group, "n1", 0, 10) == read(group, "n2", 0, 10) == [0, 1, 2, 3, 4]
    group.crash("n2")
    rid = group.append("n1", b"unconfirmed")
    assert read(group, "n1", 0, 10) == [0, 1, 2, 3, 4]  # no slave confirmed index 5
    assert read(group, "n1", 0, 10, ReadMode.UNSAFE) == [0, 1, 2, 3, 4, 5]
    assert group.wait_answer(rid, 1500).code is ResponseCode.FLUSH_SLAVE_TIMEOUT  # type: ignore[union-attr]


def test_a_pull_that_lags_too_far_is_told_to_pull_from_a_slave(tmp_path: Path) -> None:
    group = HaGroup(tmp_path, 2, BrokerRole.ASYNC_MASTER, suggest_slave_lag=5)
    group.wait_master()
    for i in range(20):
        group.append("n1", f"m{i}".encode())
    group.run_until(lambda: group.stores["n2"].flushed_index == 19)
    group.run_until(lambda: bool(group.node("n1").metadata().slaves))

    def pull(node: str, offset: int) -> PullResponse:
        reply = group.call(node, "pull", offset, 4)
        assert isinstance(reply, PullResponse) and reply.code is ResponseCode.SUCCESS
        return reply

    lagging = pull("n1", 0)
    assert [e.index for e in lagging.entries] == [0, 1, 2, 3] and lagging.next_offset == 4
    assert (lagging.suggest, lagging.min_offset, lagging.max_offset, lagging.leader) == ("n2", 0, 19, "n1")
    assert pull("n1", 16).suggest == "n1"  # close to the end: stay on the master
    assert pull("n2", 16).suggest == "n1"  # caught up on the slave: back to the master
    assert pull("n2", 0).suggest == "n2"  # still lagging: keep pulling from the slave
    done = pull("n1", 20)
    assert done.entries == [] and done.next_offset == 20
    group.crash("n1")
    group.tick(int(group.configs["n2"].housekeeping_ms / group.tick_ms) + 1)
    on_slave = pull("n2", 16)  # the master is gone: the slave serves what it has
    assert [e.index for e in on_slave.entries] == [16, 17, 18, 19] and on_slave.suggest == "n2"


def test_promotion_and_the_old_master_comes_back_as_a_slave(tmp_path: Path) -> None:
    group = HaGroup(tmp_path, 3, BrokerRole.ASYNC_MASTER)
    group.wait_master()
    for i in range(10):
        group.append("n1", f"a{i}".encode())
    group.run_until(lambda: all(group.stores[n].flushed_index == 9 for n in ("n2", "n3")))
    group.cut.add(("n1", "n2"))  # n2 misses what comes next, n3 gets it
    for i in range(5):
        ok(group.answer(group.append("n1", f"b{i}".encode())))  # acknowledged by the async master
    group.run_until(lambda: group.stores["n3"].flushed_index == 14)
    old_epoch = group.node("n1").term
    group.crash("n1")
    group.heal()
    reply = group.call("n2", "append", [b"no-master"])
    assert (reply.code, reply.leader) == (ResponseCode.NOT_LEADER, "n1")  # type: ignore[union-attr]

    promoted = group.call("n2", "promote", "")
    assert isinstance(promoted, PromoteResponse) and promoted.code is ResponseCode.SUCCESS
    assert promoted.epoch == old_epoch + 1 and group.active_master() == "n2"
    assert group.node("n2").broker_role is BrokerRole.ASYNC_MASTER  # the flavour it followed
    # n3 follows n2 and loses the five entries only n1 and n3 had
    group.run_until(lambda: group.node("n3").leader == "n2" and group.stores["n3"].end_index == 9)
    assert any(isinstance(m, HaTruncate) and m.after == 9 for s, r, m in group.sent if r == "n3")
    ok(group.answer(group.append("n2", b"c0")))
    group.run_until(lambda: group.stores["n3"].flushed_index == 10)

    group.start("n1")  # same settings: ASYNC_MASTER
    group.run_until(lambda: group.node("n1").leader == "n2")
    assert group.node("n1").broker_role is BrokerRole.SLAVE
    group.run_until(lambda: group.stores["n1"].flushed_index == 10)
    assert group.stores["n1"].entries == group.stores["n2"].entries == group.stores["n3"].entries
    assert group.call("n1", "append", [b"x"]).code is ResponseCode.NOT_LEADER  # type: ignore[union-attr]
    restarted = group.roles["n1"][-2:]
    assert [c.role for c in restarted] == [Role.CANDIDATE, Role.FOLLOWER]  # never leader again
    group.crash("n1")
    group.start("n1")  # its currterm now names n2: it stays a slave whatever its settings say
    assert group.node("n1").role is Role.FOLLOWER and group.node("n1").leader == "n2"


def test_a_deposed_sync_master_fails_its_waiting_appends_as_unknown(tmp_path: Path) -> None:
    group = HaGroup(tmp_path, 2, BrokerRole.SYNC_MASTER)
    group.wait_master()
    group.run_until(lambda: "n2" in group.node("n1").metadata().slaves)
    group.auto_flush["n2"] = False
    rid = group.append("n1", b"waiting")
    group.tick(2)
    promoted = group.call("n2", "promote", "SYNC_MASTER")
    assert promoted.code is ResponseCode.SUCCESS  # type: ignore[union-attr]
    reply = group.wait_answer(rid)
    assert isinstance(reply, AppendResponse) and reply.code is ResponseCode.TERM_CHANGED
    assert group.node("n1").leader == "n2" and group.node("n1").broker_role is BrokerRole.SLAVE


def test_a_restarted_master_waits_for_a_slave_before_it_takes_writes(tmp_path: Path) -> None:
    group = HaGroup(tmp_path, 2, BrokerRole.ASYNC_MASTER)
    group.wait_master()
    epoch = group.node("n1").term
    group.crash("n1")
    group.start("n1")
    assert group.node("n1").role is Role.CANDIDATE
    assert group.call("n1", "append", [b"x"]).code is ResponseCode.NOT_LEADER  # type: ignore[union-attr]
    # the slave's next report (within its report interval) confirms it: a fresh epoch
    group.run_until(lambda: group.node("n1").role is Role.LEADER, group.configs["n2"].report_interval_ms + 20)
    assert group.node("n1").term == epoch + 1
    group.run_until(lambda: group.node("n2").term == epoch + 1)
    # alone, it waits out the housekeeping interval
    group.crash("n2")
    group.crash("n1")
    group.start("n1")
    group.tick(int(group.configs["n1"].housekeeping_ms / group.tick_ms) - 2)
    assert group.node("n1").role is Role.CANDIDATE
    group.tick(3)
    assert group.node("n1").role is Role.LEADER and group.node("n1").term == epoch + 2

