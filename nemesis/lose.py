"""Losing a node for good: SIGKILL it and wipe its data dir (store, term and vote, checkpoint),
as when a machine or its disk is gone; stop starts it again, empty.

What follows depends on the design. A DLedger node that comes back empty has also
forgotten its vote: Raft assumes stable storage, so it may vote a second time in a term
it voted in (the election-safety check sees two leaders of a term if that happens). In
master-slave mode nothing elects a new master: when the lost node was the master, the
harness acts as RocketMQ's operator and promotes the most advanced live slave (the one
whose durable log reaches furthest) at once; the history value of the fault says whom,
at which epoch, and what every slave held (`promoted`). The wiped node later starts with
its old command line, learns of the newer master from its peers and follows it.
"""

from __future__ import annotations

import contextlib
import logging
import random
from typing import Any

from nemesis.base import Family, Nodes
from nemesis.process import ProcessFault, not_running
from nemesis.targets import pick, targets_option
from nodes.client import Client, ClientError

log = logging.getLogger(__name__)
MASTER_ROLES = ("SYNC_MASTER", "ASYNC_MASTER")


class LoseNode(ProcessFault):
    """Kill and wipe the targets, promote a slave when the master was among them; see the module doc."""

    def __init__(self, nodes: Nodes, targets: tuple[str, ...], timeout: float = 3.0) -> None:
        super().__init__(nodes, targets, self._lose, nodes.start, not_running(nodes))
        self.timeout = timeout

    def _lose(self, node: str) -> None:
        self.nodes.kill(node)
        self.nodes.wipe(node)

    def start(self, rng: random.Random) -> dict[str, Any]:
        spec, victims = pick(self.nodes, self.targets, rng)
        with Client(self.nodes.network_peers(), timeout=self.timeout) as client:
            masters = self._masters(client)
            for node in victims:
                self._lose(node)
                if node not in self.hurt:
                    self.hurt.append(node)
            value: dict[str, Any] = {"target": spec, "targets": victims}
            if masters and set(masters) <= set(victims):
                value["promoted"] = self._promote(client, exclude=set(victims))
        return value

    def _masters(self, client: Client) -> list[str]:
        """The nodes that say they are a master (master-slave mode; [] in DLedger mode)."""
        masters = []
        for node in self.nodes.names:
            with contextlib.suppress(ClientError):
                if client.metadata(node=node, timeout=self.timeout).broker_role in MASTER_ROLES:
                    masters.append(node)
        return masters

    def _promote(self, client: Client, exclude: set[str]) -> dict[str, Any]:
        """Promote the live slave whose durable log reaches furthest; what was done."""
        ends: dict[str, int] = {}
        for node in self.nodes.names:
            if node not in exclude:
                with contextlib.suppress(ClientError):
                    got = client.get(0, 0, node=node, mode="follower", timeout=self.timeout)
                    ends[node] = got.commit_index
        if not ends:
            return {"node": None, "ends": ends, "error": "no slave answered: nothing to promote"}
        chosen = max(ends, key=lambda n: (ends[n], n))
        try:
            epoch = client.promote(chosen, timeout=self.timeout).epoch
        except ClientError as e:
            log.warning("promoting %s failed: %s", chosen, e)
            return {"node": chosen, "ends": ends, "error": str(e)}
        return {"node": chosen, "epoch": epoch, "ends": ends}


LOSE_NODE = Family(
    name="lose-node", label="node lost", start_f="lose-node", stop_f="replace-node",
    make=lambda nodes, o: LoseNode(nodes, o["lose_node_targets"]),
    help="SIGKILL the targets and wipe their data dir (a machine or disk lost for good), promoting the "
         "most advanced slave when a master-slave master is lost; then start them again, empty",
    options=(targets_option("lose-node", "leader,one"),), weight=0.5, in_all=False)
