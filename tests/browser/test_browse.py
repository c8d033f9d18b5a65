"""A person's way through `harness serve`: the index, a run's report with its witnesses, the timeline."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.browser.pages import Tab
from tests.support.serving import serve

pytestmark = pytest.mark.browser

VALID, INVALID = "browser-demo/20260101T120000", "browser-demo/20260102T120000"
DRAWN_OPS = "() => window.TL && TL.status().mode === 'ops' && TL.status().loading === 0"


def test_index_report_and_timeline_of_an_invalid_run(results_folder, tab: Tab):
    page, shots = tab.page, results_folder / INVALID
    with serve(results_folder) as served:
        page.goto(served.url)
        expect(page.locator("tr.run")).to_have_count(2)
        expect(page.locator("#unreadable")).to_contain_text("browser-demo/20260103T120000")
        row = page.locator(f'tr[data-path="{INVALID}"]')
        expect(row.locator(".badge")).to_have_text("invalid")
        expect(page.locator(f'tr[data-path="{VALID}"] .badge')).to_have_text("valid")
        page.screenshot(path=shots / "screenshot-index.png", full_page=True)

        row.locator("a.report").click()
        witness = page.locator("#witness-lost-1")
        expect(witness).to_be_visible()
        for plot in ("latency-raw", "latency-quantiles", "rate", "leaders", "commit-index"):
            img = page.locator(f"#plot-{plot} img")
            img.scroll_into_view_if_needed()
            expect(img).to_be_visible()
            assert img.evaluate("i => i.complete && i.naturalWidth > 0"), f"the {plot} plot did not load"
        page.screenshot(path=shots / "screenshot-report.png", full_page=True)

        witness.locator('a[href^="timeline.html#t="]').first.click()
        page.wait_for_function(DRAWN_OPS)
        t = float(page.url.split("#t=")[1])
        status = page.evaluate("TL.status()")
        assert status["a"] <= t <= status["b"] and status["drawn"] > 0, "the timeline opens at the witness"

        page.goto(served.url)
        page.locator(f'tr[data-path="{INVALID}"] a.timeline').click()
        page.wait_for_function(DRAWN_OPS)
        expect(page.locator("#tl-witness-lost-1")).to_be_visible()
        assert tab.coloured_pixels("overview") > 500 and tab.coloured_pixels("main") > 2000
        page.screenshot(path=shots / "screenshot-timeline.png", full_page=True)
    assert tab.errors == []


def test_a_timeline_opened_from_disk_loads_its_chunks_and_finds_an_op(results_folder, tab: Tab):
    run = results_folder / INVALID
    [witness] = json.loads((run / "results.json").read_text())["checks"]["lost"]["witnesses"]
    index = witness["append"]["invoke_index"]
    tab.page.goto((run / "timeline.html").as_uri() + f"#op={index}")
    tab.page.wait_for_function(f"() => window.TL && TL.status().selected === {index}")
    expect(tab.page.locator("#detail")).to_contain_text(f"#{index} ")
    expect(tab.page.locator("#detail")).to_contain_text("WITNESS")
    assert tab.coloured_pixels("main") > 2000
    assert tab.errors == []
