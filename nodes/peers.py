"""Peer addresses (`--peers n1=HOST:PORT,...`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_peers(text: str) -> dict[str, Address]:
    """`n1=HOST:PORT,n2=HOST:PORT` as {id: Address}, in the given order; ValueError says what is wrong."""
    peers: dict[str, Address] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        node, sep, hostport = item.partition("=")
        host, colon, port = hostport.rpartition(":")
        if not sep or not node or not colon or not host:
            raise ValueError(f"peer {item!r} is not ID=HOST:PORT (example: n1=127.0.0.1:20911)")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"peer {item!r}: port {port!r} is not a number in 1..65535")
        if node in peers:
            raise ValueError(f"peer id {node!r} appears twice in {text!r}")
        peers[node] = Address(host.strip("[]"), int(port))
    if not peers:
        raise ValueError("no peers given; pass --peers n1=HOST:PORT,n2=HOST:PORT,...")
    return peers
