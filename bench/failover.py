"""Failover time: kill -9 the leader under steady append load, many times, per timing profile.

For each timing profile it starts 3 nodes on loopback, keeps `--clients` threads appending
one entry at a time, and `--kills` times: waits until appends flow, SIGKILLs the leader,
and measures the time from the kill to the first append acknowledged by another node (the
new leader); then restarts the killed node and waits until all three agree on a leader.
Reports p50 and max per profile in `bench/results/failover.json`.

    .venv/bin/python bench/failover.py [--kills 20] [--profiles default,dledger]
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


def measure(profile: str, kills: int, clients: int) -> dict:
    samples: list[float] = []
    with tempfile.TemporaryDirectory(prefix=f"bench-failover-{profile}-") as tmp, \
            LocalCluster(Path(tmp), 3, extra_args=["--timing", profile, "--segment-mb", "64"]) as cluster:
        cluster.start_all()
        settle = 30.0 if profile == "dledger" else 10.0
        cluster.wait_for_leader(timeout=settle)
        load = Load(cluster, clients, CLIENT_TIMEOUT_S[profile])
        try:
            for k in range(kills):
                leader = cluster.wait_for_leader(timeout=settle)
                mark = time.monotonic()

                def acked(leader: str = leader, mark: float = mark) -> bool:
                    return load.acks_from(leader, mark) >= 20

                wait_for(acked, settle, f"appends acknowledged by {leader}")
                killed_at = time.monotonic()
                cluster.kill(leader)

                def taken_over(leader: str = leader, at: float = killed_at) -> bool:
                    return load.first_ack_after(at, leader) is not None

                wait_for(taken_over, settle, "an append acknowledged by a new leader")
                first = load.first_ack_after(killed_at, leader)
                assert first is not None
                samples.append(first - killed_at)
                print(f"  {profile} kill {k + 1}/{kills}: {leader} killed, first new ack after "
                      f"{samples[-1] * 1000:.0f} ms", flush=True)
                cluster.start(leader)
                cluster.wait_for_leader(timeout=settle)
        finally:
            load.stop()
    return {"kills": len(samples), "p50_ms": round(1000 * statistics.median(samples)),
            "max_ms": round(1000 * max(samples)), "samples_ms": [round(1000 * s) for s in samples]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20, help="leader kills per profile (default 20)")
    parser.add_argument("--clients", type=int, default=4, help="appending client threads (default 4)")
    parser.add_argument("--profiles", default="default,dledger", help="timing profiles to measure")
    args = parser.parse_args()
    results: dict = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
                     "machine": {"cpus": os.cpu_count(), "load_average_at_start": os.getloadavg()[0]},
                     "setup": {"nodes": 3, "clients": args.clients, "entry_bytes": 100}, "profiles": {}}
    for profile in args.profiles.split(","):
        result = measure(profile, args.kills, args.clients)
        results["profiles"][profile] = result
        print(f"{profile}: p50 {result['p50_ms']} ms, max {result['max_ms']} ms over {result['kills']} kills",
              flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
