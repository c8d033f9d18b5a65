"""The report's plots, all with matplotlib and one time axis, fault periods shaded per family:
latency of every op, latency quantiles, throughput, who led which term, and commit indexes.

Each plot is drawn once to PNG bytes: written into the results folder (the results
contract's files) and embedded in report.html, which so needs nothing beside it.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from checkers.pages.timeline import Timeline
from checkers.run.faultperiods import FaultPeriod
from checkers.run.nodeseries import NodeSeries

TYPE_COLOURS = {"ok": "#2a9d8f", "fail": "#e76f51", "info": "#e9c46a"}
FAULT_COLOURS = ["#adb5bd", "#cdb4db", "#a2d2ff", "#ffc8dd", "#bde0fe", "#ffafcc", "#d8e2dc"]
MARKERS = {"append": "o", "read": "^", "consume": "s"}
LINE_STYLES = {"append": "-", "read": "--", "consume": ":"}
QUANTILES = (0.5, 0.95, 0.99, 1.0)
# get_cmap is typed as returning the Colormap base class; tab20 is a ListedColormap of RGB triples.
TERM_COLOURS: tuple[tuple[float, float, float], ...] = plt.get_cmap("tab20").colors  # type: ignore[attr-defined]
TERM_LABELS = 40  # label the leaders' bars with their term when there are at most this many
SIZE = (11, 4.5)
DPI = 100


@dataclass(frozen=True)
class Plot:
    """One drawn plot: its file name in the results folder, its title and its PNG bytes."""

    name: str
    title: str
    png: bytes

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


class _Canvas:
    """What every plot shares: the time axis and the shading of fault periods by family."""

    def __init__(self, faults: list[FaultPeriod], end: float) -> None:
        self.faults = faults
        self.end = max(end, 1.0)
        names = sorted({p.fault for p in faults})
        self.colours = {name: FAULT_COLOURS[i % len(FAULT_COLOURS)] for i, name in enumerate(names)}

    def axes(self, title: str, height: float = SIZE[1]) -> tuple[plt.Figure, Axes, list]:
        """A figure with faults shaded; the legend handles start with one patch per family."""
        fig, ax = plt.subplots(figsize=(SIZE[0], height))
        ax.set_title(title)
        for period in self.faults:
            colour = self.colours[period.fault]
            if period.end > period.start:
                ax.axvspan(period.start, period.end, color=colour, alpha=0.35, lw=0)
            else:
                ax.axvline(period.start, color=colour, lw=1.5)
        return fig, ax, [Patch(color=c, alpha=0.5, label=n) for n, c in self.colours.items()]

    def finish(self, fig: plt.Figure, ax: Axes, handles: list, ylabel: str) -> bytes:
        ax.set_xlabel("time since start (s)")
        ax.set_ylabel(ylabel)
        ax.set_xlim(0, self.end)
        if handles:  # outside the axes, on the right, so every plot's time axis lines up
            ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
        height = fig.get_figheight()
        fig.subplots_adjust(left=0.07, right=0.83, bottom=0.55 / height, top=1 - 0.4 / height)
        out = io.BytesIO()
        fig.savefig(out, format="png", dpi=DPI)
        plt.close(fig)
        return out.getvalue()


def latency_raw(canvas: _Canvas, title: str, timeline: Timeline) -> bytes:
    """Every (sampled) op: invoke time against latency, coloured by outcome."""
    fig, ax, handles = canvas.axes(title)
    for f, marker in MARKERS.items():
        for kind, colour in TYPE_COLOURS.items():
            mine = [p for p in timeline.points if p[2] == f and p[3] == kind]
            if mine:
                xs, ys = [p[0] for p in mine], [max(p[1], 0.01) for p in mine]
                handles.append(ax.scatter(xs, ys, s=7, marker=marker, color=colour, alpha=0.6,
                                          linewidths=0, label=f"{f} {kind}"))
    ax.set_yscale("log")
    return canvas.finish(fig, ax, handles, "latency (ms)")


def latency_quantiles(canvas: _Canvas, title: str, timeline: Timeline) -> bytes:
    """Per-second quantiles of ok latencies, per operation kind."""
    fig, ax, handles = canvas.axes(title)
    for f, by_second in sorted(timeline.ok_latencies.items()):
        seconds = sorted(by_second)
        ordered = [sorted(by_second[s]) for s in seconds]
        for q in QUANTILES:
            values = [max(lat[min(len(lat) - 1, int(q * len(lat)))], 0.01) for lat in ordered]
            label = f"{f} p{round(q * 100)}" if q < 1 else f"{f} max"
            (line,) = ax.plot([s + 0.5 for s in seconds], values, LINE_STYLES.get(f, "-."), lw=1.2,
                              label=label)
            handles.append(line)
    ax.set_yscale("log")
    return canvas.finish(fig, ax, handles, "latency (ms)")


def rate(canvas: _Canvas, title: str, timeline: Timeline) -> bytes:
    """Completed operations per second, by kind and outcome."""
    fig, ax, handles = canvas.axes(title)
    seconds = sorted(timeline.per_second)
    keys = sorted({k for counts in timeline.per_second.values() for k in counts})
    for f, kind in keys:
        ys = [timeline.per_second[s].get((f, kind), 0) for s in seconds]
        (line,) = ax.plot([s + 0.5 for s in seconds], ys, LINE_STYLES.get(f, "-."),
                          color=TYPE_COLOURS.get(kind), lw=1.2, label=f"{f} {kind}")
        handles.append(line)
    return canvas.finish(fig, ax, handles, "operations / s")


def leaders(canvas: _Canvas, title: str, series: NodeSeries) -> bytes:
    """One row per node: a bar while it led, coloured and labelled by term; a mark where it stood
    for election."""
    fig, ax, handles = canvas.axes(title, height=1.6 + 0.45 * len(series.nodes))
    row = {node: i for i, node in enumerate(reversed(series.nodes))}
    labelled = len(series.leaderships) <= TERM_LABELS
    for node in series.nodes:
        mine = [ls for ls in series.leaderships if ls.node == node]
        spans = [(ls.start, (canvas.end if ls.end is None else ls.end) - ls.start) for ls in mine]
        colours = [TERM_COLOURS[ls.term % len(TERM_COLOURS)] for ls in mine]
        ax.broken_barh(spans, (row[node] - 0.3, 0.6), facecolors=colours, edgecolor="#333", lw=0.4)
        for ls, (start, width) in zip(mine, spans, strict=True):
            shown = start + width - max(start, 0.0)
            if labelled and shown > canvas.end / 60:
                ax.text(start + width - shown / 2, row[node], f"t{ls.term}", ha="center", va="center",
                        fontsize="x-small")
    if series.candidacies:
        xs = [at for at, _node, _term in series.candidacies]
        ys = [row[node] + 0.38 for _at, node, _term in series.candidacies]
        handles.append(ax.scatter(xs, ys, marker="v", s=14, color="#d62828", label="stood for election"))
    handles.append(Patch(facecolor=TERM_COLOURS[1], edgecolor="#333", label="led (colour: term)"))
    ax.set_yticks(list(row.values()), list(row))
    ax.set_ylim(-0.6, len(series.nodes) - 0.4)
    return canvas.finish(fig, ax, handles, "node")


def commit_index(canvas: _Canvas, title: str, series: NodeSeries) -> bytes:
    """Each node's commit index over time: a node that lags runs flat, then catches up."""
    fig, ax, handles = canvas.axes(title)
    for node in series.nodes:
        points = series.commits.get(node, [])
        if points:
            (line,) = ax.step([p[0] for p in points], [p[1] for p in points], where="post", lw=1.2,
                              label=node)
            handles.append(line)
    return canvas.finish(fig, ax, handles, "commit index")


def draw_plots(timeline: Timeline, series: NodeSeries | None, out_dir: Path) -> list[Plot]:
    """Draw every plot there is data for, write each as `out_dir/<name>`, and return them."""
    canvas = _Canvas(timeline.faults, max(timeline.end, series.end if series else 0.0))
    drawers: list[tuple[str, str, Callable[[_Canvas, str, Any], bytes], Any]] = [
        ("latency-raw.png", "Latency of every operation", latency_raw, timeline),
        ("latency-quantiles.png", "Latency quantiles (ok operations)", latency_quantiles, timeline),
        ("rate.png", "Throughput", rate, timeline),
    ]
    if series is not None and series.leaderships:
        drawers.append(("leaders.png", "Leader of each term", leaders, series))
    if series is not None and any(series.commits.values()):
        drawers.append(("commit-index.png", "Commit index of each node", commit_index, series))
    plots = []
    for name, title, draw, data in drawers:
        plot = Plot(name, title, draw(canvas, title, data))
        (out_dir / name).write_bytes(plot.png)
        plots.append(plot)
    return plots
