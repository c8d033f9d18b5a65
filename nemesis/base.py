"""The seams between the nemesis and the cluster it hurts.

A nemesis is a fault family (kill, partition, ...). `start` injects one fault and `stop`
undoes it; both return the value recorded in the history. `heal` removes every fault of
its family whatever state it is in (idempotent); the run calls it before the final reads
and on every error path.
"""

from __future__ import annotations

import random
from typing import Any, Protocol


class Nodes(Protocol):
    """What a nemesis needs from the cluster: names, addresses, a shell, the node process."""

    @property
    def names(self) -> list[str]:
        ...

    def address(self, node: str) -> str:
        """The node's IP address inside the run's network."""
        ...

    def exec(self, node: str, command: str, timeout: float = 10.0) -> str:
        """Run `command` on the node over SSH; its stdout; raises when it exits non-zero."""
        ...

    def kill(self, node: str) -> None:
        """SIGKILL the node process."""
        ...

    def start(self, node: str) -> None:
        """Start the node process (no-op when it runs)."""
        ...

    def leader(self) -> str | None:
        """The node that currently claims leadership, if any answers."""
        ...


class Nemesis(Protocol):
    """One fault family."""

    name: str
    start_f: str
    stop_f: str

    def start(self, rng: random.Random) -> Any:
        """Inject a fault; returns the history value describing it."""
        ...

    def stop(self) -> Any:
        """Undo the fault injected by `start`; returns the history value."""
        ...

    def heal(self) -> None:
        """Remove every fault of this family, whatever state it is in."""
        ...
