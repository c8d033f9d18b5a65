"""Soak: resident memory of the harness and of the nodes over a long faulty run (default an hour).

Starts `python -m harness run --nodes 3 --time-limit SECONDS --nemesis default` (kills,
pauses, partitions, clock faults) with its results in a fresh `results/soak-<time>/`, and
every --every seconds until the run ends samples:

* the harness process: VmRSS, VmHWM and RssAnon from `/proc/<pid>/status`, and the same for
  each of its descendants (none during the workload; the Spark checker's JVM at the end);
* each node container of the run (found by the label `dledger-chaos.run=<run id>`, the
  run id read from the run's `test.json`): the node process (its pid is in
  `/run/dledger-node.pid`) read with `docker exec` from `/proc/<pid>/status`, split into
  RssAnon (the heap: what must stay flat) and RssFile + RssShmem (the pages of the
  mmap'd store, which grow with the log by design). A node the nemesis has killed has no
  process until it is restarted: that sample records the gap, and a restart shows as a
  new pid;
* the size and line count of the run's `history.jsonl`, so the history is seen growing
  on disk while the harness's memory stays flat.

Each sample carries the run's phase from `test.json`: `setup`, `workload` (clients and
nemesis for the time limit), `wrap-up` (heal, catch-up, final reads, collect, teardown),
`check` (the Spark check and the report). The summary covers the `workload` samples only:
the final reads, the checker and its JVM (which the harness may start during the wrap-up)
are not part of the soak figure (the checker's memory is bench/checker.py's subject).
For each process it gives first / median / max / last in MiB and the growth from the
first sample at least 5 minutes into the workload (the first workload sample in a run
shorter than that) to the last one; for a node also the same over its longest-lived
process, since a killed node comes back as a new process with a fresh heap.

Writes bench/results/soak.json (rewritten after every sample, `complete` false until the
run ends) and prints a table.

    .venv/bin/python bench/soak.py [--time-limit 3600] [--every 30] [--nemesis default]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.containers.cluster import LABEL_NODE, LABEL_RUN, connect  # noqa: E402
from harness.containers.db import PIDFILE  # noqa: E402

RESULTS = ROOT / "bench" / "results"
BASELINE_S = 300.0  # growth is measured from the first sample this far into the workload
STATUS_KEYS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem")
NODE_STATUS = (f"p=$(cat {PIDFILE} 2>/dev/null) && [ -n \"$p\" ] && "
               "echo pid:$p && cat /proc/$p/status")


def parse_status(text: str) -> dict[str, Any]:
    """The memory lines of a /proc/<pid>/status, in KiB, and the process's name and state."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in STATUS_KEYS:
            out[key] = int(value.split()[0])
        elif key in ("Name", "State"):
            out[key.lower()] = value.strip().split()[0]
    return out


