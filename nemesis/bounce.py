"""Crash-restart at once: SIGKILL a node and start it again straight away, many times a slot.

`kill` keeps its victim down until the fault stops, seconds later, when the cluster has long
settled. A node that comes back at once lands in the middle of the election its death (or an
earlier bounce) started, holding only what it had saved: a vote it granted but did not make
durable is forgotten while the candidates are still asking, and a candidate that voted for
itself stands again. Fired every `--bounce-interval` seconds while a bounce slot lasts; each
firing bounces the nodes of one `--bounce-targets` draw (by default the leader or one node:
the leader's death starts an election, the next firing may hit a voter in it).
"""

from __future__ import annotations

import random
from typing import Any

from nemesis.base import Family, Nodes, Option, positive
from nemesis.process import StartedWithin
from nemesis.targets import pick, targets_option


class BounceFault(StartedWithin):
    """One crash-restart of one target draw per `start`; see the module doc."""

    def __init__(self, nodes: Nodes, targets: tuple[str, ...]) -> None:
        self.nodes = nodes
        self.targets = targets

    def start(self, rng: random.Random) -> dict[str, Any]:
        spec, victims = pick(self.nodes, self.targets, rng)
        for node in victims:
            self.nodes.kill(node)
        for node in victims:  # not waiting until it listens: the next firing may come first
            self.nodes.start(node, wait=0)
        return {"target": spec, "targets": victims}


BOUNCE = Family(
    name="bounce", label="crash-restart", start_f="bounce", stop_f=None,
    make=lambda nodes, o: BounceFault(nodes, o["bounce_targets"]),
    help="SIGKILL the targets' node process and start it again at once, many times a slot "
         "(restarts that land inside an election)",
    options=(
        targets_option("bounce", "leader,one"),
        Option("bounce-interval", "0.7", "seconds between crash-restarts during a bounce slot",
               parse=positive),
    ),
    weight=1.0, repeat="bounce_interval")
