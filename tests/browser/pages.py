"""A browser tab as the tests see it: its page, the errors it reported, and what its canvases drew."""

from __future__ import annotations

from dataclasses import dataclass, field

from playwright.sync_api import Page

# Pixels of a saturated colour (the op colours; lane stripes, text and fault bands are grey).
COLOURED_PIXELS = """(id) => {
  const c = document.getElementById(id);
  const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (d[i + 3] > 0 && Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 60) n++;
  }
  return n;
}"""


@dataclass
class Tab:
    """A page and every console error or uncaught exception it reported."""

    page: Page
    errors: list[str] = field(default_factory=list)

    def coloured_pixels(self, canvas_id: str) -> int:
        return self.page.evaluate(COLOURED_PIXELS, canvas_id)
