"""Thinning a stream of plot points to a budget, in one pass and bounded memory."""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Thinned(Generic[T]):
    """Keeps every `stride`-th item offered (the 1st, the 1+stride-th, ...), doubling the
    stride whenever `2 * budget` are kept, so between `budget` and `2 * budget` stay whatever
    the stream's length. `items` ends with the last item offered, kept or not.
    """

    def __init__(self, budget: int) -> None:
        self.budget = max(1, budget)
        self.stride = 1
        self.seen = 0
        self._kept: list[T] = []
        self._last: T | None = None

    def add(self, item: T) -> None:
        if self.seen % self.stride == 0:
            self._kept.append(item)
            if len(self._kept) >= 2 * self.budget:
                self._kept = self._kept[::2]
                self.stride *= 2
        self.seen += 1
        self._last = item

    @property
    def items(self) -> list[T]:
        if self._last is not None and (not self._kept or self._kept[-1] is not self._last):
            return [*self._kept, self._last]
        return list(self._kept)
