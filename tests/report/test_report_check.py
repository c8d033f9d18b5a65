"""`python -m checkers check` writes report.html with the verdict it computed: the verdict in
plain words, every check, witnesses laid out and linked to the timeline, the faults table and
the embedded plots (leader and commit-index plots included); a re-check rewrites it."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from PIL import Image

from checkers.__main__ import COMMANDS
from checkers.checks.verdict import CHECKS
from nodes.cliparse import run_subcommands
from tests.report.synthrun import build_run

pytestmark = pytest.mark.spark
PLOTS = ("latency-raw", "latency-quantiles", "rate", "leaders", "commit-index")
N2_LINE = (0xFF, 0x7F, 0x0E)  # matplotlib's second line colour: the commit index of n2


def check(folder: Path) -> int:
    """`python -m checkers check FOLDER --local`, in this process (on the tests' Spark session)."""
    return run_subcommands("python -m checkers", "", COMMANDS,
                           ["check", str(folder), "--local", "--spark-master", "local[2]"])


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory) -> dict[str, tuple[Path, int]]:
    root = tmp_path_factory.mktemp("report-runs")
    folders = {"valid": build_run(root / "valid", stores=True),
               "invalid": build_run(root / "invalid", lose=True, stores=True)}
    return {name: (folder, check(folder)) for name, folder in folders.items()}


def plot_png(html: str, name: str) -> Image.Image:
    found = re.search(rf'<figure id="plot-{name}"><img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert found, f"no embedded {name} plot"
    return Image.open(io.BytesIO(base64.b64decode(found[1]))).convert("RGB")


def ink(image: Image.Image, colour: tuple[int, int, int] | None = None) -> int:
    """Coloured pixels inside the axes (the legend sits right of them): near `colour`, or any."""
    w, h = image.size
    pixels = image.crop((int(0.07 * w), 0, int(0.83 * w), h)).get_flattened_data()
    if colour is not None:
        return sum(sum(abs(a - b) for a, b in zip(p, colour, strict=True)) < 60 for p in pixels)
    return sum(max(p) - min(p) > 60 for p in pixels)


def test_a_valid_runs_report(runs):
    folder, code = runs["valid"]
    assert code == 0
    html = (folder / "report.html").read_text()
    assert '<span class="badge valid">valid</span></h1>' in html
    assert "<b>Valid.</b> The checker found no anomaly in" in html
    for name in CHECKS:
        assert f'<a href="#check-{name}">{name}</a>' in html
    faults = json.loads((folder / "test.json").read_text())["fault_log"]["faults"]
    rows = re.findall(r'<tr>\n<td class="num"><a href="timeline.html#t=([0-9.]+)">', html)
    assert len(faults) == 2 and rows == [f"{f['start_s']:.3f}" for f in faults]
    assert html.count("<td>n1, n2</td>") == 2, "each partition's targets"
    for name in PLOTS:
        image = plot_png(html, name)
        assert ink(image) > 1000, f"{name}: nothing drawn"
        assert (folder / f"{name}.png").stat().st_size > 5000
    assert ink(plot_png(html, "commit-index"), N2_LINE) > 80, "n3 lags: n2's line shows beside it"
    assert 'src="latency-raw.png"' not in html, "plots are embedded, not linked"


def test_an_invalid_runs_report_lays_out_its_witnesses(runs):
    folder, code = runs["invalid"]
    assert code == 1
    html = (folder / "report.html").read_text()
    results = json.loads((folder / "results.json").read_text())
    lost = results["checks"]["lost"]["witnesses"][0]
    assert '<span class="badge invalid">invalid</span></h1>' in html
    assert f'<a href="#check-lost">{results["checks"]["lost"]["count"]} lost</a>' in html
    assert html.index('href="#check-lost"') < html.index('href="#check-duplicate"'), "anomalies first"
    witness = html[html.index('id="witness-lost-1"'):]
    witness = witness[:witness.index("</div>")]
    append = lost["append"]
    assert f"<code>{lost['id']}</code> was acknowledged at index {append['ack_index']}" in witness
    at = f"{append['invoke_time'] / 1e9:.3f}"
    assert f'<a href="timeline.html#t={at}">See the timeline at {at} s.</a>' in witness
    row = f'<tr><td class="num">{append["invoke_index"]}</td><td class="num"><a href="timeline.html#t={at}">'
    assert row in witness, "the op's history index and invoke time, linked"
    assert f"<td>{append['process']}</td>" in witness, "the op's process"
    assert re.search(r"<td>n\d</td><td>append</td><td>ok</td>", witness), "the op's node, f and outcome"
    assert f'<tr><td class="num">{append["ack_index"]}</td>' in witness, "the final logs at the acked index"
    recovered = results["checks"]["recovered"]["count"]
    assert recovered and all(f'id="witness-recovered-{n}"' in html for n in range(1, min(recovered, 10) + 1))


def test_a_recheck_rewrites_the_report_with_the_new_verdict(runs, tmp_path):
    folder = shutil.copytree(runs["valid"][0], tmp_path / "run")
    assert '<span class="badge valid">valid</span></h1>' in (folder / "report.html").read_text()
    lines = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines()]
    ack = next(line for line in lines if line["f"] == "append" and line["type"] == "ok")
    ack["value"]["log_index"] += 1000
    (folder / "history.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert check(folder) == 1
    html = (folder / "report.html").read_text()
    assert '<span class="badge invalid">invalid</span></h1>' in html and "<b>Invalid.</b>" in html
    assert 'id="witness-index-mismatch-1"' in html
