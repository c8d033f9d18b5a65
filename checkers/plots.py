"""The report's plots: raw latency, latency quantiles and throughput, with fault periods shaded."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from checkers.timeline import Timeline

TYPE_COLOURS = {"ok": "#2a9d8f", "fail": "#e76f51", "info": "#e9c46a"}
FAULT_COLOURS = ["#adb5bd", "#cdb4db", "#a2d2ff", "#ffc8dd", "#bde0fe", "#ffafcc", "#d8e2dc"]
MARKERS = {"append": "o", "read": "^"}
QUANTILES = (0.5, 0.95, 0.99, 1.0)


def _shade_faults(ax: Axes, timeline: Timeline) -> list[Patch]:
    names = sorted({p.fault for p in timeline.faults})
    colours = {name: FAULT_COLOURS[i % len(FAULT_COLOURS)] for i, name in enumerate(names)}
    for period in timeline.faults:
        if period.end > period.start:
            ax.axvspan(period.start, period.end, color=colours[period.fault], alpha=0.35, lw=0)
        else:
            ax.axvline(period.start, color=colours[period.fault], lw=1.5)
    return [Patch(color=colours[n], alpha=0.5, label=n) for n in names]


def _finish(
    fig: plt.Figure, ax: Axes, handles: list, path: Path, title: str, ylabel: str, end: float
) -> None:
    ax.set_title(title)
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel(ylabel)
    ax.set_xlim(0, max(end, 1.0))
    if handles:
        ax.legend(handles=handles, loc="upper left", fontsize="small", framealpha=0.8, ncols=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def latency_raw(timeline: Timeline, path: Path) -> None:
    """Every (sampled) op: invoke time against latency, coloured by outcome."""
    fig, ax = plt.subplots(figsize=(11, 4.5))
    handles: list = _shade_faults(ax, timeline)
    for f, marker in MARKERS.items():
        for kind, colour in TYPE_COLOURS.items():
            xs = [p[0] for p in timeline.points if p[2] == f and p[3] == kind]
            ys = [max(p[1], 0.01) for p in timeline.points if p[2] == f and p[3] == kind]
            if xs:
                handles.append(
                    ax.scatter(
                        xs, ys, s=7, marker=marker, color=colour, alpha=0.6, linewidths=0, label=f"{f} {kind}"
                    )
                )
    ax.set_yscale("log")
    _finish(fig, ax, handles, path, "Latency of every operation", "latency (ms)", timeline.end)


def latency_quantiles(timeline: Timeline, path: Path) -> None:
    """Per-second quantiles of ok latencies, per operation kind."""
    fig, ax = plt.subplots(figsize=(11, 4.5))
    handles: list = _shade_faults(ax, timeline)
    styles = {"append": "-", "read": "--"}
    for f, by_second in sorted(timeline.ok_latencies.items()):
        seconds = sorted(by_second)
        for q in QUANTILES:
            values = []
            for s in seconds:
                lat = sorted(by_second[s])
                values.append(max(lat[min(len(lat) - 1, int(q * len(lat)))], 0.01))
            (line,) = ax.plot(
                [s + 0.5 for s in seconds],
                values,
                styles.get(f, ":"),
                lw=1.2,
                label=f"{f} p{round(q * 100)}" if q < 1 else f"{f} max",
            )
            handles.append(line)
    ax.set_yscale("log")
    _finish(fig, ax, handles, path, "Latency quantiles (ok operations)", "latency (ms)", timeline.end)


def rate(timeline: Timeline, path: Path) -> None:
    """Completed operations per second, by kind and outcome."""
    fig, ax = plt.subplots(figsize=(11, 4.5))
    handles: list = _shade_faults(ax, timeline)
    seconds = sorted(timeline.per_second)
    keys = sorted({k for counts in timeline.per_second.values() for k in counts})
    for f, kind in keys:
        ys = [timeline.per_second[s].get((f, kind), 0) for s in seconds]
        (line,) = ax.plot(
            [s + 0.5 for s in seconds],
            ys,
            "-" if f == "append" else "--",
            color=TYPE_COLOURS.get(kind),
            lw=1.2,
            label=f"{f} {kind}",
        )
        handles.append(line)
    _finish(fig, ax, handles, path, "Throughput", "operations / s", timeline.end)


def write_plots(timeline: Timeline, out_dir: Path) -> list[str]:
    """Write the three plots into `out_dir`; returns their file names."""
    names = {"latency-raw.png": latency_raw, "latency-quantiles.png": latency_quantiles, "rate.png": rate}
    for name, plot in names.items():
        plot(timeline, out_dir / name)
    return list(names)
