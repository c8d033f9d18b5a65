"""The designs the simulator runs (`SimConfig.mode`), named as the harness names them
(harness/chaos/modes.py): `dledger` (Raft: `nodes.core`), and RocketMQ's classic master-slave
replication (`nodes.ha`) with a synchronous (`master-slave-sync`) or an asynchronous
(`master-slave-async`) master; see `nodes.sim.hamode` for how those runs go.

`simulate-many` rotates modes seed by seed (`parse_rotation`): `dledger*7,master-slave-sync`
(its default) runs seven DLedger seeds, then one master-slave-sync seed, and again.
"""

from __future__ import annotations

from nodes.ha.config import BrokerRole

DLEDGER = "dledger"
MASTER_ROLES = {"master-slave-sync": BrokerRole.SYNC_MASTER, "master-slave-async": BrokerRole.ASYNC_MASTER}
MODES = (DLEDGER, *MASTER_ROLES)
ROTATION = "dledger*7,master-slave-sync"  # simulate-many's default: one master-slave seed in eight


def check_mode(mode: str) -> str:
    """`mode` if it is one of MODES, else ValueError naming them."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
    return mode


def parse_rotation(text: str) -> tuple[str, ...]:
    """`dledger*2,master-slave-sync` -> (dledger, dledger, master-slave-sync): one mode a seed,
    in turn. ValueError on an unknown mode or a bad count."""
    rotation: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        name, _, count = part.partition("*")
        times = int(count) if count.isdigit() else -1 if count else 1
        if times < 1:
            raise ValueError(f"{part!r}: write a mode, or MODE*COUNT with a positive COUNT")
        rotation += [check_mode(name.strip())] * times
    return tuple(rotation)
