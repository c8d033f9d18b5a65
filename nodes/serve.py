"""Run one node: `serve --id n1 --peers n1=HOST:PORT,... --data-dir DIR [--mode master-slave ...]`.

`--mode dledger` (the default) runs the DLedger consensus core; `--mode master-slave` runs
RocketMQ's classic master-slave replication (`nodes.ha.node`) over the same store and
wire: `--role SYNC_MASTER|ASYNC_MASTER|SLAVE`, and for a slave `--master` (the master's id
or its HOST:PORT in --peers).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import ipaddress
import logging
import signal
import sys
from pathlib import Path

from nodes.cliparse import EXIT_BAD_ARGS, EXIT_INTERNAL, EXIT_VALID
from nodes.events import setup_node_log
from nodes.ha.config import BrokerRole, HaConfig
from nodes.logic import FLUSH_FLAGS, Durability, durability
from nodes.messages import ReadMode
from nodes.peers import Address, parse_peers
from nodes.server import NodeServer, ServerConfig
from nodes.timing import parse_overrides, timing_profile

log = logging.getLogger("nodes.serve")

TIMING_NAMES = {"default": "fast", "fast": "fast", "dledger": "dledger"}
# A node allocates a few short-lived objects per entry (frames, messages, entries) and keeps
# thousands of recent entries alive: with the default threshold (700) the cyclic collector
# runs thousands of times a second under load and takes 10-15 % of the CPU.
GC_THRESHOLDS = (50_000, 20, 100)
MODES = ("dledger", "master-slave")
# master-slave flags: (flag, HaConfig field, type, help); None means "the mode's default"
HA_FLAGS = (
    ("--sync-timeout-ms", "sync_timeout_ms", float,
     "SYNC_MASTER: answer FLUSH_SLAVE_TIMEOUT when no slave confirmed an append within this (default 5000)"),
    ("--max-slave-lag", "max_slave_lag", int,
     "SYNC_MASTER: answer SLAVE_NOT_AVAILABLE when no live slave is this many entries close "
     "(default 10000)"),
    ("--suggest-slave-lag", "suggest_slave_lag", int,
     "a pull this many entries behind the master's end is told to pull from a slave (default 10000)"),
    ("--report-interval-ms", "report_interval_ms", float,
     "how often an idle slave reports its offset (default 500; it also reports after each flush)"),
    ("--ha-heartbeat-ms", "heartbeat_ms", float, "how often the master heartbeats its peers (default 200)"),
    ("--housekeeping-ms", "housekeeping_ms", float,
     "a slave or master not heard of for this long is gone (default 3000)"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--id", required=True, help="this node's id, one of --peers")
    parser.add_argument("--peers", required=True, help="the group: n1=HOST:PORT,n2=HOST:PORT,...")
    parser.add_argument("--data-dir", required=True, type=Path,
                        help="store, currterm, control files (and the logs unless --log-dir)")
    parser.add_argument("--log-dir", type=Path,
                        help="where node.log and events.jsonl go (default: the data dir)")
    parser.add_argument("--group", default="", help="DLedger group name (default: none)")
    parser.add_argument("--flush", choices=sorted(FLUSH_FLAGS), default="async",
                        help="async: DLedger's background flush (the default); sync: fsync before ack "
                             "(group commit)")
    parser.add_argument("--timing", choices=sorted(TIMING_NAMES), default="default",
                        help="default (also called fast; the default): failover in under half a second; "
                             "dledger: DLedger's 2 s heartbeats")
    parser.add_argument("--timing-set", action="append", default=[], metavar="FIELD=VALUE",
                        help="override one timing value of the profile, e.g. heartbeat_ms=500 (repeatable)")
    parser.add_argument("--preferred-leader", help="peer id that leadership is handed to when caught up")
    parser.add_argument("--read-mode", default="read-index",
                        help="read-index (default, linearizable), lease, committed, follower, unsafe")
    parser.add_argument("--listen", help="address to bind (default: this node's host in --peers if it is "
                                         "an IP address, else 0.0.0.0)")
    parser.add_argument("--segment-mb", type=int, default=1024,
                        help="data segment file size in MiB (default 1024)")
    parser.add_argument("--debug", action="store_true", help="debug lines in node.log")
    parser.add_argument("--mode", choices=MODES, default="dledger",
                        help="dledger (Raft, the default) or master-slave (RocketMQ's classic HA)")
    parser.add_argument("--role", help="master-slave: SYNC_MASTER, ASYNC_MASTER or SLAVE (required with "
                                        "--mode master-slave)")
    parser.add_argument("--master",
                        help="master-slave, for a SLAVE: the master, as its id or HOST:PORT in --peers")
    for flag, field, kind, text in HA_FLAGS:
        parser.add_argument(flag, dest=field, type=kind, help=f"master-slave: {text}")
    parser.add_argument("--debug-flush-delay-ms", type=float, default=0.0,
                        help="sleep this long before each group-commit flush (--flush sync, or any "
                             "master-slave node): a slow disk, for tests")


def _config(args: argparse.Namespace) -> ServerConfig:
    """The server config, or ValueError naming the bad argument."""
    peers = parse_peers(args.peers)
    if args.id not in peers:
        raise ValueError(f"--id {args.id!r} is not one of the peers {list(peers)}")
    if args.preferred_leader is not None and args.preferred_leader not in peers:
        raise ValueError(f"--preferred-leader {args.preferred_leader!r} is not one of the peers "
                         f"{list(peers)}")
    if args.segment_mb < 1:
        raise ValueError(f"--segment-mb must be at least 1, not {args.segment_mb}")
    host = peers[args.id].host
    if args.listen is None:
        try:
            ipaddress.ip_address(host)
            listen = host
        except ValueError:
            listen = "0.0.0.0"
    else:
        listen = args.listen
    if args.debug_flush_delay_ms < 0:
        raise ValueError(f"--debug-flush-delay-ms must not be negative, not {args.debug_flush_delay_ms}")
    segment = args.segment_mb << 20
    dur = durability(args.flush, args.mode == "master-slave")
    return ServerConfig(node=args.id, peers=peers, data_dir=args.data_dir, group=args.group, durability=dur,
                        timing=timing_profile(TIMING_NAMES[args.timing], **parse_overrides(args.timing_set)),
                        read_mode=ReadMode.parse(args.read_mode),
                        preferred_leader=args.preferred_leader, listen_host=listen,
                        data_segment_size=segment, index_segment_size=min(segment, 160 << 20) // 32 * 32,
                        log_dir=args.log_dir, ha=_ha_config(args, peers, dur),
                        flush_delay_ms=args.debug_flush_delay_ms)


def _ha_config(args: argparse.Namespace, peers: dict[str, Address], dur: Durability) -> HaConfig | None:
    """The master-slave settings (None in DLedger mode), or ValueError naming the bad argument."""
    values = {field: getattr(args, field) for _, field, _, _ in HA_FLAGS}
    given = [flag for flag, field, _, _ in HA_FLAGS if values[field] is not None]
    given += [flag for flag in ("--role", "--master") if getattr(args, flag[2:]) is not None]
    if args.mode == "dledger":
        if given:
            raise ValueError(f"{', '.join(given)} only apply to --mode master-slave")
        return None
    if args.preferred_leader is not None:
        raise ValueError("--preferred-leader does not apply to --mode master-slave (promote a slave instead)")
    if args.role is None:
        raise ValueError("--mode master-slave needs --role SYNC_MASTER, ASYNC_MASTER or SLAVE")
    role = BrokerRole.parse(args.role)
    master = _master_id(args.master, peers) if args.master is not None else None
    if role.is_master and master not in (None, args.id):
        raise ValueError(f"--role {role} is the master itself: --master {args.master!r} names another node")
    if not role.is_master and master is None:
        raise ValueError("--role SLAVE needs --master (the master's id or HOST:PORT in --peers)")
    if master == args.id and not role.is_master:
        raise ValueError(f"--master {args.master!r} is this node, which is a SLAVE")
    return HaConfig(role=role, master=master, ack=dur.ack,
                    **{k: v for k, v in values.items() if v is not None})


def _master_id(text: str, peers: dict[str, Address]) -> str:
    """The peer id `--master` names, by id or by HOST:PORT; ValueError if it names none."""
    if text in peers:
        return text
    for node, addr in peers.items():
        if str(addr) == text or f"{node}={addr}" == text:
            return node
    raise ValueError(f"--master {text!r} is neither a peer id nor a peer's HOST:PORT in {list(peers)}")


async def _serve(config: ServerConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await NodeServer(config).run(stop)


def run(args: argparse.Namespace) -> int:
    try:
        config = _config(args)
    except ValueError as exc:
        print(f"serve: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGS
    try:
        config.logs.mkdir(parents=True, exist_ok=True)
        setup_node_log(config.logs, config.node, logging.DEBUG if args.debug else logging.INFO)
        gc.freeze()  # what is loaded by now lives as long as the process: never scan it again
        gc.set_threshold(*GC_THRESHOLDS)
        asyncio.run(_serve(config))
    except OSError as exc:
        log.error("cannot serve: %s (is the port free and the data dir writable?)", exc)
        return EXIT_INTERNAL
    except Exception:
        log.exception("node failed")
        return EXIT_INTERNAL
    return EXIT_VALID
