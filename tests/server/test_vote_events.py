"""The node's `vote` and `start` lines in events.jsonl, and the forgotten-vote check they feed:
a node restarts with at least the term and vote it saved or granted before it died."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.reference import LeaderLine, event_claims
from nodes.clock import NodeClock
from nodes.events import EVENTS_FILE, EventLog
from nodes.store.termfile import TermState, load_term, save_term
from tests.support.localcluster import LocalCluster
from tests.support.waiting import wait_until


def lines(path: Path, kind: str) -> list[dict]:
    if not path.is_file():
        return []
    return [line for line in map(json.loads, path.read_text().splitlines()) if line["event"] == kind]


def test_vote_lines_skip_repeats_and_start_lines_say_what_was_recovered(tmp_path):
    events = EventLog(tmp_path, "n1", NodeClock(tmp_path))
    events.start(3, "n2", fresh=False)
    events.vote(4, None)
    events.vote(4, "n3")
    events.vote(4, "n3")
    events.close()
    path = tmp_path / EVENTS_FILE
    assert [(v["term"], v["candidate"]) for v in lines(path, "vote")] == [(4, None), (4, "n3")]
    [start] = lines(path, "start")
    assert (start["term"], start["vote"], start["fresh"]) == (3, "n2", False)


def _restart(cluster: LocalCluster, node: str, log: Path) -> tuple[dict, dict]:
    """Kill `node` and start it again: (its last vote line before, the start line after)."""
    starts = len(lines(log, "start"))
    cluster.kill(node)
    saved = lines(log, "vote")[-1]
    cluster.start(node)
    wait_until(lambda: len(lines(log, "start")) > starts, 20, f"{node} started again")
    return saved, lines(log, "start")[-1]


@pytest.mark.cluster
def test_a_restarted_node_recovers_its_vote_and_one_that_lost_it_is_flagged(local_cluster):
    cluster: LocalCluster = local_cluster(3)
    logs = {node: cluster.data_dir(node) / EVENTS_FILE for node in cluster.ids}
    leader = cluster.wait_for_leader()
    follower = next(n for n in cluster.ids if n != leader)
    wait_until(lambda: lines(logs[follower], "vote"), 10, f"{follower} saved a term")
    assert [s["fresh"] for s in lines(logs[follower], "start")] == [True], "a new node starts with nothing"

    saved, start = _restart(cluster, follower, logs[follower])
    assert (start["term"], start["vote"], start["fresh"]) == (saved["term"], saved["candidate"], False)
    assert event_claims(list(logs.values())).forgotten_votes == 0

    # What a term file that lost its last write leaves (renamed without an fsync, power lost).
    cluster.kill(follower)
    data = cluster.data_dir(follower)
    term = load_term(data).term
    save_term(data, TermState(term - 1, None))
    _, start = _restart(cluster, follower, logs[follower])
    assert start["term"] == term - 1
    assert event_claims(list(logs.values())).forgotten_votes == 1


@pytest.mark.cluster
def test_a_new_leader_logs_where_its_log_ended_and_holds_what_was_committed(local_cluster):
    cluster: LocalCluster = local_cluster(3)
    logs = {node: cluster.data_dir(node) / EVENTS_FILE for node in cluster.ids}
    cluster.wait_for_leader()
    with cluster.client(timeout=5) as client:
        acks = [client.append(f"e{i}".encode()) for i in range(20)]
    last = acks[-1]
    cluster.kill(last.node)  # the leader that committed it, or a follower if leadership moved since
    cluster.wait_for_leader(among=[n for n in cluster.ids if n != last.node])
    # every leader of a later term took office with a log that reached the last index committed
    later = [line for path in logs.values() for line in lines(path, "role")
             if line["role"] == "leader" and line["term"] > last.term]
    assert later and all(line["end_index"] >= last.last_index for line in later), later
    claims = event_claims(list(logs.values()))
    assert max(claims.committed.values()) >= last.last_index and claims.leader_completeness == 0
    # a leader line whose log ended below what an earlier term committed is what the check finds
    claims.leader_lines.append(LeaderLine(later[0]["node"], later[0]["term"], 0, last.last_index - 1))
    assert claims.leader_completeness == 1
