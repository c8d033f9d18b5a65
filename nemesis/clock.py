"""Clock faults through each node's clock control file (`<data dir>/clock-offset-ms`).

Containers share the host kernel's clock, so real skew is impossible; every timer of the
node reads one clock object that adds this file's offset (nodes/clock.py), and the node
records each offset it applies in `events.jsonl` (`{"event": "clock", "offset_ms"}`) and
reports it in its metadata. Modes: `bump` sets a random offset of a quarter to all
of `--clock-max-skew-ms` on each target, in the direction that bites: the leader's clock
goes back (a clock that steps back freezes the node's timers: no heartbeat round, no
step-down, no lease expiry; under load its pushes of new entries keep its followers following,
so this alone rarely changes the leader), a follower's forward (its election timeout fires at
once and it stands for election: that deposes the leader); `strobe` flips the targets' offset between
that and 0 every `--clock-strobe-ms` until the fault stops (a detached loop on the node);
stopping, and healing, kills any strobe loop and removes the file (offset 0).
"""

from __future__ import annotations

import random
import shlex
from typing import Any

from nemesis.base import Family, HostCleanup, Nodes, Option, comma_list, positive
from nemesis.process import UndoEach
from nemesis.targets import pick, targets_option
from nodes.clock import OFFSET_FILE

STROBE_PID = "/run/dledger-clock-strobe.pid"
MODES = ("bump", "strobe")
# A strobe loop left running (its offset file is in the node's data dir).
STROBE_CLEANUP = HostCleanup(
    clean=f'if [ -f {STROBE_PID} ]; then kill "$(cat {STROBE_PID})" 2>/dev/null; rm -f {STROBE_PID}; '
          'echo "stopped the clock strobe"; fi',
    listing=f"ls -d {STROBE_PID} 2>/dev/null | sed 's/^/file: /'")



class ClockFault(UndoEach):
    """Skews the targets' clocks by a seeded amount; see the module doc."""

    def __init__(self, nodes: Nodes, targets: tuple[str, ...], modes: tuple[str, ...], max_skew_ms: float,
                 strobe_ms: float) -> None:
        self.nodes = nodes
        self.targets = targets
        self.modes = modes
        self.max_skew_ms = max_skew_ms
        self.strobe_ms = strobe_ms
        self.hurt = []  # the nodes skewed since the last stop

    def _path(self) -> str:
        return shlex.quote(f"{self.nodes.data_dir}/{OFFSET_FILE}")

    def _write(self, offset_ms: float) -> str:
        """A shell command that sets the offset atomically (a reader never sees half a number)."""
        return f"printf %s {offset_ms:.0f} > {self._path()}.tmp && mv {self._path()}.tmp {self._path()}"

    def start(self, rng: random.Random) -> dict[str, Any]:
        mode = rng.choice(self.modes)
        spec, victims = pick(self.nodes, self.targets, rng)
        leader = self.nodes.leader()
        offsets = {}
        for node in victims:
            # at least a quarter of the maximum, so every bump moves timers past their timeouts
            offset = (-1 if node == leader else 1) * rng.uniform(self.max_skew_ms / 4, self.max_skew_ms)
            offsets[node] = round(offset)
            if mode == "bump":
                self.nodes.exec(node, self._write(offset))
            else:
                period = self.strobe_ms / 1000
                loop = (f"while :; do {self._write(offset)}; sleep {period:.3f}; "
                        f"{self._write(0)}; sleep {period:.3f}; done")
                self.nodes.exec(node, f"setsid sh -c {shlex.quote(loop)} > /dev/null 2>&1 < /dev/null & "
                                      f"echo $! > {STROBE_PID}")
            if node not in self.hurt:
                self.hurt.append(node)
        value: dict[str, Any] = {"mode": mode, "target": spec, "targets": victims, "leader": leader,
                                 "offsets_ms": offsets}
        if mode == "strobe":
            value["period_ms"] = self.strobe_ms
        return value

    def _undo(self, node: str) -> None:
        """Reset `node`'s clock: stop its strobe, remove its offset file."""
        self.nodes.exec(node, f"if [ -f {STROBE_PID} ]; then kill $(cat {STROBE_PID}) 2>/dev/null; "
                              f"rm -f {STROBE_PID}; fi; rm -f {self._path()} {self._path()}.tmp")

    def _leftover(self, node: str) -> str | None:
        out = self.nodes.exec(node, f"cat {self._path()} 2>/dev/null; "
                                    f"[ -f {STROBE_PID} ] && echo ' strobe running'; true").strip()
        return f"{node}: clock offset file left: {out}" if out else None


CLOCK = Family(
    name="clock", label="clock skew", start_f="bump-clock", stop_f="reset-clock",
    make=lambda nodes, o: ClockFault(nodes, o["clock_targets"], o["clock_modes"], o["clock_max_skew_ms"],
                                     o["clock_strobe_ms"]),
    help="skew the targets' node clocks (bump, or strobe back and forth), then reset them",
    steps_clocks=True,
    options=(
        targets_option("clock", "leader,one,minority"),
        Option("clock-modes", "bump,strobe", f"clock fault modes to draw from: {', '.join(MODES)}",
               choices=MODES, parse=comma_list),
        Option("clock-max-skew-ms", "5000", "largest clock offset a clock fault applies, ms", parse=positive),
        Option("clock-strobe-ms", "100", "how long a strobing clock stays at each offset, ms",
               parse=positive),
    ),
    weight=1.0, needs=frozenset({"root"}),  # the strobe loop's pid file is in /run
    host_cleanup=(STROBE_CLEANUP,))
