"""Master-slave runs of the simulator (`SimConfig.mode` master-slave-sync or -async): the
`HaNode` logics (`nodes.ha`) on the same driver, disks, network and clients as DLedger's.

The nodes start as the harness starts them (harness/chaos/modes.py `node_args`): n1 the master,
with the mode's flavour (SYNC_MASTER or ASYNC_MASTER), the others its slaves. Their HA
timings and limits are drawn per run (`HaMode.__init__`): a SYNC_MASTER's slave wait short
enough in some runs to time out under faults, small in-flight windows and batches, a small
enough `max_slave_lag` in some runs for a lagging slave not to count.

The faults are DLedger's but transfer and votecrash (`nodes.sim.faults`), and failover, on a
schedule and a generator of its own: the operator's answer to a lost master, as the
harness's lose-node and isolate-lose faults do it (nemesis/lose.py): kill the master (losing
power half the time), promote the live slave whose durable offset (its commit index, what
`commit_index_of` asks) reaches furthest, as `client_promote` with the flavour it knows, and
bring the old master back later as that slave's slave: its disk lost half the time (the
harness wipes it), its `currterm` naming the new master (and its flavour) at its epoch and
its command line `--role SLAVE --master <new master>`, as an operator reconfigures a
demoted master so that it cannot take writes again. Only a slave that follows the latest epoch a master took
is promoted (an operator promotes a slave in sync with the master, not one cut off from it
since before the master's last restart: such a slave would take an epoch that master took
already), and only one that is running and not paused.

After healing, the master (promoted or not) must take appends again and every slave catch
up (`nodes.sim.liveness` waits for that as for a DLedger leader). The properties checked are
in `nodes.sim.hainvariants`.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from nodes.election import Role
from nodes.ha.config import BrokerRole, HaConfig, MasterVote
from nodes.ha.node import HaNode
from nodes.logic import RoleChange
from nodes.messages import ReadMode
from nodes.sim.disk import DIRECTORY
from nodes.sim.faults import FAILOVER_DOWN_MS
from nodes.sim.hainvariants import HaInvariants
from nodes.sim.modes import MASTER_ROLES
from nodes.store.logstore import LogStore
from nodes.store.termfile import TermState, save_term

if TYPE_CHECKING:
    from nodes.sim.nodes import Nodes

SYNC_TIMEOUTS = (2000.0, 400.0, 100.0)  # ms a SYNC_MASTER append waits for a slave, drawn per run
HOUSEKEEPING_MS = (3000.0, 1000.0)  # when a slave or a master counts as gone, drawn per run
SLAVE_LAGS = (10000, 8)  # entries a slave may lag and still count as available, drawn per run
BATCH_ENTRIES = (1, 8, 64, 1024)  # entries per push, drawn per run
INFLIGHT_ENTRIES = (4, 64, 4096)  # entries pushed beyond a slave's log end, drawn per run
READ_MODES = (ReadMode.COMMITTED, ReadMode.FOLLOWER, ReadMode.UNSAFE)  # the harness's for this mode


class HaMode:
    """The master-slave side of one simulation: the nodes' configurations, failovers, checks."""

    read_modes = READ_MODES

    def __init__(self, nodes: Nodes, rng: random.Random) -> None:
        cfg, names = nodes.config, nodes.names
        self._nodes = nodes
        self.flavour = MASTER_ROLES[cfg.mode]
        slave = HaConfig(
            BrokerRole.SLAVE, names[0], cfg.durability.ack,
            sync_timeout_ms=rng.choice(SYNC_TIMEOUTS),
            housekeeping_ms=rng.choice(HOUSEKEEPING_MS),
            max_slave_lag=rng.choice(SLAVE_LAGS),
            max_batch_entries=rng.choice(BATCH_ENTRIES),
            max_inflight_entries=rng.choice(INFLIGHT_ENTRIES),
        )
        self.configs = dict.fromkeys(names, slave)  # each node's command line
        self.configs[names[0]] = dataclasses.replace(slave, role=self.flavour, master=None)
        self.master = names[0]  # the node an operator made master last
        self.checks = HaInvariants(nodes.disks, self.flavour is BrokerRole.SYNC_MASTER, cfg.durability.ack)
        # a node answers an append by its slave wait (or its own fsync's), reads and transfers at once
        self.timeouts = (slave.sync_timeout_ms, 0.0, 0.0)
        self.liveness_ms = max(20000.0, 10 * slave.housekeeping_ms)

    def node(self, name: str, store: LogStore, state: TermState, now: float) -> HaNode:
        """The logic of node `name` (re)starting on `store` with its persisted epoch and master."""
        return HaNode(name, self._nodes.names, store, self.configs[name], state.term, state.vote_for, now)

    def failover(self, rng: random.Random, next_rid: Callable[[], int]) -> None:
        """Lose the master, promote the most advanced live slave that follows the latest epoch,
        and have the old master come back as its slave (see the module doc); the draws are
        `rng`'s (failover's own), the promotion's request id `next_rid`'s."""
        nodes, old = self._nodes, self.master
        epoch = max(nodes.inv.leaders, default=0)
        candidates = {n: c.commit_index for n, c in nodes.cores.items()
                      if n != old and c is not None and c.term == epoch and n not in nodes.paused}
        if not candidates:
            nodes.stats["failover-skipped"] += 1
            return
        nodes.stats["fault-failover"] += 1
        nodes.crash(old, rng.random() < 0.5, rng.uniform(*FAILOVER_DOWN_MS), rng)  # if it is up
        chosen = max(candidates, key=lambda n: (candidates[n], n))
        lost = self.checks.on_failover(chosen, candidates)
        if lost:
            nodes.stats["failover-lost-acked"] += lost
        node = nodes.cores[chosen]
        assert isinstance(node, HaNode)
        node.client_promote(next_rid(), "", nodes.local(chosen))
        nodes.drain(chosen)
        wipe = rng.random() < 0.5
        nodes.trace.add("sim", f"failover: {old} lost{' with its disk' if wipe else ''}, "
                        f"{chosen} promoted at epoch {node.term} (offsets {candidates})")
        self._demote(old, chosen, node.term, wipe)
        self.master = chosen

    def _demote(self, old: str, master: str, epoch: int, wipe: bool) -> None:
        """Reconfigure the stopped `old` master as a slave of `master` (which took `epoch`)."""
        disk = self._nodes.disks[old]
        if wipe:
            disk.wipe()
            disk.fs.make_dirs(DIRECTORY)
        save_term(DIRECTORY, TermState(epoch, MasterVote(master, self.flavour).encode()), fs=disk.fs)
        self.configs[old] = dataclasses.replace(self.configs[old], role=BrokerRole.SLAVE, master=master)

    def on_role(self, node: str, change: RoleChange) -> None:
        """`node` changed role (a new master's epoch is checked already)."""
        logic = self._nodes.cores[node]
        if change.role is Role.LEADER and logic is not None:
            self.checks.on_master(node, change.term, logic.commit_index)
        else:
            self.checks.on_stop(node)

    def on_crash(self, node: str, power_loss: bool) -> None:
        self.checks.on_stop(node)
        if power_loss and node == self.master:
            self.checks.on_power_loss(node)
