"""`lagging-majority`: the nodes that hold the newest entries lose power, and a majority that
lacks them decides.

Start partitions a minority off (never the leader) for a step, so the leader and the other
followers commit entries the minority never sees; then cuts the power of every node outside
the minority at one instant (as `power-loss` does: each keeps only what it fsynced), heals the
partition, and powers ONE of them on again, drawn at random (the old leader or one of its
followers). That node and the lagging minority are a majority. Raft's argument says it is
safe: every committed entry sits fsynced on a majority, so on the returning node, whose log
wins the election. A node that counted an entry toward a quorum before it was fsynced (the
leader's own copy, or a follower's acknowledgement), or a quorum one node too small, has
acknowledged entries that only the nodes still down hold: the new majority elects a leader
without them and writes over them, and they are gone when the others come back. The start
waits (bounded) for that leader. Stop powers the others on; they recover and rejoin.

The start value names the `minority`, the nodes `cut` (with what each lost, as power-loss's
value), the one `back`, and the `new_leader` (null when none came within the wait).
"""

from __future__ import annotations

import random
from typing import Any

from nemesis.base import Family, Nodes
from nemesis.partition import CHAIN_CLEANUP, heal_all, lift_grudge, rules_left
from nemesis.power import LAZYFS_CLEANUP, PowerFault
from nemesis.recipes import LEADER_WAIT_S, STEP, Steps, await_leader, lagging_minority, step_s


class LaggingMajorityFault:
    """Partition a minority, cut the others' power, bring one back to the minority; see the module doc."""

    def __init__(self, nodes: Nodes, step: float, wait_s: float = LEADER_WAIT_S) -> None:
        self.nodes = nodes
        self.step = step
        self.wait_s = wait_s
        self.power = PowerFault(nodes, ())

    def start(self, rng: random.Random) -> dict[str, Any]:
        steps = Steps()
        leader, minority, fresh, drops = lagging_minority(self.nodes, rng, self.step, steps)
        cut = self.power.cut(fresh)
        steps.add("power-off", fresh, late_ms=cut["late_ms"])
        lift_grudge(self.nodes, drops)
        steps.add("heal", minority)
        back = rng.choice(fresh)
        self.power.restore([back])
        steps.add("power-on", [back])
        majority = {back, *minority}
        new_leader = await_leader(self.nodes, lambda node: node in majority, self.wait_s)
        return {"leader": leader, "minority": minority, "cut": fresh, "back": back, "new_leader": new_leader,
                "dropped": cut["dropped"], "steps": steps.done, "targets": self.nodes.names}

    def stop(self) -> dict[str, Any]:
        return self.power.stop()

    def heal(self) -> None:
        heal_all(self.nodes)
        self.power.heal()

    def leftovers(self) -> list[str]:
        return rules_left(self.nodes) + self.power.leftovers()


LAGGING_MAJORITY = Family(
    name="lagging-majority", label="lagging majority", start_f="start-lagging-majority",
    stop_f="stop-lagging-majority",
    make=lambda nodes, options: LaggingMajorityFault(nodes, step_s(options)),
    help="partition a minority off for a step, cut the power of every other node, heal, power one of them "
         "on: it and the lagging minority must keep every acknowledged entry; stop powers the rest on",
    options=(STEP,), needs=frozenset({"fuse", "root", "agents", "iptables"}),
    host_cleanup=(CHAIN_CLEANUP, LAZYFS_CLEANUP))
