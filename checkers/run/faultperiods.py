"""Which faults were in force when: the one rule that pairs the nemesis's history lines into faults.

The fault log, the report's fault bands and the op timeline's all read the faults from here
(docs/formats.md, "Fault periods"). A fault starts when its start op is invoked. A fault whose
family has a stop op ends when that op completes; an instant fault (no stop op) when its start
op completes. A fault never stopped, or whose start op never completed (an interrupted run),
lasts to the end of the history: the time of its last line, whatever its kind. A start of a
family already in force ends the fault before it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from checkers.jsonlines import NEMESIS
from checkers.run.reader import Line

NS = 1e9


@dataclass(frozen=True)
class FaultPeriod:
    """A fault in force from `start` to `end` (s since the history began): `fault`, its label."""

    fault: str
    start: float
    end: float
    value: Any
    family: str
    error: str | None = None  # its start op's
    stop_error: str | None = None


class FaultPairing:
    """Pairs the nemesis's ops into `periods` by the run's fault vocabulary (test.json's `faults`)."""

    def __init__(self, vocabulary: dict[str, dict[str, Any]]) -> None:
        self.vocabulary = vocabulary
        self.starts = {v["start"]: family for family, v in vocabulary.items()}
        self.stops = {v["stop"]: family for family, v in vocabulary.items() if v.get("stop")}
        self.nemesis_ops: list[dict[str, Any]] = []  # every completed nemesis op
        self.end = 0.0  # the history's last time, s
        self._found: list[FaultPeriod] = []
        self._open: dict[str, int] = {}  # family -> its fault in force, in _found
        self._invoked: dict[str, float] = {}  # f -> when its op was invoked

    @classmethod
    def of(cls, vocabulary: Any) -> FaultPairing:
        """The pairing by `vocabulary`; a run recorded without one is read with every family's."""
        if not isinstance(vocabulary, dict):
            from nemesis import catalogue

            vocabulary = catalogue.vocabulary(list(catalogue.FAMILIES))
        return cls(vocabulary)

    def label(self, family: str) -> str:
        return self.vocabulary[family].get("label") or family

    def on_op(self, line: Line, invoke: Line | None) -> None:
        t = line["time"] / NS
        self.end = max(self.end, t)
        if line["process"] != NEMESIS:
            return
        f = line["f"]
        if line["type"] == "invoke":
            self._invoked[f] = t
            return
        value = line.get("value")
        self.nemesis_ops.append({"time": round(t, 3), "f": f, "type": line["type"], "value": value})
        began = self._invoked.pop(f, t)
        if f in self.starts:
            self._start(self.starts[f], began, t, value, line.get("error"))
        elif f in self.stops and self.stops[f] in self._open:
            i = self._open.pop(self.stops[f])
            self._found[i] = replace(self._found[i], end=t, stop_error=line.get("error"))

    def done(self, pending: list[Line]) -> None:
        """Nothing to finish: `periods` holds from any point of the pass on."""

    def _start(self, family: str, began: float, t: float, value: Any, error: str | None) -> None:
        if family in self._open:
            i = self._open.pop(family)
            self._found[i] = replace(self._found[i], end=began)
        if self.vocabulary[family].get("stop"):
            self._open[family] = len(self._found)
        self._found.append(FaultPeriod(self.label(family), began, t, value, family, error))

    @property
    def periods(self) -> list[FaultPeriod]:
        """Every fault of the history read so far, by start op; those in force last to its end."""
        in_force = set(self._open.values())
        found = [replace(p, end=self.end) if i in in_force else p for i, p in enumerate(self._found)]
        return found + [FaultPeriod(self.label(self.starts[f]), began, self.end, None, self.starts[f])
                        for f, began in self._invoked.items() if f in self.starts]
