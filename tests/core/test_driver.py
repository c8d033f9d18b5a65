"""The driver: group commit (one flush at a time, covering every append made meanwhile), the
term file written before messages leave, DISK_FULL decided here, the checkpoint."""

from __future__ import annotations

from pathlib import Path

from nodes.core import Core, CoreConfig
from nodes.driver import Driver
from nodes.logic import Ack, Flusher, Ready
from nodes.messages import ClientResponse, PeerMessage, ResponseCode
from nodes.store.memstore import MemStore
from nodes.store.termfile import TermState, load_checkpoint, load_term


class Host:
    """Records what the driver asks of its host."""

    def __init__(self) -> None:
        self.flushes = 0
        self.sent: list[tuple[str, PeerMessage]] = []
        self.answers: dict[int, ClientResponse] = {}

    def send(self, peer: str, message: PeerMessage) -> None:
        self.sent.append((peer, message))

    def complete(self, token: int, response: ClientResponse) -> None:
        self.answers[token] = response

    def start_flush(self) -> None:
        self.flushes += 1

    def applied(self, ready: Ready) -> None:
        pass


class FullStore(MemStore):
    @property
    def disk_full(self) -> bool:
        return True


def _leader(tmp_path: Path, store: MemStore) -> tuple[Core, Driver, Host]:
    host = Host()
    core = Core("n1", ["n1"], store, config=CoreConfig(ack=Ack.FSYNCED))
    driver = Driver(core, store, tmp_path, TermState(), Flusher.GROUP_COMMIT, host)
    core.tick(0.0)  # a single member elects itself
    driver.drive()
    return core, driver, host


def test_appends_made_while_a_flush_runs_share_the_next_one(tmp_path: Path) -> None:
    store = MemStore()
    core, driver, host = _leader(tmp_path, store)
    assert host.flushes == 1  # the leader's no-op
    for token in range(1, 6):  # five appends while that flush is running: no second flush yet
        core.client_append(token, [b"x"], 1.0)
        driver.drive()
    assert host.flushes == 1 and host.answers == {}
    store.flush()  # the host's flush covers the no-op and all five
    driver.flushed(2.0)
    assert host.flushes == 1  # nothing left to flush
    assert sorted(host.answers) == [1, 2, 3, 4, 5]
    assert {r.code for r in host.answers.values()} == {ResponseCode.SUCCESS}


def test_term_and_vote_reach_the_term_file_before_any_message(tmp_path: Path) -> None:
    store = MemStore()
    host = Host()
    core = Core("n1", ["n1", "n2", "n3"], store, config=CoreConfig(ack=Ack.FSYNCED))
    seen: list[TermState] = []
    host.send = lambda peer, message: seen.append(load_term(tmp_path))  # type: ignore[method-assign]
    driver = Driver(core, store, tmp_path, TermState(), Flusher.GROUP_COMMIT, host)
    core.tick(0.0)
    core.tick(10_000.0)  # campaign: a new term, a vote for itself, vote requests
    driver.drive()
    assert seen and all(s == TermState(core.term, "n1") for s in seen)


def test_a_full_disk_refuses_client_appends_in_the_driver(tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "roomy").mkdir()
    full_core, full, full_host = _leader(tmp_path / "full", FullStore())
    roomy_core, roomy, _host = _leader(tmp_path / "roomy", MemStore())
    assert (full.append_refusal(), roomy.append_refusal()) == (ResponseCode.DISK_FULL, None)
    full.client_append(7, [b"x"], 1.0)
    roomy.client_append(7, [b"x"], 1.0)
    assert full_host.answers[7].code is ResponseCode.DISK_FULL
    assert (full_core.log.end_index, roomy_core.log.end_index) == (0, 1)  # the no-op; the no-op and x


def test_the_checkpoint_records_what_is_committed_and_durable(tmp_path: Path) -> None:
    store = MemStore()
    core, driver, _host = _leader(tmp_path, store)
    core.client_append(1, [b"x"], 1.0)
    driver.drive()
    driver.checkpoint()
    assert load_checkpoint(tmp_path) == -1  # nothing committed and flushed yet
    store.flush()
    driver.flushed(2.0)
    driver.checkpoint()
    assert load_checkpoint(tmp_path) == 1 == store.stable_index
