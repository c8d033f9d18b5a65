"""Run one seeded simulation of a cluster (DLedger, or master-slave with `--mode`) and print its
summary (exit 1 on a violation)."""

from __future__ import annotations

import argparse

from nodes.cliparse import EXIT_INVALID, EXIT_VALID, UsageError
from nodes.logic import FLUSH_FLAGS, Durability, durability
from nodes.sim.cluster import run_seed
from nodes.sim.config import SimConfig
from nodes.sim.faults import FAULTS, MASTER_SLAVE_FAULTS, mode_faults, parse_faults
from nodes.sim.modes import DLEDGER, MODES
from nodes.timing import PROFILES


def cluster_size(text: str) -> int:
    """A node count between 1 and 9."""
    n = int(text)
    if not 1 <= n <= 9:
        raise argparse.ArgumentTypeError(f"--nodes must be between 1 and 9, got {n}")
    return n


def fault_list(text: str) -> tuple[str, ...] | None:
    """`--faults`: the faults named (of any mode), or None for `all` (every fault of the mode)."""
    try:
        return None if text == "all" else parse_faults(text, None)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def flush_policy(flag: str) -> Durability:
    """The simulator's reading of `--flush`: a DLedger node's, in every mode (so a master-slave
    node under `async` leaves flushing to its store's thread, where the server's flushes by
    group commit)."""
    return durability(flag, master_slave=False)


def positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {n}")
    return n


def add_common(parser: argparse.ArgumentParser) -> None:
    """Options shared by `simulate` and `simulate-many`."""
    parser.add_argument("--steps", type=positive, default=4000,
                        help="events in the fault phase (default 4000)")
    parser.add_argument("--flush", choices=FLUSH_FLAGS, default="sync",
                        help="store flush policy: sync (fsync before ack) or async (default sync)")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="fast",
                        help="timing profile: fast (failover in about a second) or dledger (default fast)")
    parser.add_argument("--clients", type=positive, default=3,
                        help="concurrent simulated clients (default 3)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, required=True,
                        help="the seed; the same seed replays the same run")
    parser.add_argument("--nodes", type=cluster_size, default=5, help="cluster size (default 5)")
    parser.add_argument("--mode", choices=MODES, default=DLEDGER,
                        help="the design: dledger (Raft, the default) or RocketMQ master-slave with a "
                             "SYNC_MASTER or an ASYNC_MASTER")
    parser.add_argument("--faults", type=fault_list, default=None,
                        help=f"comma list of faults (dledger: {', '.join(FAULTS)}; master-slave: "
                             f"{', '.join(MASTER_SLAVE_FAULTS)}), `all` (the mode's, default) or `none`")
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    mode = getattr(args, "mode", DLEDGER)  # a caller's namespace may have none: DLedger
    faults = mode_faults(mode) if args.faults is None else args.faults
    policy = flush_policy(args.flush)
    try:
        config = SimConfig(seed=args.seed, nodes=args.nodes, steps=args.steps, faults=faults,
                           durability=policy, profile=args.profile, clients=args.clients, mode=mode)
    except ValueError as exc:
        raise UsageError(f"--faults: {exc}") from None
    result = run_seed(config)
    print(result.summary())
    return EXIT_VALID if result.violation is None else EXIT_INVALID
