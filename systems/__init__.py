"""The systems under test, one package each (`harness.system.System`): `--system` picks one.

`SYSTEMS` names each with a line of help; `build(args)` makes the one a run's flags ask for,
with its options (the flags of `harness.chaos.flags` that belong to it). Only the chosen system's
package is imported.
"""

from __future__ import annotations

import argparse
import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.system import System

SYSTEMS = {
    "dledger": "our DLedger node: Raft, or RocketMQ's classic master-slave HA (--mode)",
    "nats": "NATS JetStream (nats-server 2.10.27 from Debian trixie): one file stream replicated on "
            "every node (at most 5)",
    "etcd": "etcd 3.4.23 (Debian bookworm): a static cluster, the log as keys created in revision order",
}


def build(args: argparse.Namespace) -> System:
    """The system `args.system` names, with the options `args` gives it."""
    module = importlib.import_module(f"systems.{args.system}")
    return module.from_args(args)
