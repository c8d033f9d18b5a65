"""timeline.html for a history of 10^6 lines: written in bounded memory, and the page shows it at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.synth import write_lines
from tests.browser.pages import Tab

LINES = 1_000_000
PEAK_BYTES = 64 << 20  # measured: about 25 MiB; the history file alone is about 140 MB
# The writer in a process of its own: its resident memory before writing, and its peak after
# (tracemalloc saw the same 23-25 MiB, at a sixth of the speed).
# VmHWM, not ru_maxrss: the latter keeps the forking parent's size across exec.
MEASURE = """
import json, sys
from pathlib import Path
from checkers.pages.optimeline import write_timeline
def kib(key):
    line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith(key))
    return int(line.split()[1]) * 1024
before = kib("VmRSS:")
write_timeline(Path(sys.argv[1]))
print(json.dumps({"before": before, "peak": kib("VmHWM:")}))
"""


@pytest.fixture(scope="module")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A synthetic run of 10^6 history lines with its timeline, and how much the timeline writer's
    resident memory grew while it wrote (its peak less what it held before)."""
    folder = tmp_path_factory.mktemp("big") / "run"
    assert write_lines(folder, seed=19, n_lines=LINES) >= LINES
    done = subprocess.run([sys.executable, "-c", MEASURE, str(folder)], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    rss = json.loads(done.stdout)
    return folder, rss["peak"] - rss["before"]


def test_the_timeline_of_a_million_lines_is_written_in_bounded_memory(big_run):
    folder, peak = big_run
    assert peak < PEAK_BYTES, f"grew {peak / 2**20:.1f} MiB while writing the timeline"
    assert peak < (folder / "history.jsonl").stat().st_size / 2, "the history is streamed, not held"
    chunks = list((folder / "timeline").glob("chunk-*.js"))
    assert len(chunks) > 100 and max(c.stat().st_size for c in chunks) < 1 << 20


@pytest.mark.browser
def test_the_page_shows_the_overview_at_once_and_single_ops_when_zoomed(big_run, tab: Tab):
    folder, _ = big_run
    page = tab.page
    page.goto((folder / "timeline.html").as_uri())
    page.wait_for_function("() => window.TL && TL.status().draws > 0")
    assert page.evaluate("TL.status()")["mode"] == "aggregate", "too many ops to draw one by one"
    assert tab.coloured_pixels("overview") > 20_000 and tab.coloured_pixels("main") > 20_000
    page.screenshot(path=folder / "screenshot-overview.png", full_page=True)
    page.evaluate("location.hash = 't=300'")
    page.wait_for_function("() => TL.status().mode === 'ops' && TL.status().loading === 0")
    status = page.evaluate("TL.status()")
    assert status["a"] <= 300 <= status["b"] and 0 < status["drawn"] <= 30_000 and status["loaded"] <= 24
    page.screenshot(path=folder / "screenshot-zoomed.png", full_page=True)
    assert tab.errors == []
