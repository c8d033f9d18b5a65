"""Leader churn: hand leadership to a random follower, or change the preferred leader, at a high rate.

`transfer` asks the leader to hand over to a random follower (the system's way: DLedger's
LEADERSHIP_TRANSFER, etcd's move-leader, a NATS stream leader's step-down); the cluster's
answer (done, or refused and why) is the history value. `prefer`
writes a random node into every node's `preferred-leader` control file; the leader then
hands over to it once it is caught up (DLedger's preferred leader). Instant faults, fired
every `--churn-interval` seconds while a churn slot lasts; healing clears the preference.
"""

from __future__ import annotations

import random
import shlex
from typing import Any

from nemesis.base import Family, Nodes, Option, comma_list, positive
from nodes.controlfile import PREFERRED_FILE

MODES = ("transfer", "prefer")
TRANSFER_TIMEOUT_S = 3.0



class ChurnFault:
    """One leadership move per `start`; see the module doc."""

    def __init__(self, nodes: Nodes, modes: tuple[str, ...]) -> None:
        self.nodes = nodes
        self.modes = modes

    def _path(self) -> str:
        return shlex.quote(f"{self.nodes.data_dir}/{PREFERRED_FILE}")

    def start(self, rng: random.Random) -> dict[str, Any]:
        mode = rng.choice(self.modes)
        names = self.nodes.names
        leader = self.nodes.leader()
        if mode == "prefer":
            chosen = rng.choice(names)
            for node in names:
                self.nodes.exec(node, f"printf %s {chosen} > {self._path()}.tmp && mv {self._path()}.tmp "
                                      f"{self._path()}")
            return {"mode": mode, "leader": leader, "preferred": chosen, "targets": [chosen]}
        chosen = rng.choice([n for n in names if n != leader])
        value: dict[str, Any] = {"mode": mode, "leader": leader, "to": chosen,
                                 "targets": sorted({chosen, leader} - {None})}
        value.update(self.nodes.transfer(chosen, TRANSFER_TIMEOUT_S))
        return value

    def stop(self) -> dict[str, Any]:
        return {"targets": []}

    def heal(self) -> None:
        for node in self.nodes.names:
            self.nodes.exec(node, f"rm -f {self._path()} {self._path()}.tmp")

    def leftovers(self) -> list[str]:
        left = []
        for node in self.nodes.names:
            out = self.nodes.exec(node, f"cat {self._path()} 2>/dev/null || true").strip()
            if out:
                left.append(f"{node}: preferred leader {out} still set")
        return left


CHURN = Family(
    name="churn", label="leader churn", start_f="transfer-leader", stop_f=None,
    make=lambda nodes, o: ChurnFault(nodes, o["churn_modes"]),
    help="move leadership to a random follower, or change the preferred leader, many times a slot",
    options=(
        Option("churn-modes", "transfer,prefer", f"leader churn modes: {', '.join(MODES)}", choices=MODES,
               parse=comma_list),
        Option("churn-interval", "1", "seconds between leadership moves during a churn slot",
               parse=positive),
    ),
    weight=0.7, repeat="churn_interval")
