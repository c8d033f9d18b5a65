"""Benchmark the mmap store: appends/s and MB/s by body size and flush policy.

Single process. Scenarios: one thread appending in batches of 1000 (`append_many`), one
thread appending one entry per call, and 64 threads each appending one entry per call.
`async` is DLedger's policy (the store's background thread flushes every 10 ms); `sync`
makes each call durable before the next (`store.flush()` after it; flushes are serialised,
so concurrent threads wait for each other's fsyncs; the node's own group commit, which
batches a whole event-loop turn into one flush, lives in `nodes.driver`). Prints a table
and writes bench/results/store.json.

    make bench-store        # or: .venv/bin/python bench/store.py [--quick]
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from resultfile import write_results

from nodes.store.mmapstore import MmapStore

RESULTS = Path(__file__).resolve().parent / "results" / "store.json"
THREADS = 64
BATCH = 1000


def batched(store: MmapStore, body: bytes, count: int, durable: Callable[[], object]) -> None:
    bodies = [body] * BATCH
    for _ in range(count // BATCH):
        store.append_many(1, bodies)
        durable()


def single(store: MmapStore, body: bytes, count: int, durable: Callable[[], object]) -> None:
    for _ in range(count):
        store.append_leader(1, body)
        durable()


def threaded(store: MmapStore, body: bytes, count: int, durable: Callable[[], object]) -> None:
    per_thread = count // THREADS
    start = threading.Barrier(THREADS)

    def work() -> None:
        start.wait()
        for _ in range(per_thread):
            store.append_leader(1, body)
            durable()

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


SCENARIOS: dict[str, Callable[[MmapStore, bytes, int, Callable[[], object]], None]] = {
    "batch1000": batched, "single": single, f"threads{THREADS}": threaded}


def measure(flush: str, scenario: str, body_size: int, count: int, root: Path) -> dict[str, str | float]:
    directory = Path(tempfile.mkdtemp(dir=root))
    sync = flush == "sync"
    store = MmapStore(directory, flush_interval_ms=None if sync else 10)  # DLedger's segment sizes
    body = b"x" * body_size
    began = time.perf_counter()
    SCENARIOS[scenario](store, body, count, store.flush if sync else lambda: None)
    elapsed = time.perf_counter() - began
    appended = store.end_index + 1
    store.close()
    shutil.rmtree(directory)
    return {"flush": flush, "scenario": scenario, "body_bytes": body_size, "appends": appended,
            "seconds": round(elapsed, 3), "appends_per_s": round(appended / elapsed),
            "mb_per_s": round(appended * body_size / elapsed / 1e6, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the appends")
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0
    plan = [  # (flush, scenario, body size, appends)
        ("async", "batch1000", 100, 1_000_000), ("async", "single", 100, 300_000),
        ("async", "threads64", 100, 192_000), ("async", "batch1000", 4096, 100_000),
        ("async", "single", 4096, 50_000), ("async", "threads64", 4096, 64_000),
        ("sync", "batch1000", 100, 300_000), ("sync", "single", 100, 2_000),
        ("sync", "threads64", 100, 64_000), ("sync", "batch1000", 4096, 50_000),
        ("sync", "single", 4096, 2_000), ("sync", "threads64", 4096, 32_000),
    ]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        print(f"{'flush':6} {'scenario':10} {'body':>6} {'appends':>9} {'appends/s':>10} {'MB/s':>7}")
        for flush, scenario, size, count in plan:
            row = measure(flush, scenario, size, max(int(count * scale) // 64 * 64, BATCH),
                          Path(tmp))
            rows.append(row)
            print(f"{flush:6} {scenario:10} {size:>6} {row['appends']:>9} {row['appends_per_s']:>10} "
                  f"{row['mb_per_s']:>7}", flush=True)

    def rate(flush: str, scenario: str, size: int) -> int:
        return next(int(r["appends_per_s"]) for r in rows
                    if (r["flush"], r["scenario"], r["body_bytes"]) == (flush, scenario, size))

    targets = {
        "async_100B_batch_appends_per_s": rate("async", "batch1000", 100),
        "async_100B_batch_target": 150_000,
        "sync_vs_async_64_threads_100B": round(rate("async", "threads64", 100)
                                               / rate("sync", "threads64", 100), 2),
        "sync_vs_async_64_threads_4KiB": round(rate("async", "threads64", 4096)
                                               / rate("sync", "threads64", 4096), 2),
        "sync_vs_async_target": 5.0,
    }
    print(f"async 100-byte batched: {targets['async_100B_batch_appends_per_s']} appends/s "
          f"(target >= 150000); async/sync with {THREADS} appenders: "
          f"{targets['sync_vs_async_64_threads_100B']}x for 100 B, "
          f"{targets['sync_vs_async_64_threads_4KiB']}x for 4 KiB (target <= 5x)")
    write_results(RESULTS, {
        "command": "make bench-store", "quick": args.quick, "python": platform.python_version(),
        "machine": f"{platform.machine()}, {len(__import__('os').sched_getaffinity(0))} cpus",
        "results": rows, "targets": targets})
    return 0


if __name__ == "__main__":
    sys.exit(main())
