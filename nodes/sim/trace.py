"""The simulator's event trace: a bounded ring of recent events, formatted only when shown."""

from __future__ import annotations

from collections import deque
from typing import Any

from nodes.messages import HaPush, HaReport, PushRequest, PushResponse
from nodes.sim.loop import Loop


def describe(obj: Any) -> str:
    """A one-line description of a message or event payload (entries shortened)."""
    if isinstance(obj, PushRequest):
        span = f" {obj.entries[0].index}..{obj.entries[-1].index}" if obj.entries else ""
        return (f"Push{obj.type.name}(t{obj.term} seq{obj.seq} at {obj.index}/t{obj.index_term}"
                f"{span} commit {obj.commit_index})")
    if isinstance(obj, PushResponse):
        return (f"Push{obj.type.name}Resp(t{obj.term} {obj.code.name} seq{obj.seq} match {obj.match_index}"
                f" end {obj.end_index} hint {obj.hint_index})")
    if isinstance(obj, HaPush):
        span = f" {obj.entries[0].index}..{obj.entries[-1].index}" if obj.entries else ""
        return f"HaPush(e{obj.epoch} {obj.master}{' sync' if obj.sync else ''} end {obj.end_index}{span})"
    if isinstance(obj, HaReport):
        epochs = " ".join(f"e{s.epoch}@{s.first_index}" for s in obj.epochs)
        return f"HaReport(e{obj.epoch} {obj.master} offset {obj.offset} end {obj.end_index} epochs {epochs})"
    return repr(obj)


SIZE = 60  # events a violation report shows (`Simulation._result` asks for the last 60)


class Trace:
    """The last `size` events as (time, step, node, what, payload), stamped with `loop`'s time and step.

    Kept no longer than shown: each event holds on to its payload (a message, a response),
    and holding hundreds of them slows the whole run down by a few per cent."""

    def __init__(self, loop: Loop, size: int = SIZE) -> None:
        self._loop = loop
        self._events: deque[tuple[float, int, str, str, Any]] = deque(maxlen=size)

    def add(self, node: str, what: str, payload: Any = None) -> None:
        loop = self._loop
        self._events.append((loop.now, loop.step, node, what, payload))

    def lines(self, last: int | None = None) -> list[str]:
        events = list(self._events)[-last:] if last else list(self._events)
        return [f"{t:10.3f} #{step:<7} {node:>4} {what}" + (f" {describe(p)}" if p is not None else "")
                for t, step, node, what, p in events]