def read_status(pid: int) -> dict[str, Any] | None:
    try:
        return parse_status(Path(f"/proc/{pid}/status").read_text())
    except OSError:
        return None


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, from /proc/<pid>/task/*/children."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def sample_harness(pid: int) -> dict[str, Any]:
    own = read_status(pid) or {}
    kids = []
    for kid in descendants(pid):
        status = read_status(kid)
        if status:
            kids.append({"pid": kid, **status})
    return {**own, "children": kids}


def sample_node(container: Any) -> dict[str, Any]:
    """The node process's memory in one container, or the reason there is none right now."""
    try:
        result = container.exec_run(["sh", "-c", NODE_STATUS], demux=False)
    except docker.errors.NotFound:
        return {"gap": "container gone"}
    except docker.errors.APIError as e:
        return {"gap": f"docker: {e.explanation or e}"[:200]}
    text = (result.output or b"").decode(errors="replace")
    if result.exit_code != 0 or not text.startswith("pid:"):
        return {"gap": "no node process (killed, not restarted yet)"}
    first, _, rest = text.partition("\n")
    status = parse_status(rest)
    if "RssAnon" not in status:
        return {"gap": "no node process (exited)", "pid": int(first[4:])}
    return {"pid": int(first[4:]), **status}


@dataclass
class HistoryMeter:
    """Size and line count of history.jsonl, counting only the bytes appended since the last look."""

    path: Path | None = None
    offset: int = 0
    lines: int = 0

    def read(self) -> dict[str, int]:
        if self.path is None or not self.path.exists():
            return {"bytes": 0, "lines": 0}
        with self.path.open("rb") as f:
            f.seek(self.offset)
            while chunk := f.read(1 << 20):
                self.lines += chunk.count(b"\n")
                self.offset += len(chunk)
        return {"bytes": self.offset, "lines": self.lines}


@dataclass
class Run:
    """The harness subprocess and what the sampler has learnt about its run."""

    proc: subprocess.Popen
    results_dir: Path
    started: float
    run_dir: Path | None = None
    run_id: str | None = None
    containers: dict[str, Any] = field(default_factory=dict)
    history: HistoryMeter = field(default_factory=HistoryMeter)

    def test(self) -> dict[str, Any]:
        latest = self.results_dir / "latest"
        if self.run_dir is None and latest.exists():
            self.run_dir = latest.resolve()
            self.history.path = self.run_dir / "history.jsonl"
        if self.run_dir is None:
            return {}
        try:
            return json.loads((self.run_dir / "test.json").read_text())
        except (OSError, ValueError):
            return {}  # caught mid-write: the next sample reads it


def phase_of(test: dict[str, Any]) -> str:
    """Where the run is, from the phases its test.json records as each one ends."""
    phases = test.get("phases", {})
    if "duration_s" in test:
        return "check"
    if "workload" in phases:
        return "wrap-up"
    if "setup" in phases:
        return "workload"
    return "setup"


def find_containers(client: docker.DockerClient, run_id: str) -> dict[str, Any]:
    found = client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})
    return {c.labels.get(LABEL_NODE, c.name): c for c in found}


def take_sample(run: Run, client: docker.DockerClient) -> dict[str, Any]:
    test = run.test()
    phase = phase_of(test)
    if run.run_id is None and test.get("run_id"):
        run.run_id = test["run_id"]
    if run.run_id and phase != "check" and len(run.containers) < test.get("nodes", 3):
        run.containers = find_containers(client, run.run_id)
    nodes = {}
    if phase != "check":
        nodes = {name: sample_node(c) for name, c in sorted(run.containers.items())}
    return {"t": round(time.monotonic() - run.started, 1), "time": time.strftime("%H:%M:%S"),
            "phase": phase, "harness": sample_harness(run.proc.pid), "nodes": nodes,
            "history": run.history.read()}


def mib(kib: float) -> float:
    return round(kib / 1024, 1)


def series_summary(points: list[tuple[float, int]], workload_start: float) -> dict[str, Any]:
    """first / median / max / last (MiB) and the growth from the 5-minute mark to the end."""
    if not points:
        return {"samples": 0}
    values = [v for _, v in points]
    base = next(((t, v) for t, v in points if t >= workload_start + BASELINE_S), points[0])
    return {"samples": len(points), "first": mib(values[0]), "median": mib(statistics.median(values)),
            "max": mib(max(values)), "last": mib(values[-1]),
            "growth": mib(values[-1] - base[1]), "growth_from_s": base[0]}


def harness_points(samples: list[dict[str, Any]], key: str) -> list[tuple[float, int]]:
    return [(s["t"], s["harness"][key]) for s in samples if key in s["harness"]]


def summarise(samples: list[dict[str, Any]]) -> dict[str, Any]:
    work = [s for s in samples if s["phase"] == "workload"]
    if not work:
        return {}
    start = work[0]["t"]
    out: dict[str, Any] = {
        "workload_samples": len(work),
        "harness_rss": series_summary(harness_points(work, "VmRSS"), start),
        "harness_anon": series_summary(harness_points(work, "RssAnon"), start),
        "harness_hwm_last": mib(work[-1]["harness"].get("VmHWM", 0)),
        "harness_children": sorted({c.get("name", "?") for s in work for c in s["harness"]["children"]}),
        "history_last": work[-1]["history"],
        "nodes": {},
    }
    for name in sorted({n for s in work for n in s["nodes"]}):
        points = [(s["t"], s["nodes"].get(name, {"gap": "not found"})) for s in work]
        out["nodes"][name] = node_summary(points, start)
    return out


def node_summary(points: list[tuple[float, dict[str, Any]]], start: float) -> dict[str, Any]:
    ok = [(t, s) for t, s in points if "RssAnon" in s]
    by_pid: dict[int, list[tuple[float, dict[str, Any]]]] = {}
    for t, s in ok:
        by_pid.setdefault(s["pid"], []).append((t, s))
    summary: dict[str, Any] = {"gaps": len(points) - len(ok), "processes": len(by_pid)}
    if not ok:
        return summary
    summary["anon"] = series_summary([(t, s["RssAnon"]) for t, s in ok], start)
    summary["file"] = series_summary([(t, s["RssFile"] + s.get("RssShmem", 0)) for t, s in ok], start)
    pid, longest = max(by_pid.items(), key=lambda kv: kv[1][-1][0] - kv[1][0][0])
    summary["longest_process"] = {"pid": pid, "span_s": round(longest[-1][0] - longest[0][0], 1),
                                  "anon": series_summary([(t, s["RssAnon"]) for t, s in longest], start)}
    return summary


def fault_counts(test: dict[str, Any]) -> dict[str, int]:
    """How many faults of each family the run injected, from its fault log."""
    counts: dict[str, int] = {}
    for fault in (test.get("fault_log") or {}).get("faults", []):
        counts[fault.get("family", "?")] = counts.get(fault.get("family", "?"), 0) + 1
    return counts


def start_harness(args: argparse.Namespace, results_dir: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "harness", "run", "--nodes", str(args.nodes),
           "--time-limit", f"{args.time_limit:g}", "--nemesis", args.nemesis, "--name", "soak",
           "--results-dir", str(results_dir)]
    if args.seed is not None:
        cmd += ["--seed", str(args.seed)]
    results_dir.mkdir(parents=True)
    out = (results_dir / "harness.out").open("w")
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def write(out: Path, meta: dict[str, Any], samples: list[dict[str, Any]], complete: bool) -> None:
    doc = {**meta, "complete": complete, "summary": summarise(samples), "samples": samples}
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(out)


def line(sample: dict[str, Any]) -> str:
    h = sample["harness"]
    nodes = "  ".join(f"{n} {mib(s['RssAnon']):.1f}+{mib(s['RssFile'] + s.get('RssShmem', 0)):.1f}"
                      if "RssAnon" in s else f"{n} (gap)" for n, s in sample["nodes"].items())
    kids = f" +{len(h['children'])} child" if h.get("children") else ""
    return (f"{sample['t']:7.0f} s {sample['phase']:8s} harness rss {mib(h.get('VmRSS', 0)):6.1f} "
            f"anon {mib(h.get('RssAnon', 0)):6.1f} MiB{kids}  "
            f"history {sample['history']['bytes'] / 2**20:7.1f} MiB {sample['history']['lines']:8d} lines"
            f"  nodes anon+file MiB: {nodes}")


def table(summary: dict[str, Any]) -> str:
    rows = [("harness VmRSS", summary["harness_rss"]), ("harness RssAnon", summary["harness_anon"])]
    for name, node in summary["nodes"].items():
        if "anon" in node:
            rows += [(f"{name} RssAnon", node["anon"]), (f"{name} RssFile+Shmem", node["file"]),
                     (f"{name} RssAnon, longest-lived pid", node["longest_process"]["anon"])]
    out = [f"{'MiB':34s} {'first':>8s} {'median':>8s} {'max':>8s} {'last':>8s} {'growth':>8s}  from"]
    for label, s in rows:
        if not s.get("samples"):
            out.append(f"{label:34s} no samples")
            continue
        out.append(f"{label:34s} {s['first']:8.1f} {s['median']:8.1f} {s['max']:8.1f} {s['last']:8.1f} "
                   f"{s['growth']:+8.1f}  {s['growth_from_s']:.0f} s")
    for name, node in summary["nodes"].items():
        out.append(f"{name}: {node['processes']} node processes seen, {node['gaps']} samples with no process")
    h = summary["history_last"]
    out.append(f"history.jsonl at the end of the workload: {h['bytes'] / 2**20:.1f} MiB, {h['lines']} lines")
    return "\n".join(out)


def sleep_until(deadline: float, proc: subprocess.Popen) -> None:
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time-limit", type=float, default=3600, help="seconds of workload (default 3600)")
    parser.add_argument("--every", type=float, default=30, help="seconds between samples (default 30)")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--nemesis", default="default",
                        help="the run's --nemesis (default: default, i.e. kill,pause,partition,clock)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS / "soak.json")
    args = parser.parse_args()

    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop the harness too, below
    client = connect()
    results_dir = ROOT / "results" / f"soak-{time.strftime('%Y%m%dT%H%M%S')}"
    run = Run(start_harness(args, results_dir), results_dir, time.monotonic())
    meta = {"command": run.proc.args, "harness_pid": run.proc.pid, "results_dir": str(results_dir),
            "time_limit_s": args.time_limit, "every_s": args.every, "nodes": args.nodes,
            "nemesis": args.nemesis, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "units": "MiB in summary, KiB in samples (as /proc reports them)"}
    print(f"harness pid {run.proc.pid}, results in {results_dir}, every {args.every:g} s", flush=True)
    samples: list[dict[str, Any]] = []
    sleep_until(run.started + 1, run.proc)  # let the interpreter start: /proc shows no memory before
    try:
        while run.proc.poll() is None:
            sample = take_sample(run, client)
            if run.proc.poll() is not None:
                break  # the harness exited while we sampled: its figures are gone
            samples.append(sample)
            print(line(sample), flush=True)
            meta.update(run_dir=str(run.run_dir), run_id=run.run_id)
            write(args.out, meta, samples, complete=False)
            sleep_until(run.started + len(samples) * args.every, run.proc)
    except KeyboardInterrupt:
        os.killpg(run.proc.pid, signal.SIGTERM)  # the harness tears its cluster down on SIGTERM
        run.proc.wait()
        raise
    meta.update(run_dir=str(run.run_dir), run_id=run.run_id, harness_exit=run.proc.returncode,
                finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"), faults=fault_counts(run.test()))
    write(args.out, meta, samples, complete=True)
    summary = summarise(samples)
    print(f"harness exited {run.proc.returncode}; its output is in {results_dir / 'harness.out'}")
    if not summary or not summary["nodes"]:
        print("the run never reached its workload: no soak figures", file=sys.stderr)
        return 1
    print(table(summary))
    print("faults injected: " + ", ".join(f"{k} {v}" for k, v in sorted(meta["faults"].items())))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
