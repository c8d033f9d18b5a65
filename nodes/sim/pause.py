"""A frozen process's inputs (SIGSTOP, a long GC pause): what reaches it waits in its sockets.

While a node is paused it neither ticks nor handles anything: peer messages, client
requests, its timer and its finished fsyncs are held, each in the order it arrived on its
own connection. When it wakes (SIGCONT) its event loop finds them all ready at once and
takes them in an order of its own: here a random interleaving of the connections, each
connection's inputs in their order (so a queued client read may come before the peer
message that tells of a new term, or the timer that would make it step down).
"""

from __future__ import annotations

import random
from collections.abc import Callable

Input = Callable[[], None]  # handling one held input, as the woken node does


class Held:
    """The inputs a node paused at `started` holds, per connection, until it wakes; `rng` is the
    pause's own generator (the order it wakes to, how long a client waits for it)."""

    __slots__ = ("_queues", "rng", "started")

    def __init__(self, started: float, rng: random.Random) -> None:
        self.started = started
        self.rng = rng
        self._queues: dict[str, list[Input]] = {}

    def __len__(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def hold(self, connection: str, handle: Input) -> None:
        """An input arrived on `connection`; `handle()` handles it."""
        self._queues.setdefault(connection, []).append(handle)

    def wake(self) -> list[Input]:
        """Every held input, connections interleaved at random, each in its own order."""
        queues = [list(reversed(q)) for _, q in sorted(self._queues.items())]
        order: list[Input] = []
        rng = self.rng
        while queues:
            i = rng.randrange(len(queues))
            order.append(queues[i].pop())
            if not queues[i]:
                queues.pop(i)
        return order
