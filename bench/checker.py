"""Checker scale: time to check histories of 10^5, 10^6 and 10^7 lines, and the driver's memory.

For each size a correct history (10 concurrent clients, 40% reads, 3 nodes) is generated
once into --data-dir, then checked in a fresh process: the whole check with Spark's start,
and the check alone. Then a checker service (`python -m checkers serve`) is started and,
once it has warmed up, each size is checked through it with `python -m checkers check`
(the whole command, and the check alone). Prints a table, writes
bench/results/checker.json and checker.png.

    .venv/bin/python bench/checker.py [--sizes 100000 1000000 10000000] [--spark-master URL]

`--verdict LINES` times instead a valid history of about LINES lines against the same run
with the tail of every node's final log lost (acknowledged appends lost, as in a power loss
of every node), checked in turn `--rounds` times in one warm session; prints each time and
the ratio of the medians (issue 37: an invalid verdict at most twice a valid one's), writes
bench/results/checker-verdict.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results"
DEFAULT_SIZES = (100_000, 1_000_000, 10_000_000)
TARGETS_S = {1_000_000: 20, 10_000_000: 60}  # issue 6: history lines -> seconds on 2 cores


def _peak_rss_mib(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def measure_one(folder: Path, master: str | None) -> dict[str, float]:
    """Run in a fresh process: start Spark, check `folder`, report times and peak memory."""
    started = time.monotonic()
    from checkers.checks.check import check_many
    from checkers.engine.spark import session
    from checkers.layout import ResultsDir

    spark = session(master)
    ready = time.monotonic()
    [result] = check_many([ResultsDir.open(folder)], spark, witnesses=10)
    done = time.monotonic()
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # set while the context runs
    jvm_pid = jvm.ProcessHandle.current().pid()
    failed = [name for name, c in result["checks"].items() if c["valid"] is False]
    return {
        "spark_start_s": round(ready - started, 2),
        "check_s": round(done - ready, 2),
        "load_s": result["stats"]["load_s"],
        "total_s": round(done - started, 2),
        "driver_python_peak_mib": _peak_rss_mib(),
        "jvm_peak_mib": _peak_rss_mib(jvm_pid),
        "verdict": result["valid"],
        "invalid_checks": failed,
    }


def measure_service(folders: list[Path], master: str | None) -> tuple[float, list[dict[str, float]]]:
    """Start a checker service, wait until it is warm, check each folder through it.

    Returns the service's start-to-ready time and, per folder, the whole `check` command's
    time and the check's own (results.json stats).
    """
    from checkers.service.server import ping

    tmp = tempfile.TemporaryDirectory(prefix="bench-checker-")
    sock = Path(tmp.name) / "checker.sock"
    serve = [sys.executable, "-m", "checkers", "serve", "--socket", str(sock)]
    master_args = ["--spark-master", master] if master else []
    t0 = time.monotonic()
    proc = subprocess.Popen([*serve, *master_args, "--parent", str(os.getpid())], cwd=ROOT,
                            stderr=subprocess.DEVNULL)  # it stops when the bench dies
    try:
        while (status := ping(sock)) is None or status["state"] != "ready":
            if proc.poll() is not None:
                raise SystemExit(f"the checker service exited {proc.returncode}")
            time.sleep(0.5)
        warm_s = time.monotonic() - t0
        rows = []
        for folder in folders:
            t0 = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "checkers", "check", str(folder), "--socket", str(sock), *master_args],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
            )
            wall = time.monotonic() - t0
            # A check that failed, or ran in its own process, must not be timed as the service's.
            if done.returncode > 2 or "checked by the checker service" not in done.stdout:
                raise SystemExit(
                    f"{folder}: not checked by the service (exit {done.returncode}): {done.stderr}"
                )
            stats = json.loads((folder / "results.json").read_text())["stats"]
            check_s = round(stats["load_s"] + stats["check_s"], 2)
            rows.append({"service_wall_s": round(wall, 2), "service_check_s": check_s})
            print(f"{folder.name}: through the warm service {wall:.1f} s", flush=True)
    finally:
        subprocess.run([*serve, "--stop"], capture_output=True, check=False)
        proc.wait(timeout=120)
        tmp.cleanup()
    return round(warm_s, 1), rows


def _generate(folder: Path, lines: int) -> int:
    from checkers.synth import write_lines

    done = folder / "generated.json"
    if done.is_file() and json.loads(done.read_text())["requested"] == lines:
        return json.loads(done.read_text())["lines"]
    written = write_lines(folder, seed=lines, n_lines=lines)
    done.write_text(json.dumps({"requested": lines, "lines": written}))
    return written


def _lose_tail(valid: Path, folder: Path, share: float) -> Path:
    """`valid` copied to `folder` with the last `share` of every node's final log dropped."""
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(valid, folder)
    for log in (folder / "final").glob("*.jsonl"):
        lines = log.read_text().splitlines(keepends=True)
        log.write_text("".join(lines[: round(len(lines) * (1 - share))]))
    return folder


