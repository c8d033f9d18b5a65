"""The per-run SSH key pair (no Docker needed)."""

from __future__ import annotations

import stat
from pathlib import Path

from harness.ssh.keys import create_key_pair


def test_key_pair_is_private_and_consistent(tmp_path: Path) -> None:
    first = create_key_pair(tmp_path / "a", "run-a")
    second = create_key_pair(tmp_path / "b", "run-b")
    assert stat.S_IMODE(first.private_path.stat().st_mode) == 0o600
    kind, blob, comment = first.public_line.split()
    assert (kind, comment) == ("ssh-ed25519", "run-a")
    assert first.pkey().get_base64() == blob  # the private key file matches the public line
    assert (tmp_path / "a" / "id_ed25519.pub").read_text() == first.public_line + "\n"
    assert second.public_line.split()[1] != blob  # a fresh key per run
