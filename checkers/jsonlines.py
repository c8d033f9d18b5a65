"""Reading the JSON-lines files of a results folder line by line, with errors that name file and line.

The Spark loaders parse files in bulk and come here only to explain a problem: they ask for
the first bad line, so a person gets `history.jsonl line 17: ...`, never a Spark stack trace.
The pure-Python reference checker, the report and the fault log read everything through here.

History lines follow docs/formats.md's history contract; the client `f` values are `append`, `read`
and `consume`. A consume is one pull of a consumer that reads the log in order from its
offset (RocketMQ's pull consumer), so consumed entries are statements of what the log held,
not reads (no stale or linearizability rule applies to them):

    {"type": "invoke", "f": "consume", "value": {"consumer": 0, "from": 12}, ...}
    {"type": "ok", "f": "consume", "value": {"consumer": 0, "from": 12, "to": 14,
     "entries": [[12, "p3-41"], [13, null], [14, "p1-9"]], "offset": 15}, ...}
    {"type": "fail" | "info", "f": "consume", "value": {"consumer": 0, "from": 15}, "error": ...}

`consumer` (an integer) is the consumer's identity: it keeps it when it takes a fresh
`process` after an info. `from` is the offset it pulled from. An ok answer holds the entries
it got, consecutive log indexes from `from` (none: `to` is from - 1 and `entries` []), ids as
in reads (null: a no-op entry), and `offset`, the consumer's committed consume offset after
the pull: normally to + 1, lower than `from` when the node said the offset was beyond the
log's end and the consumer rewound (then `entries` is [] and `rewound` is true). An ok
consume's `consumer`, `from` and `to` may be left out: the invoke's stand.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from nodes.messages import ResponseCode

Validator = Callable[[Any], "str | None"]
OP_TYPES = ("invoke", "ok", "fail", "info")
CLIENT_FS = ("append", "read", "consume")
NEMESIS = "nemesis"
ROLES = ("candidate", "leader", "follower")


class InputError(ValueError):
    """A results folder file that is missing or malformed; the message names file and line."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def torn_last_line(path: Path) -> int | None:
    """Line number of a last line cut off mid-write (no newline, not JSON), else None.

    A run killed half-way leaves such a line; it is ignored, not an error.
    """
    size = path.stat().st_size
    if size == 0:
        return None
    with path.open("rb") as f:
        f.seek(max(0, size - 65536))
        tail = f.read()
    if tail.endswith(b"\n"):
        return None
    last = tail.rsplit(b"\n", 1)[-1]
    try:
        json.loads(last)
        return None
    except ValueError:
        with path.open("rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b"")) + 1


def iter_jsonl(path: Path, validate: Validator, skip: bytes | None = None) -> Iterator[tuple[int, Any]]:
    """Yield `(line_number, record)` for each line, from 1; InputError on the first bad line.

    A torn last line (see `torn_last_line`) is skipped, and so is, unparsed, a line holding the
    bytes `skip` (a reader that needs none of some kind of line). Memory stays flat.
    """
    if not path.is_file():
        raise InputError(f"{path}: missing (expected a JSON-lines file)")
    torn = torn_last_line(path)
    with path.open("rb") as f:
        for number, raw in enumerate(f, 1):
            if number == torn:
                return
            if skip is not None and skip in raw:
                continue
            try:
                record = json.loads(raw)
            except ValueError as e:
                raise InputError(f"{path} line {number}: not valid JSON ({e}): {_clip(raw)}") from None
            problem = validate(record)
            if problem:
                raise InputError(f"{path} line {number}: {problem}: {_clip(raw)}")
            yield number, record


def records(path: Path, validate: Validator) -> Iterator[Any]:
    """The records of `path` as `iter_jsonl` reads them, without their line numbers."""
    for _, record in iter_jsonl(path, validate):
        yield record


def _clip(raw: bytes) -> str:
    text = raw.decode(errors="replace").rstrip("\n")
    return text if len(text) <= 200 else text[:200] + "..."


def _entries_problem(f: str, entries: Any) -> str | None:
    if not isinstance(entries, list):
        return f"an ok {f} needs a list value.entries"
    for entry in entries:
        if not (
            isinstance(entry, list)
            and len(entry) == 2
            and _is_int(entry[0])
            and (entry[1] is None or isinstance(entry[1], str))
        ):
            return f"{f} entry {entry!r} is not [log_index, id]"
    return None


def _consume_problem(kind: str, value: dict[str, Any]) -> str | None:
    if kind == "invoke":
        if not (_is_int(value.get("consumer")) and _is_int(value.get("from"))):
            return "a consume invoke needs integer value.consumer and value.from"
        return None
    if kind != "ok":
        return None
    problem = _entries_problem("consume", value.get("entries"))
    if problem:
        return problem
    if not _is_int(value.get("offset")):
        return "an ok consume needs an integer value.offset (the committed consume offset)"
    for key in ("consumer", "from", "to"):
        if key in value and not _is_int(value[key]):
            return f"an ok consume's value.{key} must be an integer"
    if "rewound" in value and not isinstance(value["rewound"], bool):
        return "an ok consume's value.rewound must be true or false"
    return None


def _client_value_problem(record: dict[str, Any]) -> str | None:
    f, kind, value = record["f"], record["type"], record.get("value")
    if f not in CLIENT_FS:
        return None
    if not isinstance(value, dict):
        return f"a client {f} needs an object `value`"
    if f != "append" and kind in ("fail", "info") and "entries" in value:
        return _entries_problem(f, value["entries"])
    if f == "append":
        if kind == "invoke" and not isinstance(value.get("id"), str):
            return "an append invoke needs a string value.id"
        if kind == "ok" and "log_index" in value and not _is_int(value["log_index"]):
            return "an ok append's value.log_index, when given, must be an integer"
        return None
    if f == "consume":
        return _consume_problem(kind, value)
    if kind == "invoke" and any(key in value and not _is_int(value[key]) for key in ("from", "to")):
        return "a read invoke's value.from and value.to, when given, must be integers"
    if kind == "ok":
        return _entries_problem("read", value.get("entries"))
    return None


def history_line_problem(record: Any) -> str | None:
    """What is wrong with one history line on its own (None when it is well-formed)."""
    if not isinstance(record, dict):
        return "a history line must be a JSON object"
    if not _is_int(record.get("index")) or record["index"] < 0:
        return "`index` must be a non-negative integer"
    if not _is_int(record.get("time")):
        return "`time` must be an integer (nanoseconds)"
    if record.get("type") not in OP_TYPES:
        return f"`type` must be one of {', '.join(OP_TYPES)}"
    process = record.get("process")
    if not (_is_int(process) or process == NEMESIS):
        return '`process` must be an integer or "nemesis"'
    if not isinstance(record.get("f"), str):
        return "`f` must be a string"
    if process == NEMESIS:
        return None
    return _client_value_problem(record)


class HistoryValidator:
    """Checks each history line and the invoke/completion pairing across lines."""

    def __init__(self) -> None:
        self.line = 0
        self.open: dict[Any, str] = {}

    def __call__(self, record: Any) -> str | None:
        problem = history_line_problem(record)
        if problem:
            return problem
        if record["index"] != self.line:
            return f"`index` is {record['index']}, expected {self.line} (its position in the file)"
        self.line += 1
        process, f = record["process"], record["f"]
        if record["type"] == "invoke":
            if process in self.open:
                return f"process {process} invokes {f} before its {self.open[process]} completed"
            self.open[process] = f
        else:
            if self.open.get(process) != f:
                return f"process {process} completes {f} without an open invoke of {f}"
            del self.open[process]
        return None


def final_line_problem(record: Any) -> str | None:
    """What is wrong with one final-log line (`{"log_index", "term", "id"}`)."""
    if not isinstance(record, dict):
        return "a final-log line must be a JSON object"
    if not _is_int(record.get("log_index")) or record["log_index"] < 0:
        return "`log_index` must be a non-negative integer"
    if "term" in record and not (_is_int(record["term"]) or record["term"] is None):
        return "`term` must be an integer"
    if not (record.get("id") is None or isinstance(record["id"], str)):
        return "`id` must be a string or null (no-op)"
    return None


def event_line_problem(record: Any) -> str | None:
    """What is wrong with one events.jsonl line; lines other than role, vote and start lines
    are not checked."""
    if not isinstance(record, dict):
        return "an events line must be a JSON object"
    kind = record.get("event")
    if kind in ("vote", "start"):
        return _vote_line_problem(record)
    if "role" not in record:
        return None
    if record["role"] not in ROLES:
        return f"`role` must be one of {', '.join(ROLES)}"
    if not _is_int(record.get("term")):
        return "`term` must be an integer"
    if not isinstance(record.get("node"), str):
        return "`node` must be a string"
    if not (record.get("leader") is None or isinstance(record["leader"], str)):
        return "`leader` must be a string or null"
    if not (record.get("end_index") is None or _is_int(record["end_index"])):
        return "`end_index` must be an integer"
    return None


def _vote_line_problem(record: dict[str, Any]) -> str | None:
    """A vote line (the term and vote saved or granted) or a start line (the term and vote recovered)."""
    if not _is_int(record.get("term")):
        return "`term` must be an integer"
    if not isinstance(record.get("node"), str):
        return "`node` must be a string"
    if record["event"] == "vote":
        ok = record.get("candidate") is None or isinstance(record["candidate"], str)
        return None if ok else "`candidate` must be a string or null"
    if not (record.get("vote") is None or isinstance(record["vote"], str)):
        return "`vote` must be a string or null"
    return None if isinstance(record.get("fresh"), bool) else "`fresh` must be true or false"


def first_problem(path: Path, validate: Validator) -> InputError | None:
    """The error for the first bad line of `path`, or None when every line is fine."""
    try:
        for _ in iter_jsonl(path, validate):
            pass
    except InputError as e:
        return e
    return None


NOT_LEADER = f"answered {ResponseCode.NOT_LEADER.name}"  # nodes.client's DefiniteFailure text


def refused_by_non_leader(op_type: str, value: Any, error: str | None) -> bool:
    """A history line of a read asked of one node (`"at"`) that refused it because it does not
    lead: what a directed read meets whatever the faults, so not a fault's effect."""
    return op_type == "fail" and isinstance(value, dict) and "at" in value and NOT_LEADER in (error or "")
