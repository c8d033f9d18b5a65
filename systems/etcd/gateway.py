"""etcd 3.4's JSON gateway for our log workload: request bodies and answer parsing, pure.

The gateway (`POST /v3/...` on the client port) speaks the protobuf JSON mapping: keys and
values are base64, 64-bit integers come back as strings, and fields at their default value
(false, 0, empty) are left out of an answer. An error answer is a non-200 status whose body is
`{"error", "message", "code"}`, `code` being the gRPC status code.

The log (see the package's docstring): append `x` = a transaction creating `log/x` only if it is
absent (else reading it back), its index `create_revision - FIRST_REVISION`; a read of `[from,
to]` = a range over `log/` keeping the keys created at revisions `from + 2 .. to + 2`.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

TXN = "/v3/kv/txn"
RANGE = "/v3/kv/range"
STATUS = "/v3/maintenance/status"
MEMBERS = "/v3/cluster/member/list"
MOVE_LEADER = "/v3/maintenance/transfer-leadership"  # MoveLeader, in the gateway since 3.3; ask the leader

LOG_PREFIX = b"log/"
FIRST_REVISION = 2  # the empty store is at revision 1; its first write makes revision 2, index 0

# gRPC codes that leave a write's fate unknown: CANCELLED, UNKNOWN, DEADLINE_EXCEEDED, UNAVAILABLE
# (etcd's "request timed out", "leader changed", a connection lost inside the server). Every other
# code (FAILED_PRECONDITION, INVALID_ARGUMENT, RESOURCE_EXHAUSTED, ...) is a refusal before the
# write was proposed.
INDETERMINATE_CODES = frozenset({1, 2, 4, 14})

Json = dict[str, Any]


class GatewayError(Exception):
    """An error answer: `definite` when the request surely had no effect."""

    def __init__(self, message: str, definite: bool, code: int | None = None, status: int = 0) -> None:
        super().__init__(message)
        self.definite = definite
        self.code = code
        self.status = status


@dataclass(frozen=True)
class Status:
    """`/v3/maintenance/status` of one member (ids are etcd's member ids; 0: no leader known)."""

    member_id: int
    leader_id: int
    raft_term: int
    raft_index: int
    revision: int
    version: str
    is_learner: bool


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


def prefix_end(prefix: bytes) -> bytes:
    """The `range_end` that makes a range cover every key starting with `prefix`."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return b"\0"  # every key
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


def log_key(append_id: str) -> bytes:
    if not append_id or "\0" in append_id:
        raise ValueError(f"an append id must be a non-empty string without NUL bytes, not {append_id!r}")
    return LOG_PREFIX + append_id.encode()


def log_id(key: bytes) -> str:
    """The append id a log key holds."""
    return key[len(LOG_PREFIX):].decode(errors="replace")


def log_index(revision: int) -> int:
    return revision - FIRST_REVISION


def _int(obj: Json, *names: str) -> int:
    """The 64-bit integer field of the first of `names` present (a string in JSON), else 0."""
    return next((int(obj[name]) for name in names if name in obj), 0)


def append_request(append_id: str, value: bytes | None = None) -> Json:
    """The txn that creates `log/<id>` (value: `value`, default the id) only if it is absent,
    and otherwise reads it back: a retry finds the first try's key and changes nothing."""
    key = b64(log_key(append_id))
    payload = b64(value if value is not None else append_id.encode())
    return {
        "compare": [{"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}],
        "success": [{"request_put": {"key": key, "value": payload}}],
        "failure": [{"request_range": {"key": key, "keys_only": True}}],
    }


def parse_append(append_id: str, answer: Json) -> tuple[int, bool]:
    """The log index of an append from its txn's answer, and whether an earlier try had put it
    there: the txn's revision when it created the key, the key's create revision otherwise."""
    if answer.get("succeeded", False):
        return log_index(_int(answer["header"], "revision")), False
    responses = answer.get("responses") or [{}]
    kvs = (responses[0].get("response_range") or {}).get("kvs") or []
    if len(kvs) != 1 or unb64(kvs[0]["key"]) != log_key(append_id):
        raise GatewayError(f"the append's txn failed its compare, yet {append_id!r} is not there: {answer}",
                           definite=False)
    return log_index(_int(kvs[0], "create_revision")), True


def range_request(first: int | None = None, last: int | None = None, serializable: bool = False) -> Json:
    """The range reading log indexes `first..last` (inclusive; None: from the start, to the end),
    in index order; keys only, since a key holds its id. Linearizable unless `serializable`."""
    body: Json = {"key": b64(LOG_PREFIX), "range_end": b64(prefix_end(LOG_PREFIX)), "keys_only": True,
                  "sort_target": "CREATE", "sort_order": "ASCEND"}
    if first is not None and first > 0:
        body["min_create_revision"] = str(first + FIRST_REVISION)
    if last is not None:
        body["max_create_revision"] = str(last + FIRST_REVISION)
    if serializable:
        body["serializable"] = True
    return body


def parse_range(answer: Json) -> tuple[int, list[tuple[int, str]]]:
    """The answering member's revision as a log index (its last applied entry), and the
    `(log_index, id)` pairs of the range in index order."""
    kvs = answer.get("kvs") or []
    entries = [(log_index(_int(kv, "create_revision")), log_id(unb64(kv["key"]))) for kv in kvs]
    return log_index(_int(answer["header"], "revision")), sorted(entries)


def parse_status(answer: Json) -> Status:
    """Its answer: the header's fields are snake_case, StatusResponse's own camelCase (as in the proto)."""
    header = answer["header"]
    return Status(member_id=_int(header, "member_id"), leader_id=_int(answer, "leader"),
                  raft_term=_int(answer, "raftTerm", "raft_term"),
                  raft_index=_int(answer, "raftIndex", "raft_index"),
                  revision=_int(header, "revision"), version=str(answer.get("version", "")),
                  is_learner=bool(answer.get("isLearner", answer.get("is_learner", False))))


def parse_members(answer: Json) -> dict[int, str]:
    """Member id -> name (empty for a member added but not started yet)."""
    return {int(member["ID"]): str(member.get("name", "")) for member in answer.get("members") or []}


def move_leader_request(target_id: int) -> Json:
    return {"targetID": str(target_id)}


def error_from_answer(status: int, body: bytes) -> GatewayError:
    """The error of a non-200 answer: indeterminate for the codes in INDETERMINATE_CODES, and for a
    5xx whose body is not the gateway's (a proxy's), definite otherwise."""
    try:
        parsed = json.loads(body)
        code = int(parsed["code"])
        message = str(parsed.get("message") or parsed.get("error") or "")
    except (ValueError, KeyError, TypeError):
        text = body[:200].decode(errors="replace").strip()
        return GatewayError(f"HTTP {status}: {text}", definite=status < 500, status=status)
    return GatewayError(message or f"gRPC code {code}", definite=code not in INDETERMINATE_CODES, code=code,
                        status=status)