def measure_verdicts(lines: int, data_dir: Path, rounds: int, master: str | None) -> dict:
    """Warm check times of a valid history and of its lost-tail twin, alternating in one session."""
    from checkers.checks.check import check_many
    from checkers.engine.spark import session
    from checkers.layout import ResultsDir

    valid = data_dir / f"h{lines}"
    _generate(valid, lines)
    folders = {"valid": valid, "invalid": _lose_tail(valid, data_dir / f"h{lines}-lost-tail", 0.03)}
    spark = session(master)
    for folder in folders.values():  # the warm-up: Spark compiles both paths' queries
        check_many([ResultsDir.open(folder)], spark)
    times: dict[str, list[float]] = {name: [] for name in folders}
    for n in range(rounds):
        for name, folder in folders.items():
            t0 = time.monotonic()
            [result] = check_many([ResultsDir.open(folder)], spark)
            times[name].append(round(time.monotonic() - t0, 2))
            stats = result["stats"]
            print(f"round {n + 1} {name:<7} {times[name][-1]:6.2f} s  valid {result['valid']}  "
                  f"screen {stats['screen']}  exact passes decided {stats['exact_decided']}  "
                  f"lost {result['checks']['lost']['count']}", flush=True)
    medians = {name: statistics.median(t) for name, t in times.items()}
    ratio = round(medians["invalid"] / medians["valid"], 2)
    print(f"median valid {medians['valid']:.2f} s, invalid {medians['invalid']:.2f} s: ratio {ratio}")
    return {"benchmark": "checker-verdict", "history_lines": lines, "rounds": rounds, "times_s": times,
            "median_s": medians, "ratio": ratio, "load_average": round(os.getloadavg()[0], 1)}


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    sizes = [r["history_lines"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(sizes, [r["wall_s"] for r in rows], "o-", label="whole check (Spark start included)")
    ax.plot(sizes, [r["check_s"] for r in rows], "s-", label="check alone")
    ax.plot(sizes, [r["service_wall_s"] for r in rows], "^-", label="through a warm checker service")
    ax.plot(list(TARGETS_S), list(TARGETS_S.values()), "r_", markersize=24, mew=2, label="target")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(ticker.FormatStrFormatter("%g"))
    ax.set_xlabel("history lines")
    ax.set_ylabel("seconds")
    ax.set_title("PySpark checker, local[*] on 2 cores")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/dledger-checker-bench"))
    parser.add_argument("--spark-master")
    parser.add_argument("--name", default="checker", help="results file stem (default: checker)")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--verdict", type=int, metavar="LINES", help="valid against invalid, warm")
    parser.add_argument("--rounds", type=int, default=5, help="--verdict: checks of each (default 5)")
    args = parser.parse_args()
    if args.verdict:
        row = measure_verdicts(args.verdict, args.data_dir, args.rounds, args.spark_master)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "checker-verdict.json").write_text(json.dumps(row, indent=1) + "\n")
        return 0
    if args.one:
        print(json.dumps(measure_one(args.one, args.spark_master)))
        return 0
    rows = []
    for size in args.sizes:
        folder = args.data_dir / f"h{size}"
        t0 = time.monotonic()
        lines = _generate(folder, size)
        generated = time.monotonic() - t0
        cmd = [sys.executable, __file__, "--one", str(folder)]
        if args.spark_master:
            cmd += ["--spark-master", args.spark_master]
        t0 = time.monotonic()
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
        wall = time.monotonic() - t0
        row = {
            "history_lines": lines,
            "history_mib": round((folder / "history.jsonl").stat().st_size / 2**20, 1),
            "wall_s": round(wall, 2),
            **json.loads(out.strip().splitlines()[-1]),
            "lines_per_s": round(lines / wall),
            "generate_s": round(generated, 1),
            "load_average": round(os.getloadavg()[0], 1),
        }
        rows.append(row)
        print(
            f"{lines:>10} lines  {row['history_mib']:>7} MiB  whole {row['wall_s']:>7.1f} s  "
            f"check {row['check_s']:>7.1f} s  python peak {row['driver_python_peak_mib']:>6} MiB  "
            f"jvm peak {row['jvm_peak_mib']:>7} MiB  verdict {row['verdict']}  load {row['load_average']}",
            flush=True,
        )
    warm_s, served = measure_service([args.data_dir / f"h{size}" for size in args.sizes], args.spark_master)
    for row, through in zip(rows, served, strict=True):
        row.update(through)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(
        json.dumps(
            {
                "benchmark": "checker",
                "cores": os.cpu_count(),
                "master": args.spark_master or "local[*]",
                "service_warm_up_s": warm_s,
                "rows": rows,
            },
            indent=1,
        )
        + "\n"
    )
    _plot(rows, RESULTS / f"{args.name}.png")
    print(f"wrote {RESULTS / args.name}.json and {RESULTS / args.name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
