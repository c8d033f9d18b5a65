"""The real mmap store on the simulated disk: crashes, power losses, flushes racing truncations."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from nodes.sim.simfs import LOSS_MODES, LossMode, SimFileSystem
from nodes.store.logstore import Entry
from nodes.store.mmapstore import MmapStore
from nodes.store.retention import RetentionPolicy

DIR = Path("/node")


def open_sim(fs: SimFileSystem, stable_index: int = -1, data: int = 4096, index: int = 4096,
             **options: object) -> MmapStore:
    return MmapStore(DIR, data_segment_size=data, index_segment_size=index, flush_interval_ms=None,
                     stable_index=stable_index, fs=fs, **options)


def body(rng: random.Random, longest: int = 400) -> bytes:
    return rng.randbytes(rng.randint(0, longest))


class CountingFs(SimFileSystem):
    """Counts syncs, and runs `during_sync` (once) inside the next one, as another thread would."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs = self.dir_syncs = 0
        self.during_sync = None

    def sync_pages(self, inode, start: int, stop: int) -> None:
        self.syncs += 1
        hook, self.during_sync = self.during_sync, None
        if hook is not None:
            hook()
        super().sync_pages(inode, start, stop)

    def fsync_dir(self, path: Path) -> None:
        self.dir_syncs += 1
        super().fsync_dir(path)


