"""A simulated network: latency with jitter (which reorders), loss, duplication and partitions.

Partitions are sets of blocked directed links, so one-way and bridge partitions are just
other sets. A message is dropped if its link is blocked when it would be delivered.

A `fifo` network delivers each directed link's messages in the order they were sent, as the
real peer links do (one TCP connection per peer): a message waits for those sent before it
(master-slave mode, whose slaves rely on it; DLedger's replication copes with any order).
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(slots=True)
class LinkModel:
    """How every link behaves at the moment."""

    latency_ms: float = 1.0
    jitter_ms: float = 2.0
    loss: float = 0.0
    duplicate: float = 0.0


class Network:
    """Decides, for each message sent, whether and when (possibly twice) it arrives."""

    def __init__(self, rng: random.Random, fifo: bool = False) -> None:
        self._rng = rng
        self._fifo = fifo
        self._last: dict[tuple[str, str], float] = {}  # fifo: each link's latest delivery time
        self.model = LinkModel()
        self._blocked: set[tuple[str, str]] = set()
        self._cut: set[tuple[str, str]] = set()  # links cut by a targeted fault, beside the partition

    def heal(self) -> None:
        """No partition, no cut link, no loss, no duplication, normal latency."""
        self.model = LinkModel()
        self._blocked = set()
        self._cut = set()

    def block(self, links: list[tuple[str, str]]) -> None:
        """Replace the partition with these blocked directed links (sender, receiver)."""
        self._blocked = set(links)

    def cut(self, links: list[tuple[str, str]]) -> None:
        """Cut these directed links until `mend`, whatever partition comes and goes meanwhile."""
        self._cut.update(links)

    def mend(self, links: list[tuple[str, str]]) -> None:
        self._cut.difference_update(links)

    def connected(self, sender: str, receiver: str) -> bool:
        link = (sender, receiver)
        return link not in self._blocked and link not in self._cut

    def arrivals(self, sender: str, receiver: str, now: float) -> list[float]:
        """When a message sent now from `sender` to `receiver` arrives: never, once or twice."""
        times = [now + delay for delay in self.delays()]
        if self._fifo and times:
            link = (sender, receiver)
            times = [max(t, self._last.get(link, now)) for t in times]
            self._last[link] = times[-1]
        return times

    def delays(self) -> list[float]:
        """Delivery delays (ms) for one message sent now: none if lost, two if duplicated."""
        rng, m = self._rng, self.model
        if m.loss and rng.random() < m.loss:
            return []
        first = m.latency_ms + rng.random() * m.jitter_ms
        if m.duplicate and rng.random() < m.duplicate:
            return [first, m.latency_ms + rng.random() * m.jitter_ms * 4]
        return [first]


def split(nodes: list[str], rng: random.Random) -> tuple[list[str], list[str]]:
    """A random split of `nodes` into two non-empty groups."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    cut = rng.randint(1, len(nodes) - 1)
    return shuffled[:cut], shuffled[cut:]


def between(a: list[str], b: list[str], both_ways: bool = True) -> list[tuple[str, str]]:
    """The directed links from group `a` to group `b` (and back when `both_ways`)."""
    links = [(x, y) for x in a for y in b]
    if both_ways:
        links += [(y, x) for x in a for y in b]
    return links
