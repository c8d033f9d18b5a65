"""Images built once a test session, their build's progress shown even under output capture."""

from __future__ import annotations

from collections.abc import Callable

import pytest

Log = Callable[[str], None]


def shown_build(request: pytest.FixtureRequest, label: str, build: Callable[[Log], str]) -> str:
    """`build(log)`'s image, each progress line printed as `[label] line` past pytest's capture."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        return build(lambda line: print(f"[{label}] {line}", flush=True))
