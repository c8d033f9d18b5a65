"""Jepsen's NATS 2.12.1 finding and etcd's clean bill, reproduced: one table beside Jepsen's numbers.

Each row is a system, a configuration and a fault, run on 3 nodes for `--seeds` seeds; a cell is
one `harness run` and its verdict. Per row: the verdicts, the acknowledged appends, how many the
checker found lost (and what share), whether the stream or keyspace was gone, and the
expectation. Writes the rows it ran into `bench/results/reproduce.json` (each with the arguments it
ran with; other rows there are kept) and prints the table as Markdown.

    .venv/bin/python bench/reproduce.py --seeds 5       # or: make reproduce
    .venv/bin/python bench/reproduce.py --rows nats-default --seeds 1
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMON = ("--nodes", "3", "--time-limit", "30", "--rate", "100", "--nemesis-interval", "6")
POWER_ALL = ("--nemesis", "power-loss", "--power-loss-targets", "all")


@dataclass(frozen=True)
class Row:
    name: str
    system: str
    config: str
    faults: str
    expected: str
    flags: tuple[str, ...]


ROWS = (
    Row("nats-default", "NATS", "default `sync_interval` (2 min)", "power loss of every node",
        "invalid: acknowledged messages lost (Jepsen: 14.1 %), or the stream gone",
        ("--system", "nats", *POWER_ALL)),
    Row("nats-default-older", "NATS", "default `sync_interval` (2 min), a stream past its first sync",
        "power loss of every node, once, 130 s in",
        "invalid: the acknowledged messages since the last sync lost, the stream kept (Jepsen: 14.1 %)",
        # a row's flags come after COMMON's, so these win: one lane whose first (and only) slot
        # starts 130 s in and lasts 97.5-162.5 s; the run must be long enough for the longest
        # (130 + 162.5 <= 360 - 130 / 2), or the schedule holds no fault at all
        ("--system", "nats", "--time-limit", "360", "--nemesis-interval", "130", "--nemesis-concurrency", "1",
         *POWER_ALL)),
    Row("nats-10s", "NATS", "`sync_interval: 10s`", "power loss of every node",
        "invalid: about the last 10 s of acknowledged messages lost",
        ("--system", "nats", "--nats-sync-interval", "10s", *POWER_ALL)),
    Row("nats-always", "NATS", "`sync_interval: always`", "power loss of every node", "valid",
        ("--system", "nats", "--nats-sync-interval", "always", *POWER_ALL)),
    Row("nats-kill", "NATS", "default", "kill only (page cache kept)", "valid",
        ("--system", "nats", "--nemesis", "kill")),
    Row("etcd-default", "etcd", "default", "kill, pause, partition", "valid",
        ("--system", "etcd", "--nemesis", "kill,pause,partition")),
    Row("etcd-power", "etcd", "default", "power loss of every node", "valid (etcd fsyncs its WAL before it "
        "acknowledges)", ("--system", "etcd", *POWER_ALL)),
    Row("etcd-no-fsync", "etcd", "`--unsafe-no-fsync`", "power loss of every node",
        "invalid, or unknown with the reason if it cannot restart",
        ("--system", "etcd", "--etcd-unsafe-no-fsync", *POWER_ALL)),
)
VERDICTS = {0: "valid", 1: "invalid", 2: "unknown"}


def one_run(row: Row, seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-reproduce-") as tmp:
        cmd = [sys.executable, "-m", "harness", "run", *COMMON, *row.flags, "--seed", str(seed),
               "--results-dir", tmp, "--name", row.name]
        started = time.monotonic()
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        latest = Path(tmp) / "latest"
        test = json.loads((latest / "test.json").read_text())
        results = latest / "results.json"
        verdict = json.loads(results.read_text()) if results.exists() else {"checks": {}}
        acked = sum(1 for line in (latest / "history.jsonl").read_text().splitlines()
                    if (op := json.loads(line))["f"] == "append" and op["type"] == "ok")
    lost = verdict["checks"].get("lost", {})
    faults = [f["start_s"] for f in (test.get("fault_log") or {}).get("faults", [])]
    replicas = (test.get("catch_up") or {}).get("replicas") or {}
    return {
        "seed": seed, "exit": done.returncode,
        # a run whose schedule held no fault proves nothing about the fault: never a verdict
        "verdict": VERDICTS.get(done.returncode, "error") if faults else "no fault ran",
        "faults_at_s": faults,
        "seconds": round(time.monotonic() - started, 1), "acknowledged": acked,
        "lost": lost.get("count", 0), "lost_valid": lost.get("valid"),
        "gone": bool(replicas) and all(r == "no replica" for r in replicas.values()),
        "final_logs": test.get("final_logs"), "error": test.get("error"),
        "note": lost.get("note"),
    }


def summary(row: Row, runs: list[dict]) -> str:
    verdicts = ", ".join(f"{r['verdict']}" for r in runs)
    acked = sum(r["acknowledged"] for r in runs)
    lost = sum(r["lost"] for r in runs)
    share = f"{100 * lost / acked:.1f} %" if acked else "n/a"
    gone = sum(r["gone"] for r in runs)
    return (f"| {row.system}, {row.config} | {row.faults} | {row.expected} | {verdicts} | {lost} of {acked} "
            f"({share}) | {gone} of {len(runs)} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds a row (default 5)")
    parser.add_argument("--start", type=int, default=1, help="the first seed (default 1)")
    parser.add_argument("--rows", default=",".join(r.name for r in ROWS), help="rows to run, comma-separated")
    args = parser.parse_args()
    wanted = [name.strip() for name in args.rows.split(",") if name.strip()]
    unknown = sorted(set(wanted) - {r.name for r in ROWS})
    if unknown:
        parser.error(f"--rows: unknown {', '.join(unknown)}; rows are {', '.join(r.name for r in ROWS)}")
    table = ["| system, config | faults | expected | verdicts | lost of acknowledged | stream or keyspace "
             "gone |", "| --- | --- | --- | --- | --- | --- |"]
    out: dict[str, list[dict]] = {}
    for row in (r for r in ROWS if r.name in wanted):
        runs = []
        for seed in range(args.start, args.start + args.seeds):
            runs.append(one_run(row, seed))
            run = runs[-1]
            print(f"{row.name} seed {seed}: {run['verdict']}, {run['lost']} lost of {run['acknowledged']} "
                  f"acknowledged{', the stream gone' if run['gone'] else ''} ({run['seconds']} s)",
                  file=sys.stderr, flush=True)
        out[row.name] = runs
        table.append(summary(row, runs))
    print("\n".join(table))
    save(out, vars(args))
    return 0


def save(rows: dict[str, list[dict]], args: dict) -> None:
    """Write the rows run now into bench/results/reproduce.json, keeping the other rows it holds."""
    path = REPO / "bench" / "results" / "reproduce.json"
    path.parent.mkdir(exist_ok=True)
    kept = json.loads(path.read_text()).get("rows", {}) if path.exists() else {}
    ran = {name: {"args": args, "runs": runs} for name, runs in rows.items()}
    path.write_text(json.dumps({"rows": {**kept, **ran}}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
