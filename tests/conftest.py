"""Settings every test shares."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# A checker service a developer left running must not check the tests' folders: the tests
# that want one start their own on a socket of their own.
os.environ["CHECKER_SOCKET"] = str(Path(tempfile.mkdtemp(prefix="no-checker-service-")) / "none.sock")
