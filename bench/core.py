"""The consensus core alone, without IO: how fast three in-process cores commit appends.

Three cores on in-memory stores, messages delivered at once (`tests.support.scripted`). A
client keeps handing the leader batches of 100-byte bodies (one `client_append` call per
batch, as the server does with the appends of one event-loop turn) until `--total`
entries are committed. This is the ceiling the core puts on the node's throughput.
Prints the figures and writes bench/results/core.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nodes.core import CoreConfig
from nodes.logic import durability
from nodes.messages import AppendResponse, ResponseCode
from tests.support.scripted import ScriptedCluster

RESULTS = Path(__file__).parent / "results" / "core.json"


def measure(flush: str, batch: int, total: int) -> dict[str, str | float]:
    """Appends/s and core calls/s for one flush policy and batch size."""
    cluster = ScriptedCluster(3, config=CoreConfig(ack=durability(flush, master_slave=False).ack))
    cluster.keep_sent = False
    leader = cluster.elect()
    body = b"x" * 100
    bodies = [body] * batch
    rids = []
    started = time.perf_counter()
    for _ in range(total // batch):
        rids.append(cluster.append(leader, *bodies))
    cluster.run_until(lambda: all(r in cluster.responses for r in rids), 60_000)
    elapsed = time.perf_counter() - started
    ok = sum(1 for r in rids if isinstance(cluster.responses[r], AppendResponse)
             and cluster.responses[r].code is ResponseCode.SUCCESS)
    return {"flush": flush, "batch": batch, "appends": ok * batch, "seconds": round(elapsed, 3),
            "appends_per_second": round(ok * batch / elapsed)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=200_000, help="entries per measurement")
    args = parser.parse_args()
    rows = [measure(flush, batch, args.total) for flush in ("sync", "async") for batch in (1, 16, 256)]
    for row in rows:
        print(f"{row['flush']:>5} flush, batch {row['batch']:>3}: {row['appends_per_second']:>9,} appends/s "
              f"({row['appends']} in {row['seconds']} s)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"total": args.total, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
