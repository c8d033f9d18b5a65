"""The simulator's run loop: events in simulated-time order, each handed to the part that asked for it.

An event is (time, seq, kind, node, payload). `seq` orders events due at the same moment as
they were scheduled, so a seed replays exactly; `kind` is what `Loop.on` returned to the part
(the nodes, the clients, the faults, liveness) when it registered the event's handler.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from nodes.sim.invariants import Deadlines

Handler = Callable[[str, Any], None]  # (node, payload)


class Loop:
    """The queue of events and their handlers, and how far the run has come (`now`, `step`)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.step = 0
        self.queue: list[tuple[float, int, int, str, Any]] = []
        self.handlers: list[Handler] = []
        self._seq = 0

    def on(self, handler: Handler) -> int:
        """Register `handler`: the events scheduled with the kind returned go to it."""
        self.handlers.append(handler)
        return len(self.handlers) - 1

    def after(self, delay: float, kind: int, node: str, payload: Any) -> None:
        """An event of `kind` for `node` `delay` ms from now."""
        self._seq += 1
        heapq.heappush(self.queue, (self.now + delay, self._seq, kind, node, payload))

    def at(self, time: float, kind: int, node: str, payload: Any) -> None:
        """An event of `kind` for `node` at `time`."""
        self._seq += 1
        heapq.heappush(self.queue, (time, self._seq, kind, node, payload))

    def run(self, steps: int, heal: Callable[[], None], done: Callable[[], bool],
            deadlines: Deadlines) -> None:
        """Handle the events in order: `steps` of them, then `heal()`, then on until `done()` (asked
        before each further event) or until none is left; the answers `deadlines` holds are checked
        after each."""
        queue, handlers, heappop = self.queue, self.handlers, heapq.heappop
        while queue:
            step = self.step
            if step >= steps:
                if step == steps:
                    heal()
                elif done():
                    break
            self.now, _, kind, node, payload = heappop(queue)
            self.step = step + 1
            handlers[kind](node, payload)
            if deadlines.due_before(self.now):
                deadlines.check(self.now)
