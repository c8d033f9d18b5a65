"""Node throughput: 3 DLedger nodes on loopback under pipelined appends, against PySyncObj.

For each flush policy (`async`, `sync`) it starts 3 `python -m nodes serve` processes,
finds the leader and has `--connections` client connections each keep `--window`
single-entry appends (100-byte bodies) in flight for `--seconds`; it reports appends/s and
the p50/p99 latency of an append. In the same run it measures PySyncObj with its own
benchmark method (`bench/pysyncobj_rate.py`), and writes everything to
`bench/results/node.json`.

    .venv/bin/python bench/node.py [--seconds 10] [--connections 8] [--window 64]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pysyncobj_rate import max_sustained_rate
from resultfile import write_results

from nodes.clientapi import AppendRequest
from nodes.messages import ResponseCode
from nodes.payload import encode_payload
from nodes.protocol import wire_codec
from nodes.serve import GC_THRESHOLDS
from nodes.wire import FrameParser, frame_message
from tests.support.localcluster import LocalCluster, free_ports

RESULTS = Path(__file__).resolve().parent / "results" / "node.json"


class _Pipeline(asyncio.Protocol):
    """One client connection keeping `window` appends in flight until `stop_at`."""

    def __init__(self, name: str, window: int, size: int, stop_at: float, stats: dict) -> None:
        self.codec = wire_codec()
        self.parser = FrameParser()
        self.name, self.window, self.size, self.stop_at, self.stats = name, window, size, stop_at, stats
        self.sent: dict[int, float] = {}
        self.next_id = 1
        self.done = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(b"".join(self._request() for _ in range(self.window)))

    def _request(self) -> bytearray:
        rid = self.next_id
        self.next_id += 1
        body = encode_payload(f"{self.name}-{rid}", self.size)
        frame = frame_message(self.codec, AppendRequest([body]), rid)
        self.sent[rid] = time.monotonic()
        return frame

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        out = []
        for frame in self.parser.feed(data):
            reply = self.codec.decode(frame.msg_type, frame.payload)
            started = self.sent.pop(frame.request_id)
            if reply.code == ResponseCode.SUCCESS:
                self.stats["latencies"].append(now - started)
            else:
                self.stats["errors"][reply.code.name] += 1
            if now < self.stop_at:
                out.append(self._request())
        if out and self.transport is not None:
            self.transport.write(b"".join(out))
        if not self.sent and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _load(host: str, port: int, connections: int, window: int, size: int, seconds: float) -> dict:
    loop = asyncio.get_running_loop()
    stats: dict = {"latencies": [], "errors": Counter()}
    start = time.monotonic()
    pipes = []
    for c in range(connections):
        _, pipe = await loop.create_connection(
            functools.partial(_Pipeline, f"c{c}", window, size, start + seconds, stats), host, port)
        pipes.append(pipe)
    await asyncio.wait_for(asyncio.gather(*(p.done for p in pipes)), seconds + 30)
    elapsed = time.monotonic() - start
    lat = sorted(stats["latencies"])
    return {"appends": len(lat), "seconds": round(elapsed, 2), "appends_per_s": round(len(lat) / elapsed),
            "p50_ms": round(1000 * lat[len(lat) // 2], 2) if lat else None,
            "p99_ms": round(1000 * lat[int(len(lat) * 0.99)], 2) if lat else None,
            "errors": dict(stats["errors"])}


def measure_dledger(flush: str, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"bench-node-{flush}-") as tmp, \
            LocalCluster(Path(tmp), 3, extra_args=["--flush", flush, "--segment-mb", "256"]) as cluster:
        cluster.start_all()
        leader = cluster.wait_for_leader()
        addr = cluster.peers[leader]
        asyncio.run(_load(addr.host, addr.port, args.connections, args.window, args.size, 1.0))  # warm-up
        result = asyncio.run(_load(addr.host, addr.port, args.connections, args.window, args.size,
                                   args.seconds))
        for node in cluster.ids:
            cluster.stop(node)
    print(f"dledger flush={flush}: {result['appends_per_s']} appends/s, p50 {result['p50_ms']} ms, "
          f"p99 {result['p99_ms']} ms, errors {result['errors']}", flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="load duration per flush policy")
    parser.add_argument("--connections", type=int, default=8, help="client connections to the leader")
    parser.add_argument("--window", type=int, default=64, help="appends in flight per connection")
    parser.add_argument("--size", type=int, default=100, help="entry body bytes")
    parser.add_argument("--pysyncobj-seconds", type=float, default=6.0, help="length of one PySyncObj trial")
    parser.add_argument("--pysyncobj-steps", type=int, default=6, help="binary-search steps for PySyncObj")
    parser.add_argument("--skip-pysyncobj", action="store_true")
    args = parser.parse_args()
    gc.freeze()  # the client, like the node, should not spend its CPU scanning long-lived objects
    gc.set_threshold(*GC_THRESHOLDS)

    results: dict = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "load_average_at_start": os.getloadavg()[0]},
        "setup": {"nodes": 3, "entry_bytes": args.size, "connections": args.connections,
                  "window": args.window, "seconds": args.seconds, "timing": "default",
                  "read_mode": "read-index"},
        "dledger": {flush: measure_dledger(flush, args) for flush in ("async", "sync")},
    }
    if not args.skip_pysyncobj:
        best, trials = max_sustained_rate(args.size, args.pysyncobj_seconds, 1000, 40000,
                                          args.pysyncobj_steps, free_ports(1)[0])
        rate = best.rate if best else 0
        results["pysyncobj"] = {
            "method": "PySyncObj benchmarks/testobj.py: 3 processes call a @replicated method at a target "
                      "rate; sustained when >= 90% succeed; binary search over the rate",
            "max_sustained_calls_per_s": rate,
            "p50_ms_at_max": round(best.p50_ms, 2) if best else None,
            "p99_ms_at_max": round(best.p99_ms, 2) if best else None,
            "trial_seconds": args.pysyncobj_seconds,
            "trials": [vars(t) for t in trials],
        }
        if rate:
            results["ratio"] = {flush: round(results["dledger"][flush]["appends_per_s"] / rate, 2)
                                for flush in ("async", "sync")}
        print(f"pysyncobj: {rate} calls/s sustained; ratio {results.get('ratio')}", flush=True)
    write_results(RESULTS, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
