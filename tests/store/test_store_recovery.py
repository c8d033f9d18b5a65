"""Crash recovery: torn writes at every byte, zeroed tails, bit flips, and bad files."""

from __future__ import annotations

from pathlib import Path

import pytest
from storefiles import DATA_SEGMENT, INDEX_SEGMENT, body_for, digest, restore, snapshot

from nodes.store.entrycodec import HEADER
from nodes.store.logstore import Entry
from nodes.store.mmapstore import CorruptEntryError, MmapStore
from nodes.store.readfile import read_entries
from nodes.store.recovery import CorruptStoreError


def build(open_store, count: int) -> tuple[MmapStore, list[Entry]]:
    store = open_store()
    written = [store.append_leader(1 + i // 25, body_for(i)) for i in range(count)]
    store.close()
    return store, written


def data_file(pos: int) -> str:
    return f"data/{pos - pos % DATA_SEGMENT:020d}"


def rel(pos: int) -> int:
    return pos % DATA_SEGMENT


def reopen_and_check(open_store, directory: Path, written: list[Entry], keep: int) -> MmapStore:
    """Open the damaged store: it must hold exactly `written[:keep]` and take new appends."""
    store = open_store(directory)
    assert store.end_index == keep - 1
    assert store.get_range(0, len(written)) == written[:keep]
    extra = store.append_leader(max(store.end_term, 1), b"after-recovery")
    assert extra.index == keep
    store.close()
    again = open_store(directory)
    assert again.recovery.cut_pos is None
    assert again.get_range(0, len(written) + 1) == [*written[:keep], extra]
    again.close()
    return store


@pytest.mark.parametrize("mode", ["zero-rest", "short-file"])
def test_torn_write_at_every_byte_of_the_last_entries(open_store, store_dir: Path, mode: str) -> None:
    directory = store_dir
    _, written = build(open_store, 40)
    pristine = snapshot(directory)
    on_disk = list(read_entries(directory))
    last_file = data_file(on_disk[-1].pos)
    tail = [e for e in on_disk if data_file(e.pos) == last_file][-2:]
    for cut in range(tail[0].pos, tail[-1].pos + tail[-1].size + 1):
        files = dict(pristine)
        content = files[last_file]
        files[last_file] = (content[:rel(cut)] + bytes(DATA_SEGMENT - rel(cut)) if mode == "zero-rest"
                            else content[:rel(cut)])
        restore(directory, files)
        keep = sum(1 for e in on_disk if e.pos + e.size <= cut)
        torn = next((e for e in on_disk if e.pos < cut < e.pos + e.size), None)
        store = reopen_and_check(open_store, directory, written, keep)
        if torn is not None and any(pristine[last_file][rel(torn.pos):rel(cut)]):
            assert store.recovery.cut_pos == torn.pos, cut
        else:
            assert store.recovery.cut_pos is None, cut


def test_lost_blank_record_of_the_previous_file_cuts_there(open_store, store_dir: Path) -> None:
    directory = store_dir
    store = open_store()
    written = []
    while True:
        written.append(store.append_leader(1, body_for(len(written))))
        on_disk = list(read_entries(directory))
        if on_disk[-1].pos % DATA_SEGMENT == 0 and len(on_disk) > 20:
            break
    store.close()
    last = on_disk[-1]
    prev = on_disk[-2]
    blank_at = prev.pos + prev.size
    files = snapshot(directory)
    previous = data_file(prev.pos)
    files[previous] = files[previous][:rel(blank_at)] + bytes(DATA_SEGMENT - rel(blank_at))
    restore(directory, files)
    recovered = reopen_and_check(open_store, directory, written, len(written) - 1)
    assert recovered.recovery.cut_pos == blank_at
    assert data_file(last.pos) in recovered.recovery.removed_files


@pytest.mark.parametrize("which", [-1, -2, -3])
def test_bit_flip_anywhere_in_a_tail_entry_cuts_exactly_there(open_store, store_dir: Path,
                                                             which: int) -> None:
    directory = store_dir
    _, written = build(open_store, 40)
    pristine = snapshot(directory)
    target = list(read_entries(directory))[which]
    name = data_file(target.pos)
    for offset in range(target.size):
        files = dict(pristine)
        content = bytearray(files[name])
        content[rel(target.pos) + offset] ^= 1 << (offset % 8)
        files[name] = bytes(content)
        restore(directory, files)
        store = reopen_and_check(open_store, directory, written, target.index)
        assert store.recovery.cut_pos == target.pos, offset


def test_bit_flip_anywhere_in_the_first_entry_of_the_store_cuts_it(open_store, store_dir: Path) -> None:
    # A flipped index field sent the chain check to a slot that does not match, which
    # turned it off: recovery kept the damaged entry and cut its sound successors instead.
    directory = store_dir
    _, written = build(open_store, 5)
    pristine = snapshot(directory)
    target = next(read_entries(directory))
    name = data_file(target.pos)
    for offset in range(target.size):
        for bit in range(8):
            files = dict(pristine)
            content = bytearray(files[name])
            content[offset] ^= 1 << bit
            files[name] = bytes(content)
            restore(directory, files)
            store = reopen_and_check(open_store, directory, written, 0)
            assert store.recovery.cut_pos == 0, (offset, bit)


def _patch_header(directory: Path, entry, **fields: int) -> None:
    path = directory / data_file(entry.pos)
    content = bytearray(path.read_bytes())
    names = ["magic", "size", "index", "term", "pos", "channel", "chain", "body_crc", "body_len"]
    values = dict(zip(names, HEADER.unpack_from(content, rel(entry.pos)), strict=True))
    values.update(fields)
    HEADER.pack_into(content, rel(entry.pos), *values.values())
    path.write_bytes(bytes(content))


@pytest.mark.parametrize("fields, reason", [
    ({"magic": 7}, "bad magic 7"),
    ({"size": 2**31 - 1}, "does not match body length"),
    ({"size": 2**31 - 1, "body_len": 2**31 - 49}, "overruns the file"),
    ({"body_len": -3, "size": 45}, "does not match body length"),
    ({"index": 5}, "does not follow"),
    ({"term": 0}, "below the previous term"),
    ({"pos": 12}, "pos field"),
])
def test_impossible_headers_are_cut_with_a_reason(open_store, store_dir: Path, fields, reason) -> None:
    directory = store_dir
    _, written = build(open_store, 30)
    last = list(read_entries(directory))[-1]
    _patch_header(directory, last, **fields)
    store = reopen_and_check(open_store, directory, written, last.index)
    assert reason in store.recovery.cut_reason
    assert store.recovery.cut_pos == last.pos


def test_damage_one_file_back_cuts_and_drops_the_last_file(open_store, store_dir: Path) -> None:
    directory = store_dir
    _, written = build(open_store, 60)
    on_disk = list(read_entries(directory))
    files = sorted({data_file(e.pos) for e in on_disk})
    victim = next(e for e in on_disk if data_file(e.pos) == files[-2] and e.size > 49)
    path = directory / data_file(victim.pos)
    content = bytearray(path.read_bytes())
    content[rel(victim.pos) + 48] ^= 0x40
    path.write_bytes(bytes(content))
    store = reopen_and_check(open_store, directory, written, victim.index)
    assert store.recovery.cut_pos == victim.pos
    assert files[-1] in store.recovery.removed_files


@pytest.mark.parametrize("beyond", [0, 1, 119])
def test_damage_at_or_below_the_stable_index_refuses_to_open_and_changes_nothing(
        open_store, store_dir: Path, beyond: int) -> None:
    directory = store_dir
    build(open_store, 120)
    on_disk = list(read_entries(directory))
    files = sorted({data_file(e.pos) for e in on_disk})
    victim = next(e for e in on_disk if data_file(e.pos) == files[-3])
    stable_index = min(victim.index + beyond, 119)
    _patch_header(directory, victim, body_crc=12345)
    before = digest(directory)
    with pytest.raises(CorruptStoreError, match=rf"up to {stable_index} were committed.*read-file"):
        open_store(directory, stable_index=stable_index)
    assert digest(directory) == before


def test_damage_far_from_the_end_above_the_stable_index_is_cut(open_store, store_dir: Path) -> None:
    """Files past a torn entry are what a power loss after a deep truncation leaves: cut them,
    however many there are, when the entries there were not known committed and flushed."""
    directory = store_dir
    _, written = build(open_store, 120)
    on_disk = list(read_entries(directory))
    files = sorted({data_file(e.pos) for e in on_disk})
    victim = next(e for e in on_disk if data_file(e.pos) == files[-4])
    _patch_header(directory, victim, body_crc=12345)
    store = reopen_and_check(open_store, directory, written, victim.index)
    assert store.recovery.cut_pos == victim.pos
    assert set(files[-3:]) <= set(store.recovery.removed_files)


def test_lost_files_below_the_stable_index_refuse_to_open(open_store, store_dir: Path) -> None:
    build(open_store, 120)
    for path in (store_dir / "data").iterdir():
        path.unlink()
    with pytest.raises(CorruptStoreError, match="holds no data files, but entries up to 5"):
        open_store(store_dir, stable_index=5)


def test_damage_in_files_recovery_does_not_walk_is_caught_on_read(open_store, store_dir: Path) -> None:
    directory = store_dir
    _, written = build(open_store, 120)
    victim = list(read_entries(directory))[3]
    path = directory / data_file(victim.pos)
    content = bytearray(path.read_bytes())
    content[rel(victim.pos) + victim.size - 1] ^= 1
    path.write_bytes(bytes(content))
    store = open_store(directory, stable_index=119)
    assert store.end_index == 119
    with pytest.raises(CorruptEntryError, match=r"entry 3 .* body CRC"):
        store.get(3)
    with pytest.raises(CorruptEntryError):
        store.get_range(0, 10)
    assert store.get_range(4, 119) == written[4:]


def test_non_last_data_file_of_wrong_length_refuses(open_store, store_dir: Path) -> None:
    directory = store_dir
    build(open_store, 60)
    first = directory / "data" / ("0" * 20)
    first.write_bytes(first.read_bytes()[:500])
    before = digest(directory)
    with pytest.raises(CorruptStoreError, match=rf"{first.name} is 500 bytes, expected data_segment_size"):
        open_store(directory)
    assert digest(directory) == before


def test_opening_with_another_segment_size_names_the_mismatch(open_store, store_dir: Path) -> None:
    build(open_store, 60)
    with pytest.raises(CorruptStoreError, match="segment size it was created with"):
        open_store(store_dir, data_segment_size=2 * DATA_SEGMENT)


def test_missing_data_file_in_the_middle_refuses(open_store, store_dir: Path) -> None:
    directory = store_dir
    build(open_store, 60)
    (directory / "data" / f"{DATA_SEGMENT:020d}").unlink()
    with pytest.raises(CorruptStoreError, match=f"{DATA_SEGMENT:020d} is missing"):
        open_store(directory)


def test_missing_index_file_is_rebuilt_from_the_data(open_store, store_dir: Path) -> None:
    directory = store_dir
    _, written = build(open_store, 60)
    (directory / "index" / f"{INDEX_SEGMENT:020d}").unlink()
    store = open_store(directory)
    assert store.recovery.index_slots_rebuilt == INDEX_SEGMENT // 32
    assert store.get_range(0, 100) == written


def test_missing_index_folder_is_rebuilt_from_the_data(open_store, store_dir: Path) -> None:
    directory = store_dir
    _, written = build(open_store, 60)
    for p in (directory / "index").iterdir():
        p.unlink()
    store = open_store(directory)
    assert store.recovery.index_slots_rebuilt == 60
    assert store.get_range(0, 100) == written


def test_index_file_of_wrong_length_is_replaced(open_store, store_dir: Path) -> None:
    directory = store_dir
    _, written = build(open_store, 60)
    (directory / "index" / f"{INDEX_SEGMENT:020d}").write_bytes(b"junk")
    store = open_store(directory)
    assert any("deleted index file" in note for note in store.recovery.notes)
    assert store.get_range(0, 100) == written


def test_wrong_index_slot_near_the_end_is_repaired(open_store, store_dir: Path) -> None:
    directory = store_dir
    _, written = build(open_store, 60)
    last_index_file = sorted((directory / "index").iterdir())[-1]
    content = bytearray(last_index_file.read_bytes())
    content[(59 * 32) % INDEX_SEGMENT:(59 * 32) % INDEX_SEGMENT + 32] = b"\x07" * 32
    last_index_file.write_bytes(bytes(content))
    store = open_store(directory)
    assert store.recovery.index_slots_rebuilt == 1 and store.get(59) == written[59]


def test_index_slots_past_the_end_are_cleared_with_a_cut(open_store, store_dir: Path) -> None:
    directory = store_dir
    _, written = build(open_store, 30)
    last = list(read_entries(directory))[-3]
    _patch_header(directory, last, magic=9)
    store = open_store(directory)
    assert store.end_index == last.index - 1
    store.append_leader(5, b"x")
    store.close()
    assert open_store(directory).get_range(0, 100) == [*written[:last.index], Entry(last.index, 5, b"x")]
