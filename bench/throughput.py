"""How many recorded ops/s the harness sustains against a 5-node cluster in containers.

Runs `python -m harness run` with no faults at rising target rates and reports, for each,
the achieved rate (ok + fail + info completions per second of workload) and whether the
workers kept to their schedule (achieved within 5 % of the target). Writes
`bench/results/harness.json`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def measure(rate: int, concurrency: str, seconds: int, nodes: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-harness-") as tmp:
        cmd = [sys.executable, "-m", "harness", "run", "--nodes", str(nodes), "--time-limit", str(seconds),
               "--nemesis", "none", "--rate", str(rate), "--concurrency", concurrency,
               "--results-dir", tmp, "--name", f"bench-{rate}"]
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        test = json.loads((Path(tmp) / "latest" / "test.json").read_text())
    achieved = test.get("achieved_rate", 0.0)
    return {"target": rate, "concurrency": concurrency, "achieved": achieved, "exit": done.returncode,
            "on_schedule": achieved >= 0.95 * rate, "outcomes": test.get("client_outcomes")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rates", default="1000,2000,2500,4000", help="target rates to try")
    parser.add_argument("--concurrency", default="10n")
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--nodes", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for rate in (int(r) for r in args.rates.split(",")):
        row = measure(rate, args.concurrency, args.seconds, args.nodes)
        rows.append(row)
        print(f"target {row['target']:6d} ops/s  achieved {row['achieved']:8.1f} ops/s  "
              f"{'on schedule' if row['on_schedule'] else 'BEHIND'}  verdict exit {row['exit']}", flush=True)
    out = REPO / "bench" / "results" / "harness.json"
    out.write_text(json.dumps({"nodes": args.nodes, "seconds": args.seconds, "runs": rows}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
