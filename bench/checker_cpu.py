"""The checker's CPU: wall time and JVM CPU of each of a few checks of one history in one session.

A check's CPU, not its wall time, is what a busy machine (the test suite on 2 cores) pays.
Prints, for each check in turn, its wall time and the seconds of CPU the Spark JVM spent
meanwhile, then the JVM's CPU by thread kind (the JIT compiler threads, the driver's planning
threads, the executors' tasks, GC).

    .venv/bin/python bench/checker_cpu.py [--lines 800] [--checks 8] [--codegen auto|interpret|compile]

`--lines` sizes a correct history (`checkers.synth`); `--codegen` overrides the size rule
(`checkers.engine.spark.INTERPRET_BELOW`).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _cpu_by_thread(pid: int) -> dict[str, float]:
    """Seconds of CPU of each thread kind of process `pid` (thread names with digits folded)."""
    tick = os.sysconf("SC_CLK_TCK")
    kinds: dict[str, float] = collections.defaultdict(float)
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{task}/stat").read_text()
        except OSError:
            continue  # the thread ended
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 1 :].split()
        kinds[re.sub(r"[0-9]+", "#", name)] += (int(fields[11]) + int(fields[12])) / tick
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=800, help="history lines (default 800)")
    parser.add_argument("--checks", type=int, default=8, help="checks in turn (default 8)")
    parser.add_argument("--codegen", choices=("auto", "interpret", "compile"), default="auto")
    args = parser.parse_args()

    import checkers.engine.spark as engine
    from checkers.checks.check import check
    from checkers.synth import write_lines

    if args.codegen != "auto":
        engine.INTERPRET_BELOW = 1 << 62 if args.codegen == "interpret" else 0
    folder = Path(tempfile.mkdtemp(prefix="checker-cpu-"))
    lines = write_lines(folder, 7, args.lines)
    started = time.monotonic()
    spark = engine.session()
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # set while the context runs
    pid = int(jvm.ProcessHandle.current().pid())

    def cpu() -> float:
        return sum(_cpu_by_thread(pid).values())

    print(f"{lines:,} history lines, codegen {args.codegen}")
    print(f"Spark started: {time.monotonic() - started:.1f} s wall, {cpu():.1f} s JVM CPU")
    total = cpu()
    for n in range(args.checks):
        before, at = cpu(), time.monotonic()
        verdict = check(folder)["valid"]
        wall = time.monotonic() - at
        print(f"check {n}: {wall:5.2f} s wall, {cpu() - before:5.1f} s JVM CPU, valid {verdict}")
    print(f"JVM CPU over the checks: {cpu() - total:.1f} s; by thread kind, start included:")
    for kind, seconds in sorted(_cpu_by_thread(pid).items(), key=lambda kv: -kv[1])[:6]:
        print(f"  {seconds:6.1f} s  {kind}")


if __name__ == "__main__":
    main()
