"""Property-based: random operation sequences on the mmap store against an in-memory model."""

from __future__ import annotations

import shutil

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from storefiles import scratch_dir

from nodes.store.logstore import MAGIC_NOOP, MAGIC_NORMAL, Entry, StoreError
from nodes.store.mmapstore import MmapStore
from nodes.store.readfile import read_entries

bodies = st.binary(max_size=120)
SEGMENT = 512


class StoreVersusModel(RuleBasedStateMachine):
    """The store must always hold exactly the model's entries, also across reopens."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = scratch_dir()
        self.abandoned: list[MmapStore] = []
        self.store = self._open()
        self.model: list[Entry] = []
        self.committed = -1

    def _open(self) -> MmapStore:
        return MmapStore(self.directory, data_segment_size=SEGMENT, index_segment_size=96,
                         flush_interval_ms=None)

    @property
    def term(self) -> int:
        return self.model[-1].term if self.model else 0

    @rule(bump=st.integers(0, 2), body=bodies, noop=st.booleans())
    def append_leader(self, bump: int, body: bytes, noop: bool) -> None:
        magic = MAGIC_NOOP if noop else MAGIC_NORMAL
        entry = self.store.append_leader(self.term + bump, body, magic)
        assert entry == Entry(len(self.model), self.term + bump, body, magic)
        self.model.append(entry)

    @rule(bump=st.integers(0, 1), batch=st.lists(bodies, max_size=12))
    def append_many(self, bump: int, batch: list[bytes]) -> None:
        term = self.term + bump
        indexes = self.store.append_many(term, batch)
        assert list(indexes) == list(range(len(self.model), len(self.model) + len(batch)))
        self.model += [Entry(i, term, b) for i, b in zip(indexes, batch, strict=True)]

    @rule(terms=st.lists(st.integers(0, 2), min_size=1, max_size=6), body=bodies,
          channel=st.integers(0, 3))
    def append_follower(self, terms: list[int], body: bytes, channel: int) -> None:
        term, entries = self.term, []
        for i, bump in enumerate(terms):
            term += bump
            entries.append(Entry(len(self.model) + i, term, body, channel=channel))
        self.store.append(entries)
        self.model += entries

    @rule(data=st.data())
    def append_out_of_order_is_refused(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(-1, len(self.model) + 3).filter(lambda i: i != len(self.model)))
        try:
            self.store.append([Entry(index, self.term, b"bad")])
        except StoreError:
            return
        raise AssertionError(f"append at {index} with end {len(self.model) - 1} was accepted")

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        after = data.draw(st.integers(self.committed, len(self.model) - 1))
        self.store.truncate_after(after)
        del self.model[after + 1:]

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def commit(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(-1, len(self.model) - 1))
        self.store.set_committed(index)
        self.committed = max(self.committed, index)

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = self._open()
        self.committed = -1
        assert self.store.recovery.cut_pos is None

    @rule()
    def reopen_without_closing(self) -> None:
        """A process crash: the files keep what was written (the page cache survives)."""
        self.abandoned.append(self.store)
        self.store = self._open()
        self.committed = -1
        assert self.store.recovery.cut_pos is None

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def power_cut_tears_the_last_entry(self, data: st.DataObject) -> None:
        """The last entry's bytes reach disk only up to a random offset, then zeros. It is
        lost unless the bytes past the cut were zeros anyway (an empty body's CRC and length)."""
        self.store.close()
        last = list(read_entries(self.directory))[-1]
        cut = data.draw(st.integers(last.pos, last.pos + last.size - 1))
        path = self.directory / "data" / f"{last.pos - last.pos % SEGMENT:020d}"
        with path.open("r+b") as f:
            f.seek(cut % SEGMENT)
            lost = any(f.read(last.pos + last.size - cut))
            f.seek(cut % SEGMENT)
            f.write(bytes(SEGMENT - cut % SEGMENT))
        self.store = self._open()
        if lost:
            self.model.pop()
        self.committed = -1

    @invariant()
    def same_log(self) -> None:
        store = self.store
        assert store.end_index == len(self.model) - 1
        assert store.begin_index == (0 if self.model else -1)
        assert store.end_term == (self.model[-1].term if self.model else -1)
        assert store.committed_index == self.committed
        assert store.get_range(0, len(self.model) + 5) == self.model
        if self.model:
            last = len(self.model) - 1
            assert store.get(last) == self.model[-1] and store.term_at(last) == self.model[-1].term

    def teardown(self) -> None:
        self.store.close()
        for store in self.abandoned:
            store.close()
        shutil.rmtree(self.directory, ignore_errors=True)


StoreVersusModel.TestCase.settings = settings(
    max_examples=100, stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
test_store_matches_model = StoreVersusModel.TestCase
