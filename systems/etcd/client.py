"""The log workload's client for etcd 3.4, over its JSON gateway, stdlib only (`http.client`).

    client = EtcdClient({"n1": "127.0.0.1:32770", "n2": ..., "n3": ...}, timeout=5.0)
    ack = client.append("p3-41")            # AppendOk: history ok value {"id": "p3-41", "log_index": 907}
    read = client.read(900, 910)            # ReadOk: {"from", "to", "commit_index", "entries"}
    mine = client.read_all("n2")            # n2's own log (serializable), for the final reads

Each call is one HTTP request on a fresh connection to one member (any member serves: etcd
forwards writes to its leader); with no member named, the members are tried in turn while none
can be reached, starting with the last that answered. Outcomes are Jepsen's, as the harness's
workers expect them (`nodes.client`'s exceptions):

* `DefiniteFailure` (history `fail`): nothing was sent (the member could not be reached), or a
  definite error answer (a gRPC code other than those in `gateway.INDETERMINATE_CODES`);
* `IndeterminateFailure` (`info`): a timeout or a connection lost after the request was sent,
  or an answer that leaves the fate open (etcd's "request timed out", "leader changed").

An append is idempotent (see `gateway.append_request`): retrying an `info` append with the same
id answers the first try's index with `duplicate` set, and never makes a second entry.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from nodes.client import DefiniteFailure, IndeterminateFailure
from systems.etcd import gateway
from systems.etcd.gateway import Json, Status

DEFAULT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class AppendOk:
    """An acknowledged append; `duplicate`: an earlier try of the same id had put it there."""

    append_id: str
    log_index: int
    duplicate: bool
    node: str

    def history_value(self) -> dict[str, Any]:
        return {"id": self.append_id, "log_index": self.log_index}


@dataclass(frozen=True)
class ReadOk:
    """The entries of indexes `first..last`: `last` is cut at the member's `commit_index` (its store
    revision as an index), and is `first - 1` when the member had nothing from `first` on."""

    first: int
    last: int
    commit_index: int
    entries: list[tuple[int, str]]
    node: str

    def history_value(self) -> dict[str, Any]:
        return {"from": self.first, "to": self.last, "commit_index": self.commit_index,
                "entries": [[index, append_id] for index, append_id in self.entries]}


class EtcdClient:
    """Calls to the members of one etcd cluster; not thread-safe (give each worker its own)."""

    def __init__(self, endpoints: Mapping[str, str], timeout: float = DEFAULT_TIMEOUT_S) -> None:
        if not endpoints:
            raise ValueError("an etcd client needs at least one member's endpoint")
        self.endpoints = dict(endpoints)  # member name -> "host:port" of its client port
        self.timeout = timeout
        self._preferred = next(iter(self.endpoints))
        self._names: dict[int, str] = {}

    def call(self, path: str, body: Json, node: str | None = None, timeout: float | None = None
             ) -> tuple[str, Json]:
        """POST `body` to `path` of `node` (None: the first member that can be reached); the member
        that answered and its answer."""
        unreachable = []
        for name in [node] if node is not None else self._order():
            try:
                answer = post(self.endpoints[name], path, body, timeout or self.timeout)
            except Unreachable as e:
                unreachable.append(f"{name}: {e}")
                continue
            except gateway.GatewayError as e:
                kind = DefiniteFailure if e.definite else IndeterminateFailure
                raise kind(f"{name}: {e}") from None
            self._preferred = name
            return name, answer
        raise DefiniteFailure("no member could be reached: " + "; ".join(unreachable))

    def _order(self) -> Iterator[str]:
        yield self._preferred
        yield from (name for name in self.endpoints if name != self._preferred)

    def append(self, append_id: str, node: str | None = None, value: bytes | None = None) -> AppendOk:
        name, answer = self.call(gateway.TXN, gateway.append_request(append_id, value), node)
        try:
            log_index, duplicate = gateway.parse_append(append_id, answer)
        except gateway.GatewayError as e:
            raise IndeterminateFailure(f"{name}: {e}") from None
        return AppendOk(append_id, log_index, duplicate, name)

    def read(self, first: int | None = None, last: int | None = None, node: str | None = None,
             serializable: bool = False) -> ReadOk:
        """Indexes `first..last` (None: from 0, to the end); linearizable unless `serializable`, which
        answers from the asked member's own state."""
        name, answer = self.call(gateway.RANGE, gateway.range_request(first, last, serializable), node)
        commit_index, entries = gateway.parse_range(answer)
        start = first or 0
        end = max(start - 1, commit_index if last is None else min(last, commit_index))
        return ReadOk(start, end, commit_index, entries, name)

    def read_all(self, node: str) -> list[tuple[int, str]]:
        """`node`'s whole log as it holds it (a serializable range on that member alone): a final read."""
        return self.read(node=node, serializable=True).entries

    def status(self, node: str) -> Status:
        return gateway.parse_status(self.call(gateway.STATUS, {}, node)[1])

    def member_names(self) -> dict[int, str]:
        """etcd's member id -> member name, asked once of any member."""
        if not self._names:
            self._names = gateway.parse_members(self.call(gateway.MEMBERS, {})[1])
        return self._names

    def leader(self) -> str | None:
        """The leader of the highest term any reachable member reports, or None. Every member is
        asked at once: paused ones cost one timeout in all, not one each (a churn fault under a
        paused minority waited 8-11 s a move that way)."""
        with ThreadPoolExecutor(len(self.endpoints), thread_name_prefix="etcd-status") as pool:
            answers = list(pool.map(self._status_or_none, self.endpoints))
        best = max((s for s in answers if s is not None and s.leader_id), key=lambda s: s.raft_term,
                   default=None)
        return self.member_names().get(best.leader_id) if best is not None else None

    def _status_or_none(self, node: str) -> Status | None:
        try:
            return self.status(node)
        except (DefiniteFailure, IndeterminateFailure):
            return None

    def move_leader(self, target: str) -> str:
        """Ask the leader to hand its leadership to `target` (etcd's MoveLeader, which answers once the
        transfer is done); the leader it was asked of."""
        leader = self.leader()
        if leader is None:
            raise DefiniteFailure("no member knows a leader")
        ids = {name: member_id for member_id, name in self.member_names().items()}
        if target not in ids:
            raise ValueError(f"{target!r} is not a member: {sorted(ids)}")
        if leader != target:
            self.call(gateway.MOVE_LEADER, gateway.move_leader_request(ids[target]), leader)
        return leader

    def close(self) -> None:
        """Nothing to close: every call has its own connection."""


