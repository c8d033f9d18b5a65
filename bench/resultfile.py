"""Where a benchmark's figures go: `bench/results/<name>.json`, written the same way by each script."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_results(path: Path, doc: dict[str, Any]) -> None:
    """Write `doc` to `path` as indented JSON (making its folder) and say so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {path}")
