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

`isolate-lose` first cuts the leader (master) off from its peers for `--recipe-step-ms`
(clients still reach it), then loses it: what it acknowledged alone is then gone unless the
design never acknowledges what its peers lack. DLedger and a SYNC_MASTER must lose nothing
there; an ASYNC_MASTER loses every write of that step (a must-fail control).
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from typing import Any

from nemesis import grudge
from nemesis.base import Family, Nodes
from nemesis.partition import CHAIN_CLEANUP, apply_grudge, heal_all, lift_grudge, rules_left
from nemesis.process import ProcessFault, not_running, undo_each
from nemesis.recipes import STEP, Steps, process_leftovers
from nemesis.targets import choose, targets_option
from nodes.client import Client, ClientError, commit_index_of

log = logging.getLogger(__name__)
MASTER_ROLES = ("SYNC_MASTER", "ASYNC_MASTER")


def lose(nodes: Nodes, victims: list[str], timeout: float = 3.0) -> dict[str, Any]:
    """Kill and wipe `victims`; promote the most advanced live slave when the master was among
    them (master-slave mode). What was done, for the fault's history value."""
    with Client(nodes.network_peers(), timeout=timeout) as client:
        masters = _masters(nodes, client, timeout)
        for node in victims:
            nodes.kill(node)
            nodes.wipe(node)
        if masters and set(masters) <= set(victims):
            return {"promoted": _promote(nodes, client, set(victims), timeout)}
    return {}


def _masters(nodes: Nodes, client: Client, timeout: float) -> list[str]:
    """The nodes that say they are a master (master-slave mode; [] in DLedger mode)."""
    masters = []
    for node in nodes.names:
        with contextlib.suppress(ClientError):
            if client.metadata(node=node, timeout=timeout).broker_role in MASTER_ROLES:
                masters.append(node)
    return masters


def _promote(nodes: Nodes, client: Client, exclude: set[str], timeout: float) -> dict[str, Any]:
    """Promote the live slave whose durable log reaches furthest; what was done."""
    ends = {node: end for node in nodes.names
            if node not in exclude and (end := commit_index_of(client, node, timeout)) is not None}
    if not ends:
        return {"node": None, "ends": ends, "error": "no slave answered: nothing to promote"}
    chosen = max(ends, key=lambda n: (ends[n], n))
    try:
        epoch = client.promote(chosen, timeout=timeout).epoch
    except ClientError as e:
        log.warning("promoting %s failed: %s", chosen, e)
        return {"node": chosen, "ends": ends, "error": str(e)}
    return {"node": chosen, "epoch": epoch, "ends": ends}


class IsolateLose:
    """Cut the leader off from its peers for a step, then lose it; see the module doc."""

    def __init__(self, nodes: Nodes, step_s: float) -> None:
        self.nodes = nodes
        self.step_s = step_s
        self.lost: list[str] = []

    def start(self, rng: random.Random) -> dict[str, Any]:
        steps = Steps()
        names = self.nodes.names
        leader = self.nodes.leader()
        victim = choose("leader", names, leader, rng)[0]
        drops = grudge.grudge(grudge.components([[victim], [n for n in names if n != victim]]))
        apply_grudge(self.nodes, drops)
        steps.add("isolate", [victim], grudge=drops)
        time.sleep(self.step_s)  # the leader takes writes its peers never see
        done = lose(self.nodes, [victim])
        self.lost.append(victim)
        steps.add("lose", [victim], **done)
        lift_grudge(self.nodes, drops)
        steps.add("heal", names)
        return {"leader": leader, "steps": steps.done, "targets": [victim], **done}

    def stop(self) -> dict[str, Any]:
        return undo_each(self.lost, self.nodes.start)

    def heal(self) -> None:
        heal_all(self.nodes)
        for node in self.nodes.names:
            self.nodes.start(node)
        self.lost.clear()

    def leftovers(self) -> list[str]:
        return rules_left(self.nodes) + process_leftovers(self.nodes)


LOSE_NODE = Family(
    name="lose-node", label="node lost", start_f="lose-node", stop_f="replace-node",
    make=lambda nodes, o: ProcessFault(nodes, o["lose_node_targets"], lambda victims: lose(nodes, victims),
                                       nodes.start, not_running(nodes)),
    help="SIGKILL the targets and wipe their data dir (a machine or disk lost for good), promoting the "
         "most advanced slave when a master-slave master is lost; then start them again, empty",
    options=(targets_option("lose-node", "leader,one"),), weight=0.5, in_all=False)

ISOLATE_LOSE = Family(
    name="isolate-lose", label="isolated leader lost", start_f="start-isolate-lose",
    stop_f="replace-isolated",
    make=lambda nodes, o: IsolateLose(nodes, o["recipe_step_ms"] / 1000),
    help="cut the leader (master) off from its peers for a step (clients still reach it), then lose it as "
         "lose-node does; start it again, empty, at stop",
    options=(STEP,), weight=0.5, needs=frozenset({"root", "iptables"}), in_all=False,
    host_cleanup=(CHAIN_CLEANUP,))
