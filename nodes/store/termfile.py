"""DLedger's small properties files: `currterm` (term and vote) and `checkpoint` (commit).

The text is DLedger's Java-properties form: `currTerm=..` / `voteLeader=..` (an empty vote
meaning none) and `committedIndex=..`. DLedger replaces the files through a tmp file and a
rename without fsync; we fsync the tmp file before the rename and the directory after it,
so a vote survives a power loss. The files are read and written through a `FileSystem`
(the real one by default, the simulator's in the simulator).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nodes.store.fs import REAL_FS, FileSystem

TERM_FILE = "currterm"
CHECKPOINT_FILE = "checkpoint"
TERM_KEY = "currTerm"
VOTE_KEY = "voteLeader"
COMMITTED_KEY = "committedIndex"


class PropertiesFileError(Exception):
    """A properties file exists but cannot be understood."""


@dataclass(frozen=True, slots=True)
class TermState:
    term: int = 0
    vote_for: str | None = None


def read_properties(path: Path, *, fs: FileSystem = REAL_FS) -> dict[str, str]:
    """`key=value` lines of `path` (comments and blank lines skipped); {} if it does not exist."""
    try:
        text = fs.read_file(path).decode("utf-8")
    except FileNotFoundError:
        return {}
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise PropertiesFileError(f"{path}: line {line!r} is not key=value; fix or delete the file")
        values[key.strip()] = value.strip()
    return values


def write_properties(path: Path, values: dict[str, str], *, fs: FileSystem = REAL_FS) -> None:
    """Durably replace `path`: write a tmp file and fsync it, rename it over `path`, fsync the
    directory. A power loss before the last step keeps the old content or the new, whole."""
    tmp = path.with_name(path.name + ".tmp")
    fs.write_file(tmp, "".join(f"{k}={v}\n" for k, v in values.items()).encode())
    fs.rename(tmp, path)
    fs.fsync_dir(path.parent)


def _int_value(path: Path, values: dict[str, str], key: str, default: int) -> int:
    raw = values.get(key)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise PropertiesFileError(f"{path}: {key}={raw!r} is not an integer; fix or delete the file") from exc


def load_term(data_dir: Path, *, fs: FileSystem = REAL_FS) -> TermState:
    """The persisted term and vote; term 0 and no vote when there is no file yet."""
    path = data_dir / TERM_FILE
    values = read_properties(path, fs=fs)
    term = _int_value(path, values, TERM_KEY, 0)
    if term < 0:
        raise PropertiesFileError(f"{path}: {TERM_KEY}={term} is negative; fix or delete the file")
    return TermState(term, values.get(VOTE_KEY) or None)


def save_term(data_dir: Path, state: TermState, *, fs: FileSystem = REAL_FS) -> None:
    """Persist term and vote durably (before any message that depends on them leaves)."""
    write_properties(data_dir / TERM_FILE, {TERM_KEY: str(state.term), VOTE_KEY: state.vote_for or ""}, fs=fs)


def load_checkpoint(data_dir: Path, *, fs: FileSystem = REAL_FS) -> int:
    """The last committed index written to `checkpoint`, -1 when none."""
    path = data_dir / CHECKPOINT_FILE
    return _int_value(path, read_properties(path, fs=fs), COMMITTED_KEY, -1)


def save_checkpoint(data_dir: Path, committed_index: int, *, fs: FileSystem = REAL_FS) -> None:
    """Record the committed index (a recovery hint, never above what the store holds; the
    store's `stable_index`, committed and flushed, can be passed back to it on reopen)."""
    write_properties(data_dir / CHECKPOINT_FILE, {COMMITTED_KEY: str(committed_index)}, fs=fs)
