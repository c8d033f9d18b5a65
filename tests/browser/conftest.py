"""Headless Chromium (Debian's `chromium`, driven by Playwright) and synthetic results folders to show it.

`make test` installs chromium when it is missing; without it these tests are skipped.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, sync_playwright

from checkers.checks.verdict import decide
from checkers.pages.optimeline import write_timeline
from checkers.pages.report import write_report
from tests.browser.pages import Tab
from tests.report.synthrun import build_run


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium for the browser tests; stopped when they end, because Playwright's sync API
    keeps an asyncio loop running in this thread meanwhile (asyncio.run elsewhere would fail)."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (make test installs it: apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def tab(browser: Browser) -> Iterator[Tab]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    found = Tab(page)
    page.on("console", lambda m: found.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: found.errors.append(str(e)))
    page.on("response", lambda r: found.errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    yield found
    context.close()


def lost_witness(history: list[dict[str, Any]]) -> dict[str, Any]:
    """The `lost` witness of a run `build_run(lose=True)` made: its last acknowledged append."""
    invokes: dict[Any, dict[str, Any]] = {}
    acks = []
    for line in history:
        if line["type"] == "invoke":
            invokes[line["process"]] = line
        elif line["f"] == "append" and line["type"] == "ok":
            acks.append((invokes[line["process"]], line))
    invoke, done = max(acks, key=lambda pair: pair[1]["value"]["log_index"])
    append = {"id": done["value"]["id"], "process": done["process"], "type": "ok",
              "invoke_index": invoke["index"], "invoke_time": invoke["time"],
              "complete_index": done["index"], "complete_time": done["time"],
              "ack_index": done["value"]["log_index"]}
    return {"id": append["id"], "append": append, "seen_by_read": None}


def finish_run(run: Path, *, lost: bool) -> Path:
    """results.json (as the checker writes it), report.html and timeline.html for a built run."""
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    found = {"lost": (1, [lost_witness(history)])} if lost else {}
    fs = [line["f"] for line in history if line["type"] == "invoke" and line["process"] != "nemesis"]
    stats = {"history_lines": len(history), "append_ops": fs.count("append"), "read_ops": fs.count("read")}
    (run / "results.json").write_text(json.dumps(decide(found, {}, "read-index", stats, [])))
    write_report(run)
    write_timeline(run)
    return run


@pytest.fixture(scope="session")
def results_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """results/ with a valid and an invalid run of the test `browser-demo`, and an unreadable folder."""
    root = tmp_path_factory.mktemp("browser") / "results"
    finish_run(build_run(root / "browser-demo" / "20260101T120000", seed=5), lost=False)
    finish_run(build_run(root / "browser-demo" / "20260102T120000", seed=6, lose=True), lost=True)
    broken = root / "browser-demo" / "20260103T120000"
    broken.mkdir()
    (broken / "test.json").write_text("{not json")
    return root
