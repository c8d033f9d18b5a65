"""Do the default faults bite? Runs the default `make chaos` test over several seeds and prints,
per seed: the families drawn, leader changes, how many faults hit the leader, client fail/info
outcomes completed while a fault was in force, the longest window with no successful append,
and the verdict. Writes `bench/results/nemesis.json`.

    .venv/bin/python bench/nemesis_bite.py --seeds 1-10
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def seed_range(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def one_run(seed: int, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-nemesis-") as tmp:
        cmd = [sys.executable, "-m", "harness", "run", "--nodes", str(args.nodes), "--time-limit",
               str(args.seconds), "--nemesis", args.nemesis, "--seed", str(seed), "--results-dir", tmp,
               *args.extra]
        started = time.monotonic()
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        test = json.loads((Path(tmp) / "latest" / "test.json").read_text())
    log = test.get("fault_log", {"faults": [], "leader_changes": 0})
    faults = log["faults"]
    return {
        "seed": seed, "exit": done.returncode, "seconds": round(time.monotonic() - started, 1),
        "families": sorted({f["family"] for f in faults}),
        "faults": len(faults),
        "leader_hits": sum(f["leader_hit"] for f in faults),
        "leader_changes": log["leader_changes"],
        "fail_info_during_faults": sum(f["ops"]["fail"] + f["ops"]["info"] for f in faults),
        "longest_no_append_s": max((f["longest_no_append_s"] for f in faults), default=0.0),
        "nemesis_errors": test.get("nemesis_errors", []),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1-10", help="seeds, as FIRST-LAST (default 1-10)")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--nodes", type=int, default=5)
    parser.add_argument("--nemesis", default="default")
    parser.add_argument("extra", nargs="*", help="more `harness run` flags, after --")
    args = parser.parse_args()
    rows = []
    print("seed  exit  faults  leader-hits  leader-changes  fail+info  max-outage-s  families")
    for seed in seed_range(args.seeds):
        row = one_run(seed, args)
        rows.append(row)
        print(f"{seed:4}  {row['exit']:4}  {row['faults']:6}  {row['leader_hits']:11}  "
              f"{row['leader_changes']:14}  {row['fail_info_during_faults']:9}  "
              f"{row['longest_no_append_s']:12.1f}  {','.join(row['families'])}", flush=True)
        for error in row["nemesis_errors"]:
            print(f"      nemesis error: {error}", flush=True)
    changed = sum(r["leader_changes"] > 0 for r in rows)
    bitten = sum(r["fail_info_during_faults"] > 0 for r in rows)
    counts = {f: sum(f in r["families"] for r in rows) for r in rows for f in r["families"]}
    print(f"leader changed in {changed}/{len(rows)} runs; fail/info ops during faults in "
          f"{bitten}/{len(rows)}; runs per family: {counts}")
    out = REPO / "bench" / "results" / "nemesis.json"
    out.write_text(json.dumps({"args": vars(args), "runs": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