def test_round_trip_close_and_reopen() -> None:
    fs = SimFileSystem()
    rng = random.Random(1)
    store = open_sim(fs)
    written = [store.append_leader(1 + i // 50, body(rng)) for i in range(200)]
    store.close()
    again = open_sim(fs)
    assert again.recovery.cut_pos is None and again.flushed_index == 199
    assert again.get_range(0, 500) == written
    assert len(fs.list_dir(DIR / "data")) > 5


def test_a_process_crash_loses_nothing_and_recovery_makes_it_durable() -> None:
    fs = SimFileSystem()
    store = open_sim(fs)
    written = [store.append_leader(1, bytes([i]) * i) for i in range(100)]
    assert store.flushed_index == -1
    fs.crash()
    again = open_sim(fs)
    assert again.get_range(0, 200) == written and again.flushed_index == 99
    fs.power_loss(random.Random(0), "reorder-tear")
    assert open_sim(fs).get_range(0, 200) == written


def test_truncation_does_no_io_and_the_next_flush_makes_it_durable() -> None:
    fs = CountingFs()
    store = open_sim(fs, data=1024, index=320)
    written = [store.append_leader(1, bytes(40) + bytes([i])) for i in range(100)]
    store.flush()
    before = (fs.syncs, fs.dir_syncs)
    store.truncate_after(20)
    store.truncate_after(10)
    assert (fs.syncs, fs.dir_syncs) == before
    assert store.flushed_index == 10
    store.flush()
    assert fs.syncs > before[0] and fs.dir_syncs > before[1]
    fs.power_loss(random.Random(0), "lose-unsynced")
    assert open_sim(fs, data=1024, index=320).get_range(0, 200) == written[:11]


def test_a_flush_running_across_a_truncation_claims_only_what_it_synced() -> None:
    """The flush takes entries 0..59 to sync; inside its first sync (as if from another thread)
    the log is truncated after 20 and rewritten up to 69 over the files it is syncing. It may
    then claim 20 only: 21..69 were written after it started."""
    fs = CountingFs()
    store = open_sim(fs, data=1024, index=320)
    old = [store.append_leader(1, b"old" * 10 + bytes([i])) for i in range(30)]
    store.flush()
    old += [store.append_leader(1, b"old" * 10 + bytes([i])) for i in range(30, 60)]
    new = [Entry(i, 2, b"new" * 12 + bytes([i])) for i in range(21, 70)]

    def truncate_and_rewrite() -> None:
        store.truncate_after(20)
        store.append(new)

    fs.during_sync = truncate_and_rewrite
    assert store.flush() == 20
    assert store.flushed_index == 20 and store.end_index == 69
    assert store.flush() == 69
    fs.power_loss(random.Random(0), "lose-unsynced")
    assert open_sim(fs, data=1024, index=320).get_range(0, 100) == old[:21] + new


def test_disk_full_comes_from_the_simulated_capacity() -> None:
    fs = SimFileSystem(capacity=20 * 1024)
    policy = RetentionPolicy(check_interval_s=None)
    store = open_sim(fs, data=1024, index=1024, retention=policy)
    while fs.disk_use_ratio(DIR) <= policy.disk_full_ratio:
        store.append_leader(1, bytes(200))
    assert not store.disk_full
    store.clean(now=0)
    assert store.disk_full
    store.set_committed(store.end_index)
    assert store.clean(now=0) and not store.disk_full
    assert fs.disk_use_ratio(DIR) <= policy.force_clean_ratio


def test_retention_ages_files_by_the_simulated_clock() -> None:
    """A file's time is when its last change reached the disk."""
    now = [0.0]
    fs = SimFileSystem(clock=lambda: now[0])
    policy = RetentionPolicy(reserved_s=10, check_interval_s=None)
    store = open_sim(fs, data=1024, index=1024, retention=policy)
    store.append_many(1, [bytes(300)] * 20)
    store.flush()
    now[0] = 100.0
    store.append_many(1, [bytes(300)] * 20)
    store.flush()
    store.set_committed(store.end_index)
    assert store.clean(now=105.0) and store.begin_index > 0
    assert {fs.modified_time(DIR / "data" / name) for name in fs.list_dir(DIR / "data")} == {100.0}


@pytest.mark.parametrize("mode", LOSS_MODES)
def test_a_power_loss_after_a_deep_truncation_recovers_a_log_the_store_held(mode: LossMode) -> None:
    """Truncating back over several files leaves, until the next flush, their deletion and the
    rewrite to reach the disk in any order: recovery must neither refuse nor mix the logs."""
    for seed in range(100):
        fs = SimFileSystem()
        store = open_sim(fs, data=1024, index=320)
        old = [store.append_leader(1, bytes([i]) * 60) for i in range(80)]
        store.set_committed(5)
        store.flush()
        stable = store.stable_index
        store.truncate_after(8)
        new = [Entry(i, 2, bytes([i]) * 50) for i in range(9, 30)]
        store.append(new)
        fs.power_loss(random.Random(seed), mode)
        got = open_sim(fs, stable_index=stable, data=1024, index=320).get_range(0, 100)
        assert got in (old[:len(got)], (old[:9] + new)[:len(got)]), seed
        assert len(got) >= 9 if mode == "reorder-tear" else got == old


class Run:
    """Random operations on a store over a simulated disk, remembering every log it held since
    it was last opened, the log as the last flush left it, and the stable index recorded
    after that flush (as a checkpoint would)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.fs = SimFileSystem()
        self.sizes = {"data": self.rng.choice([1024, 4096, 8192]), "index": self.rng.choice([320, 4096])}
        self.stable = -1
        self.reopen()

    def reopen(self) -> None:
        self.store = open_sim(self.fs, self.stable, **self.sizes)
        self.store.set_committed(self.stable)
        self.log = self.store.get_range(0, 1 << 30)
        self.versions = [list(self.log)]
        self.at_flush = list(self.log)

    def step(self) -> None:
        rng, store, log = self.rng, self.store, self.log
        roll = rng.random()
        longest = self.sizes["data"] // 3
        if roll < 0.4:
            term = max(store.end_term, 1) + rng.choice([0, 0, 1])
            first = store.append_many(term, [body(rng, longest) for _ in range(rng.randint(1, 8))]).start
            log += store.get_range(first, store.end_index)
        elif roll < 0.55 and store.end_index > store.committed_index:
            after = rng.randint(store.committed_index, store.end_index - 1)
            store.truncate_after(after)
            del log[after + 1:]
            term = max(store.end_term, 1) + 1
            entries = [Entry(after + 1 + k, term, body(rng, longest)) for k in range(rng.randint(0, 8))]
            store.append(entries)
            log += entries
        elif roll < 0.75:
            store.flush()
            self.at_flush, self.stable = list(log), store.stable_index
        elif roll < 0.9 and store.end_index > store.committed_index:
            store.set_committed(rng.randint(store.committed_index + 1, store.end_index))
        elif roll < 0.95:
            self.fs.crash()
            self.reopen()
            assert self.log == self.versions[0]
            return
        self.versions.append(list(log))

    def power_loss(self, mode: LossMode) -> None:
        """Lose power, reopen, and check what came back."""
        flushed, log, versions, at_flush = self.store.flushed_index, self.log, self.versions, self.at_flush
        self.fs.power_loss(self.rng, mode)
        self.reopen()
        got = self.log
        if mode == "lose-unsynced":
            assert got == at_flush
        assert got[:flushed + 1] == log[:flushed + 1]
        assert len(got) > self.stable
        assert any(v[:len(got)] == got for v in versions)


@pytest.mark.parametrize("mode", LOSS_MODES)
def test_random_runs_recover_a_prefix_of_a_log_the_store_held(mode: LossMode) -> None:
    torn = cut = 0
    for seed in range(300):
        run = Run(seed)
        for _ in range(3):
            for _ in range(run.rng.randint(0, 40)):
                run.step()
            run.power_loss(mode)
            cut += run.store.recovery.cut_pos is not None
        torn += run.fs.losses.pages_torn
    assert (torn > 0, cut > 0) == (mode == "reorder-tear",) * 2
