"""One streaming pass over a run's files: history.jsonl and each node's events.jsonl, each opened once.

After a run, every reader of these files listens to one `RunReader` instead of reading them
itself: the fault pairing and the fault log's client outcomes, the report's timeline, the op
timeline's chunks and the nodes' series, who led when included (`checkers.run.afterrun` puts them
together). `history` streams the history and gives each line to every `OpListener` with, for a
completion, its process's invoke; `events` streams each node's events.jsonl to every
`EventListener`. The pass remembers where the lines are (a byte offset every `STRIDE` lines and
each line's partner, its invoke or completion), so the ops the check's witnesses name, known
only once the check is done, are fetched afterwards by seeking in the file it holds open
(`lookup`), not by reading it again.

Lines are held to `checkers.jsonlines`' rules, a last line cut off mid-write skipped (no newline,
not JSON); a bad line is named, file and line, by that module's reader (`first_problem`).
"""

from __future__ import annotations

import itertools
import json
import weakref
from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from checkers.checks.witnesses import HistoryLookup
from checkers.jsonlines import InputError, Validator, event_line_problem, first_problem, history_line_problem
from checkers.layout import ResultsDir

STRIDE = 64  # history lines between two remembered byte offsets
Line = dict[str, Any]


class OpListener(Protocol):
    def on_op(self, line: Line, invoke: Line | None) -> None:
        """One history line, in order; for a completion `invoke` is its process's open invoke, if any."""

    def done(self, pending: list[Line]) -> None:
        """The history ended; `pending`: the invokes never completed, in history order."""


class EventListener(Protocol):
    def on_event(self, node: str, event: Line) -> None:
        """One line of nodes/<node>/events.jsonl, node by node, each node's in order."""

    def done(self) -> None:
        """Every node's events were read."""


def feed(lines: Iterable[Line], listeners: Sequence[OpListener]) -> None:
    """Give every listener each history line of `lines` with its invoke, then the invokes left pending."""
    open_: dict[Any, Line] = {}
    for line in lines:
        invoke = None
        if line["type"] == "invoke":
            open_[line["process"]] = line
        else:
            invoke = open_.pop(line["process"], None)
        for listener in listeners:
            listener.on_op(line, invoke)
    pending = list(open_.values())
    for listener in listeners:
        listener.done(pending)


class RunReader:
    """The files of the results folder `folder`, each read in one pass."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.history_path = folder / "history.jsonl"
        self._file: IO[bytes] | None = None
        self._offsets = array("q")  # of lines 0, STRIDE, 2 * STRIDE, ...
        self._partners = _Partners()

    def history(self, listeners: Sequence[OpListener]) -> None:
        """Stream history.jsonl to `listeners` (see `feed`); InputError names a missing file or a bad line.
        The file stays open for `lookup` until `close`."""
        if not self.history_path.is_file():
            raise _explained(self.history_path, history_line_problem)
        self._file = self.history_path.open("rb")
        weakref.finalize(self, self._file.close)
        feed(_parsed(self.history_path, self._file, history_line_problem, self._offsets),
             [*listeners, self._partners])

    @property
    def event_logs(self) -> dict[str, Path]:
        """node -> its events.jsonl, as the folder holds them now (a run collects them after its history)."""
        return ResultsDir(self.folder).event_logs()

    def events(self, listeners: Sequence[EventListener]) -> None:
        """Stream every node's events.jsonl to `listeners`; InputError names a bad line."""
        for node, path in sorted(self.event_logs.items()):
            with path.open("rb") as f:
                for event in _parsed(path, f, event_line_problem):
                    for listener in listeners:
                        listener.on_event(node, event)
        for listener in listeners:
            listener.done()

    def lookup(self, wanted: set[int]) -> HistoryLookup:
        """The ops at the history indexes `wanted`, each with its invoke and completion, fetched from
        the file `history` read by seeking to them (an index is its line's position: docs/formats.md)."""
        found = HistoryLookup(wanted)
        for _ in found.watch(self._lines_at(wanted)):
            pass
        return found

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def _lines_at(self, wanted: set[int]) -> Iterator[Line]:
        """The lines at positions `wanted` and their partners, in history order."""
        partners = self._partners.of
        needed = sorted({n for w in wanted if 0 <= w < len(partners) for n in (w, partners[w]) if n >= 0})
        if not needed:
            return
        assert self._file is not None  # `history` read the lines
        for block, numbers in itertools.groupby(needed, lambda n: n // STRIDE):
            these = set(numbers)
            self._file.seek(self._offsets[block])
            for number in range(block * STRIDE, max(these) + 1):
                raw = self._file.readline()
                if number in these:
                    yield json.loads(raw)


class _Partners:
    """Each history line's partner (its completion for an invoke, its invoke for a completion), or -1."""

    def __init__(self) -> None:
        self.of = array("i")
        self._open: dict[Any, int] = {}  # process -> the position of its open invoke

    def on_op(self, line: Line, invoke: Line | None) -> None:
        at = len(self.of)
        self.of.append(-1)
        if line["type"] == "invoke":
            self._open[line["process"]] = at
        elif invoke is not None and (began := self._open.pop(line["process"], None)) is not None:
            self.of[at], self.of[began] = began, at

    def done(self, pending: list[Line]) -> None:
        self._open.clear()


def _parsed(path: Path, f: IO[bytes], validate: Validator, offsets: array[int] | None = None
            ) -> Iterator[Line]:
    """The records of the open file `f` (of `path`), each validated; with `offsets`, appends the byte
    offset of every STRIDE-th line to it."""
    at = 0
    for number, raw in enumerate(f):
        if offsets is not None and number % STRIDE == 0:
            offsets.append(at)
        at += len(raw)
        try:
            record = json.loads(raw)
        except ValueError:
            if not raw.endswith(b"\n"):
                return  # the last line, cut off mid-write
            raise _explained(path, validate) from None
        if validate(record):
            raise _explained(path, validate)
        yield record


def _explained(path: Path, validate: Validator) -> InputError:
    """The error naming the first bad line of `path` (or its absence), as `checkers.jsonlines` says it."""
    return first_problem(path, validate) or InputError(f"{path}: unreadable")
