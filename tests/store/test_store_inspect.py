"""The read-only inspector: `read_entries` and `python -m nodes read-file`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from storefiles import DATA_SEGMENT, digest

from nodes.payload import encode_payload
from nodes.store.logstore import MAGIC_NOOP
from nodes.store.readfile import read_entries, scan_store


@pytest.fixture
def filled(open_store, store_dir: Path) -> Path:
    """A closed store of a no-op and 59 client entries."""
    store = open_store()
    store.append_leader(1, b"", MAGIC_NOOP)
    store.append_many(2, [encode_payload(f"p1-{i}", 40) for i in range(59)])
    store.close()
    return store_dir


def read_file(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nodes", "read-file", *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_read_entries_returns_what_was_appended_and_changes_nothing(filled: Path) -> None:
    before = digest(filled)
    entries = list(read_entries(filled))
    assert [(e.index, e.term) for e in entries] == [(0, 1)] + [(i, 2) for i in range(1, 60)]
    assert entries[0].magic == MAGIC_NOOP and entries[5].body == encode_payload("p1-4", 40)
    assert all(e.body_crc_ok and e.chain_crc_ok for e in entries)
    assert entries[1].pos == entries[0].pos + entries[0].size
    assert list(read_entries(filled / "data")) == entries
    assert digest(filled) == before


def test_a_torn_copy_reports_its_bad_tail_without_raising(filled: Path) -> None:
    entries = list(read_entries(filled))
    victim, torn = entries[20], entries[-1]
    path = filled / "data" / f"{victim.pos - victim.pos % DATA_SEGMENT:020d}"
    content = bytearray(path.read_bytes())
    content[victim.pos % DATA_SEGMENT + victim.size - 1] ^= 0x10
    path.write_bytes(bytes(content))
    last = filled / "data" / f"{torn.pos - torn.pos % DATA_SEGMENT:020d}"
    last.write_bytes(last.read_bytes()[:torn.pos % DATA_SEGMENT + 30])
    before = digest(filled)
    scan = scan_store(filled)
    seen = list(scan)
    assert [e.index for e in seen] == list(range(59))
    assert [e.index for e in seen if not e.body_crc_ok] == [20]
    assert all(e.chain_crc_ok for e in seen)
    assert scan.stop is not None and not scan.stop.clean and "cut short" in scan.stop.reason
    assert scan.stop.pos == torn.pos
    assert digest(filled) == before
    result = read_file("--dir", str(filled))
    assert result.returncode == 1
    assert "DAMAGED" in result.stdout and "1 failing a CRC" in result.stdout


def test_read_file_prints_entries_and_a_summary(filled: Path) -> None:
    result = read_file("--dir", str(filled))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 62
    assert lines[-1].startswith("summary: 60 entries, index 0..59, terms 1..2, 0 failing a CRC; tail clean")
    assert "p1-3" in lines[5] and " ok " in lines[5]


def test_read_file_json_and_single_index(filled: Path) -> None:
    result = read_file("--dir", str(filled), "--index", "7", "--json")
    assert result.returncode == 0, result.stderr
    entry, summary = (json.loads(line) for line in result.stdout.splitlines())
    assert entry["index"] == 7 and entry["id"] == "p1-6" and entry["body_crc_ok"] is True
    assert summary["summary"]["entries"] == 60 and summary["summary"]["tail_clean"] is True


def test_read_file_missing_index_and_bad_directory(filled: Path, tmp_path: Path) -> None:
    missing = read_file("--dir", str(filled), "--index", "500")
    assert missing.returncode == 1 and "index 500 is not in the store" in missing.stderr
    bad = read_file("--dir", str(tmp_path / "nowhere"))
    assert bad.returncode == 254 and "not a directory" in bad.stderr
    assert read_file().returncode == 254


def test_read_entries_on_an_empty_folder(tmp_path: Path) -> None:
    scan = scan_store(tmp_path)
    assert list(scan) == [] and scan.stop is not None and scan.stop.clean
