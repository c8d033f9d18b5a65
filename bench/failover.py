"""Failover time: kill -9 the leader under steady append load, many times, per timing profile.

For each timing profile it starts 3 nodes on loopback, keeps `--clients` threads appending
one entry at a time, and `--kills` times: waits until appends flow, SIGKILLs the leader,
and measures the time from the kill to the first append acknowledged by another node (the
new leader); then restarts the killed node and waits until all three agree on a leader.
Each kill is broken down from the survivors' events.jsonl: when the first of them stood as
candidate, when one was elected, and how many leaders were elected on the way (more than one:
a vote round split or failed). Before the kills, `--quiet` seconds of the same load with no
fault count the elections nobody caused (spurious ones, e.g. a heartbeat late under load).
Reports p50 and max per profile in `bench/results/failover.json`.

    .venv/bin/python bench/failover.py [--kills 20] [--profiles default,dledger] [--quiet 60]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from resultfile import write_results

from nodes.client import ClientError
from nodes.payload import encode_payload
from tests.support.localcluster import LocalCluster

RESULTS = Path(__file__).resolve().parent / "results" / "failover.json"
CLIENT_TIMEOUT_S = {"default": 0.5, "dledger": 3.0}


class Load:
    """Client threads appending in a loop; remembers (ack time, acknowledging node)."""

    def __init__(self, cluster: LocalCluster, clients: int, timeout: float) -> None:
        self.acks: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(cluster, c, timeout), daemon=True)
                         for c in range(clients)]
        for t in self._threads:
            t.start()

    def _run(self, cluster: LocalCluster, worker: int, timeout: float) -> None:
        with cluster.client(timeout=timeout) as client:
            i = 0
            while not self._stop.is_set():
                i += 1
                try:
                    ack = client.append(encode_payload(f"f{worker}-{i}", 100))
                except ClientError:
                    continue
                with self._lock:
                    self.acks.append((time.monotonic(), ack.node))

    def first_ack_after(self, since: float, not_from: str) -> float | None:
        with self._lock:
            return min((t for t, node in self.acks if t > since and node != not_from), default=None)

    def acks_from(self, node: str, since: float) -> int:
        with self._lock:
            return sum(1 for t, n in self.acks if t > since and n == node)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `predicate` every 10 ms (bounded by `timeout`)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def role_events(cluster: LocalCluster, nodes: list[str], since_ns: int) -> list[dict]:
    """The role lines `nodes` wrote after `since_ns` (the machine's wall clock), in time order."""
    lines = []
    for node in nodes:
        path = cluster.data_dir(node) / "events.jsonl"
        for text in path.read_text().splitlines() if path.exists() else []:
            event = json.loads(text)
            if event.get("event") == "role" and event["real_ns"] > since_ns:
                lines.append(event)
    return sorted(lines, key=lambda e: e["real_ns"])


def breakdown(cluster: LocalCluster, leader: str, killed_ns: int, acked_ns: int) -> dict:
    """When the survivors of `leader`'s kill first stood and were elected, and how many
    elections it took, from their role lines between the kill and the first new ack."""
    roles = [e for e in role_events(cluster, [n for n in cluster.ids if n != leader], killed_ns)
             if e["real_ns"] <= acked_ns]

    def first_ms(role: str) -> int | None:
        return next((round((e["real_ns"] - killed_ns) / 1e6) for e in roles if e["role"] == role), None)

    return {"candidate_ms": first_ms("candidate"), "elected_ms": first_ms("leader"),
            "elections": sum(1 for e in roles if e["role"] == "leader")}


def quiet_elections(cluster: LocalCluster, load: Load, seconds: float) -> int:
    """Elections while the load runs `seconds` with no fault (a settled leader leads throughout)."""
    since = time.time_ns()
    wait_for(lambda: time.time_ns() - since >= seconds * 1e9, seconds + 5, "the quiet period")
    return sum(1 for e in role_events(cluster, cluster.ids, since) if e["role"] == "leader")


def measure(profile: str, kills: int, clients: int, quiet: float) -> dict:
    samples: list[float] = []
    parts: list[dict] = []
    with tempfile.TemporaryDirectory(prefix=f"bench-failover-{profile}-") as tmp, \
            LocalCluster(Path(tmp), 3, extra_args=["--timing", profile, "--segment-mb", "64"]) as cluster:
        cluster.start_all()
        settle = 30.0 if profile == "dledger" else 10.0
        cluster.wait_for_leader(timeout=settle)
        load = Load(cluster, clients, CLIENT_TIMEOUT_S[profile])
        try:
            spurious = quiet_elections(cluster, load, quiet) if quiet else None
            for k in range(kills):
                leader = cluster.wait_for_leader(timeout=settle)
                mark = time.monotonic()

                def acked(leader: str = leader, mark: float = mark) -> bool:
                    return load.acks_from(leader, mark) >= 20

                wait_for(acked, settle, f"appends acknowledged by {leader}")
                killed_at, killed_ns = time.monotonic(), time.time_ns()
                cluster.kill(leader)

                def taken_over(leader: str = leader, at: float = killed_at) -> bool:
                    return load.first_ack_after(at, leader) is not None

                wait_for(taken_over, settle, "an append acknowledged by a new leader")
                first = load.first_ack_after(killed_at, leader)
                assert first is not None
                samples.append(first - killed_at)
                parts.append(breakdown(cluster, leader, killed_ns, killed_ns + round(samples[-1] * 1e9)))
                print(f"  {profile} kill {k + 1}/{kills}: {leader} killed, first new ack after "
                      f"{samples[-1] * 1000:.0f} ms {parts[-1]}", flush=True)
                cluster.start(leader)
                cluster.wait_for_leader(timeout=settle)
        finally:
            load.stop()
    stood = [p["candidate_ms"] for p in parts if p["candidate_ms"] is not None]
    elected = [p["elected_ms"] for p in parts if p["elected_ms"] is not None]
    return {"kills": len(samples), "p50_ms": round(1000 * statistics.median(samples)),
            "max_ms": round(1000 * max(samples)), "samples_ms": [round(1000 * s) for s in samples],
            "candidate_p50_ms": statistics.median(stood) if stood else None,
            "elected_p50_ms": statistics.median(elected) if elected else None,
            "kills_needing_more_than_one_election": sum(1 for p in parts if p["elections"] > 1),
            "quiet_seconds": quiet, "quiet_elections": spurious, "breakdown": parts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20, help="leader kills per profile (default 20)")
    parser.add_argument("--clients", type=int, default=4, help="appending client threads (default 4)")
    parser.add_argument("--profiles", default="default,dledger", help="timing profiles to measure")
    parser.add_argument("--quiet", type=float, default=60.0,
                        help="seconds of load with no fault before the kills, counting elections "
                             "(default 60)")
    args = parser.parse_args()
    results: dict = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
                     "machine": {"cpus": os.cpu_count(), "load_average_at_start": os.getloadavg()[0]},
                     "setup": {"nodes": 3, "clients": args.clients, "entry_bytes": 100}, "profiles": {}}
    for profile in args.profiles.split(","):
        result = measure(profile, args.kills, args.clients, args.quiet)
        results["profiles"][profile] = result
        print(f"{profile}: p50 {result['p50_ms']} ms, max {result['max_ms']} ms over {result['kills']} kills "
              f"(first candidate p50 {result['candidate_p50_ms']} ms, "
              f"elected p50 {result['elected_p50_ms']} ms, "
              f"{result['kills_needing_more_than_one_election']} needed more than one election; "
              f"{result['quiet_elections']} elections in {args.quiet:g} s without faults)", flush=True)
    write_results(RESULTS, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
