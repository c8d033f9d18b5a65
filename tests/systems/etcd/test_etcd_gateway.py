"""etcd's JSON gateway for the log workload (systems/etcd/gateway.py): request bodies, and the
parsing of answers as etcd 3.4.23 gave them (canned from a real cluster), pure."""

from __future__ import annotations

import json

import pytest

from systems.etcd import gateway
from systems.etcd.gateway import b64, unb64

HEADER = {"cluster_id": "2204168370280348374", "member_id": "712155601141792849", "raft_term": "2"}
CREATED = {"header": {**HEADER, "revision": "2"}, "succeeded": True,
           "responses": [{"response_put": {"header": {"revision": "2"}}}]}
FOUND = {"header": {**HEADER, "revision": "9"}, "responses": [{"response_range": {
    "header": {"revision": "9"}, "count": "1",
    "kvs": [{"key": "bG9nL2E=", "create_revision": "2", "mod_revision": "2", "version": "1"}]}}]}
STATUS = {"header": {**HEADER, "member_id": "15953881906224234421", "revision": "1"}, "version": "3.4.23",
          "dbSize": "20480", "leader": "15953881906224234421", "raftIndex": "8", "raftTerm": "2",
          "raftAppliedIndex": "8", "dbSizeInUse": "16384"}
MEMBERS = {"header": HEADER, "members": [
    {"ID": "712155601141792849", "name": "n2", "peerURLs": ["http://dlc-r-n2:2380"], "clientURLs": []},
    {"ID": "15953881906224234421", "name": "n1", "peerURLs": ["http://dlc-r-n1:2380"]}]}


def test_an_append_creates_its_key_only_if_absent_and_otherwise_reads_it_back() -> None:
    body = gateway.append_request("p3-41")
    key = b64(b"log/p3-41")
    assert body["compare"] == [{"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}]
    assert body["success"] == [{"request_put": {"key": key, "value": b64(b"p3-41")}}]
    assert body["failure"] == [{"request_range": {"key": key, "keys_only": True}}]
    padded = gateway.append_request("p1-1", b"p1-1\0xxx")["success"][0]["request_put"]["value"]
    assert unb64(padded) == b"p1-1\0xxx"
    json.dumps(body)  # the body is JSON as it is


@pytest.mark.parametrize("bad", ["", "a\0b"])
def test_an_append_id_must_make_a_key(bad: str) -> None:
    with pytest.raises(ValueError):
        gateway.append_request(bad)


def test_a_created_key_lands_at_its_revision_less_two_and_a_found_one_at_its_create_revision() -> None:
    assert gateway.parse_append("a", CREATED) == (0, False)
    assert gateway.parse_append("a", FOUND) == (0, True)


def test_a_failed_compare_without_the_key_is_not_an_answer() -> None:
    empty = {"header": {"revision": "9"}, "responses": [{"response_range": {"header": {"revision": "9"}}}]}
    for answer in (empty, {"header": {"revision": "9"}}, FOUND):
        with pytest.raises(gateway.GatewayError) as caught:
            gateway.parse_append("b", answer)
        assert not caught.value.definite


def test_a_read_ranges_over_the_prefix_between_create_revisions() -> None:
    body = gateway.range_request(5, 9)
    assert unb64(body["key"]) == b"log/" and unb64(body["range_end"]) == b"log0"
    assert (body["min_create_revision"], body["max_create_revision"]) == ("7", "11")
    assert (body["sort_target"], body["sort_order"], body["keys_only"]) == ("CREATE", "ASCEND", True)
    assert "serializable" not in body  # linearizable, etcd's default
    whole = gateway.range_request(serializable=True)
    assert whole["serializable"] is True
    assert "min_create_revision" not in whole and "max_create_revision" not in whole


def test_a_range_answer_gives_index_ordered_pairs_and_the_members_revision() -> None:
    kvs = [{"key": b64(b"log/p2-1"), "create_revision": "4"},
           {"key": b64(b"log/p1-1"), "create_revision": "3"}]
    assert gateway.parse_range({"header": {**HEADER, "revision": "4"}, "kvs": kvs, "count": "2"}) == (
        2, [(1, "p1-1"), (2, "p2-1")])
    assert gateway.parse_range({"header": {**HEADER, "revision": "1"}}) == (-1, [])  # empty: no kvs field


@pytest.mark.parametrize(("prefix", "end"), [(b"log/", b"log0"), (b"a\xff", b"b"), (b"\xff", b"\0")])
def test_prefix_end(prefix: bytes, end: bytes) -> None:
    assert gateway.prefix_end(prefix) == end


def test_status_and_members() -> None:
    status = gateway.parse_status(STATUS)
    assert status.member_id == status.leader_id == 15953881906224234421
    assert (status.raft_term, status.raft_index, status.revision, status.version) == (2, 8, 1, "3.4.23")
    assert not status.is_learner
    assert gateway.parse_status({"header": HEADER}).leader_id == 0  # no leader: the field is left out
    assert gateway.parse_members(MEMBERS) == {712155601141792849: "n2", 15953881906224234421: "n1"}
    assert gateway.move_leader_request(712155601141792849) == {"targetID": "712155601141792849"}


@pytest.mark.parametrize(("status", "body", "definite"), [
    (412, b'{"error":"etcdserver: not leader","message":"etcdserver: not leader","code":9}', True),
    (400, b'{"error":"illegal base64 data","message":"illegal base64 data","code":3}', True),
    (429, b'{"error":"etcdserver: too many requests","code":8}', True),
    (503, b'{"error":"etcdserver: request timed out","message":"etcdserver: request timed out","code":14}',
     False),
    (503, b'{"error":"etcdserver: leader changed","message":"etcdserver: leader changed","code":14}', False),
    (504, b'{"error":"context deadline exceeded","code":4}', False),
    (502, b"<html>bad gateway</html>", False),
    (404, b"404 page not found", True),
])
def test_error_answers_are_definite_or_not_by_their_grpc_code(status: int, body: bytes, definite: bool
                                                              ) -> None:
    error = gateway.error_from_answer(status, body)
    assert error.definite is definite
    assert error.status == status
    if body.startswith(b"{"):
        assert "etcdserver" in str(error) or "deadline" in str(error) or "base64" in str(error)
