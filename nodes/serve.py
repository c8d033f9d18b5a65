"""Run one DLedger node: `serve --id n1 --peers n1=HOST:PORT,... --data-dir DIR`."""

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
from nodes.messages import ReadMode
from nodes.peers import parse_peers
from nodes.server import NodeServer, ServerConfig
from nodes.timing import parse_overrides, timing_profile

log = logging.getLogger("nodes.serve")

TIMING_NAMES = {"default": "fast", "fast": "fast", "dledger": "dledger"}
# A node allocates a few short-lived objects per entry (frames, messages, entries) and keeps
# thousands of recent entries alive: with the default threshold (700) the cyclic collector
# runs thousands of times a second under load and takes 10-15 % of the CPU.
GC_THRESHOLDS = (50_000, 20, 100)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--id", required=True, help="this node's id, one of --peers")
    parser.add_argument("--peers", required=True, help="the group: n1=HOST:PORT,n2=HOST:PORT,...")
    parser.add_argument("--data-dir", required=True, type=Path,
                        help="store, currterm, control files (and the logs unless --log-dir)")
    parser.add_argument("--log-dir", type=Path,
                        help="where node.log and events.jsonl go (default: the data dir)")
    parser.add_argument("--group", default="", help="DLedger group name (default: none)")
    parser.add_argument("--flush", choices=("async", "sync"), default="async",
                        help="async: DLedger's background flush; sync: fsync before ack (group commit)")
    parser.add_argument("--timing", choices=sorted(TIMING_NAMES), default="default",
                        help="default: failover in about a second; dledger: DLedger's 2 s heartbeats")
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
    segment = args.segment_mb << 20
    return ServerConfig(node=args.id, peers=peers, data_dir=args.data_dir, group=args.group, flush=args.flush,
                        timing=timing_profile(TIMING_NAMES[args.timing], **parse_overrides(args.timing_set)),
                        read_mode=ReadMode.parse(args.read_mode),
                        preferred_leader=args.preferred_leader, listen_host=listen,
                        data_segment_size=segment, index_segment_size=min(segment, 160 << 20) // 32 * 32,
                        log_dir=args.log_dir)


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
