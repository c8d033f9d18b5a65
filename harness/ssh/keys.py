"""The per-run SSH key pair: made fresh for each run, so no password or key is baked into an image.

The private key is written to `<dir>/id_ed25519` (mode 0600) in OpenSSH format, so a person
can also log in by hand: `ssh -i <dir>/id_ed25519 -p <ssh port> root@127.0.0.1`.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


@dataclass(frozen=True)
class KeyPair:
    """A private key file and its public key as one `authorized_keys` line."""

    private_path: Path
    public_line: str

    def pkey(self) -> paramiko.PKey:
        """The private key as paramiko wants it."""
        return paramiko.Ed25519Key(file_obj=io.StringIO(self.private_path.read_text()))


def create_key_pair(directory: Path, comment: str) -> KeyPair:
    """Generate an Ed25519 key pair into `directory` (created if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    path = directory / "id_ed25519"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(private)
    public_line = f"{public} {comment}"
    (directory / "id_ed25519.pub").write_text(public_line + "\n")
    return KeyPair(path, public_line)