class Unreachable(Exception):
    """The connection could not be made: nothing was sent."""


def post(endpoint: str, path: str, body: Json, timeout: float) -> Json:
    """One POST to `endpoint` ("host:port"): the parsed answer of a 200; `Unreachable` when the
    connection could not be made, `IndeterminateFailure` when it broke or timed out after the
    request went out, `gateway.GatewayError` for an error answer."""
    host, _, port = endpoint.rpartition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        try:
            connection.connect()
        except OSError as e:
            raise Unreachable(str(e) or type(e).__name__) from None
        try:
            connection.request("POST", path, json.dumps(body).encode(), {"Content-Type": "application/json"})
            response = connection.getresponse()
            raw = response.read()
        except TimeoutError:
            raise IndeterminateFailure(f"timeout after {timeout} s") from None
        except (OSError, http.client.HTTPException) as e:
            raise IndeterminateFailure(f"connection lost: {e!r}") from None
    finally:
        connection.close()
    if response.status != 200:
        raise gateway.error_from_answer(response.status, raw)
    try:
        answer = json.loads(raw)
    except ValueError:
        raise IndeterminateFailure(f"an answer that is not JSON: {raw[:200]!r}") from None
    if not isinstance(answer, dict):
        raise IndeterminateFailure(f"an answer that is not a JSON object: {raw[:200]!r}")
    return answer
