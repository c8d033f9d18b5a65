"""Settings every test shares."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# A checker service a developer left running must not check the tests' folders: the tests
# point the default socket at a folder nobody creates; those that want a service start
# their own on a socket of their own.
os.environ["CHECKER_SOCKET"] = str(Path(tempfile.gettempdir()) / "no-checker-service" / f"{os.getpid()}.sock")
