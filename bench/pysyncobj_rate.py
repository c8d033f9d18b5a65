"""PySyncObj's own benchmark method, shortened: find the highest sustained replicated-call rate.

PySyncObj's `benchmarks/benchmarks.py` starts one `testobj.py` process per node; each calls
a `@replicated` method at its share of a target rate for a while, and the rate counts as
sustained when at least 90 % of the calls succeed; a binary search finds the highest one.
We run the same shape with shorter trials (the original runs 25 s per trial, 5 searches).

Run as a script, this file is one such node process (see `trial`).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass

SUCCESS_NEEDED = 0.9


@dataclass(frozen=True)
class Trial:
    rate: int
    success_rate: float
    p50_ms: float
    p99_ms: float


def _node_process(rate: int, size: int, seconds: float, me: str, partners: list[str]) -> None:
    """One PySyncObj node that calls a replicated method `rate` times a second; prints a JSON summary."""
    from pysyncobj import FAIL_REASON, SyncObj, replicated

    class TestObj(SyncObj):
        def __init__(self) -> None:
            super().__init__(me, partners)
            self.applied = 0

        @replicated
        def test_method(self, value: str) -> None:
            self.applied += 1

    obj = TestObj()
    sent = success = 0
    latencies: list[float] = []

    def done(_result: object, err: int, started: float) -> None:
        nonlocal success
        if err == FAIL_REASON.SUCCESS:
            success += 1
            latencies.append(time.monotonic() - started)

    deadline = time.monotonic() + 20
    while obj._getLeader() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # as testobj.py: let the cluster settle after the election
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        second = time.monotonic()
        for _ in range(rate):
            t = time.monotonic()
            obj.test_method(f"{random.randrange(16 ** size):0{size}x}",
                            callback=lambda r, e, t=t: done(r, e, t))
            sent += 1
        spent = time.monotonic() - second
        if spent < 1.0:
            time.sleep(1.0 - spent)
    time.sleep(2.0)  # as testobj.py: let the last callbacks come in
    latencies.sort()
    print(json.dumps({"sent": sent, "success": success,
                      "p50_ms": 1000 * latencies[len(latencies) // 2] if latencies else None,
                      "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)] if latencies else None}))
    sys.stdout.flush()
    os._exit(0)  # PySyncObj's threads do not stop on their own


def trial(rate: int, size: int, seconds: float, base_port: int, nodes: int = 3) -> Trial:
    """Run `nodes` PySyncObj processes at `rate` calls/s in total for `seconds`."""
    addrs = [f"127.0.0.1:{base_port + i}" for i in range(nodes)]
    procs = []
    for i, me in enumerate(addrs):
        partners = addrs[:i] + addrs[i + 1:]
        procs.append(subprocess.Popen(
            [sys.executable, __file__, str(rate // nodes), str(size), str(seconds), me, *partners],
            stdout=subprocess.PIPE, text=True))
    reports = []
    for p in procs:
        out, _ = p.communicate(timeout=seconds + 60)
        reports.append(json.loads(out.strip().splitlines()[-1]))
    sent = sum(r["sent"] for r in reports)
    success = sum(r["success"] for r in reports)
    p50s = [r["p50_ms"] for r in reports if r["p50_ms"] is not None]
    p99s = [r["p99_ms"] for r in reports if r["p99_ms"] is not None]
    return Trial(rate, success / sent if sent else 0.0,
                 sorted(p50s)[len(p50s) // 2] if p50s else float("nan"), max(p99s, default=float("nan")))


def max_sustained_rate(size: int, seconds: float, low: int, high: int, steps: int,
                       base_port: int) -> tuple[Trial | None, list[Trial]]:
    """Binary search for the highest rate with >= 90 % success; (best trial, all trials)."""
    best: Trial | None = None
    trials: list[Trial] = []
    for step in range(steps):
        rate = (low + high) // 2
        result = trial(rate, size, seconds, base_port + 10 * step)
        trials.append(result)
        print(f"  pysyncobj {rate} calls/s: success {result.success_rate:.1%}, "
              f"p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms", flush=True)
        if result.success_rate >= SUCCESS_NEEDED:
            best, low = result, rate
        else:
            high = rate
    return best, trials


if __name__ == "__main__":
    _node_process(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5:])
