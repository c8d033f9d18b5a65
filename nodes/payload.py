"""How a client's unique append id travels inside an entry body.

The body is the id in UTF-8, then (when a payload size asks for more bytes) a NUL and
filler. No-op entries (magic 2) have an empty body and no id. The checker reads ids out of
collected store files with `payload_id`.
"""

from __future__ import annotations

FILLER = b"x"


def encode_payload(append_id: str, size: int = 0) -> bytes:
    """The body for `append_id`, padded to `size` bytes when size is larger than the id."""
    raw = append_id.encode()
    if b"\x00" in raw:
        raise ValueError(f"append id {append_id!r} contains a NUL byte")
    if size <= len(raw):
        return raw
    return raw + b"\x00" + FILLER * (size - len(raw) - 1)


def payload_id(body: bytes) -> str | None:
    """The append id carried by `body`, or None for an empty (no-op) body."""
    if not body:
        return None
    return body.split(b"\x00", 1)[0].decode(errors="replace")
