"""Command-line tools against a group: `append`, `get`, `metadata`, `transfer`, `pull`, `promote`.

`pull` (a consumer's read by offset) and `promote` (make a slave the master) are for a
master-slave group (`serve --mode master-slave`).

One module serves the commands: `add_arguments` reads which one from the parser's
prog, `run` from `args.command`. Results print as JSON lines on stdout; errors go to
stderr. Exit codes: 0 done, 1 definitely failed (nothing happened), 2 outcome unknown
(an append may have landed), 254 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys

from nodes.client import Client, DefiniteFailure, IndeterminateFailure
from nodes.cliparse import EXIT_BAD_ARGS, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID
from nodes.ha.config import BrokerRole
from nodes.messages import ReadMode
from nodes.payload import payload_id
from nodes.peers import parse_peers

# What each command does: its `--help` and its line in `python -m nodes --help` (read by
# `nodes.cliparse.summary`).
SUMMARIES = {
    "append": "Append the entry --data (--count times) through the leader, or the master; print each "
              "one's log index, term and the node that took it.",
    "get": "Read the committed entries --index..--last from the leader, or from --node alone, in a read "
           "mode; print one JSON line per entry.",
    "metadata": "Ask the group who leads: print the leader, term, the answering node's role and the peers "
                "(in master-slave mode also its broker role and the slaves).",
    "transfer": "Hand leadership to the peer --to (DLedger's leadership transfer); print the new leader "
                "and term.",
    "pull": "Pull up to --max entries from log index --offset as RocketMQ's pull consumer does (a "
            "master-slave group), from the master or --node; print one JSON line per entry.",
    "promote": "Make the slave --node the master of a master-slave group (the operator's step when the "
               "master is lost); print the new master and its epoch.",
}


def _peers_arg(text: str) -> object:
    try:
        return parse_peers(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _read_mode_arg(text: str) -> str:
    try:
        return ReadMode.parse(text).label
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _master_role_arg(text: str) -> str:
    try:
        role = BrokerRole.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    if not role.is_master:
        raise argparse.ArgumentTypeError(f"promote to {BrokerRole.SYNC_MASTER} or {BrokerRole.ASYNC_MASTER}")
    return role.value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    command = parser.prog.rsplit(" ", 1)[-1]
    parser.add_argument("--peers", required=True, type=_peers_arg,
                        help="the group: n1=HOST:PORT,n2=HOST:PORT,...")
    parser.add_argument("--group", default="", help="DLedger group name (default: any)")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per call (default 5)")
    if command == "append":
        parser.add_argument("--data", required=True, help="entry body (UTF-8 text)")
        parser.add_argument("--count", type=int, default=1, help="append it this many times (default 1)")
    elif command == "get":
        parser.add_argument("--index", type=int, required=True, help="first log index")
        parser.add_argument("--last", type=int, help="last log index (default: --index)")
        parser.add_argument("--node", help="ask this node only (default: the leader)")
        parser.add_argument("--mode", type=_read_mode_arg,
                            help="read mode (default: the node's own; read-index, lease, committed, "
                                 "follower, unsafe)")
    elif command == "transfer":
        parser.add_argument("--to", required=True, help="peer id that should lead")
    elif command == "pull":
        parser.add_argument("--offset", type=int, required=True, help="first log index to pull")
        parser.add_argument("--max", type=int, default=32, help="at most this many entries (default 32)")
        parser.add_argument("--node", help="pull from this node (default: the master)")
    elif command == "promote":
        parser.add_argument("--node", required=True, help="the slave to make the master")
        parser.add_argument("--role", type=_master_role_arg,
                            help="SYNC_MASTER or ASYNC_MASTER (default: the flavour of the master it "
                                 "followed)")


def run(args: argparse.Namespace) -> int:
    if args.command == "append" and args.count < 1:
        print(f"--count must be at least 1, not {args.count}", file=sys.stderr)
        return EXIT_BAD_ARGS
    if args.command == "transfer" and args.to not in args.peers:
        print(f"--to {args.to!r} is not one of the peers {sorted(args.peers)}", file=sys.stderr)
        return EXIT_BAD_ARGS
    if args.command in ("pull", "promote", "get") and args.node is not None and args.node not in args.peers:
        print(f"--node {args.node!r} is not one of the peers {sorted(args.peers)}", file=sys.stderr)
        return EXIT_BAD_ARGS
    if args.command == "pull" and (args.offset < 0 or args.max < 1):
        print(f"need --offset >= 0 and --max >= 1, not {args.offset} and {args.max}", file=sys.stderr)
        return EXIT_BAD_ARGS
    with Client(args.peers, group=args.group, timeout=args.timeout) as client:
        try:
            _COMMANDS[args.command](client, args)
        except DefiniteFailure as exc:
            print(f"{args.command} failed: {exc}", file=sys.stderr)
            return EXIT_INVALID
        except IndeterminateFailure as exc:
            print(f"{args.command} outcome unknown: {exc}", file=sys.stderr)
            return EXIT_UNKNOWN
    return EXIT_VALID


def _print(fields: dict[str, object]) -> None:
    print(json.dumps(fields), flush=True)


def _append(client: Client, args: argparse.Namespace) -> None:
    body = args.data.encode()
    for _ in range(args.count):
        ack = client.append(body)
        _print({"index": ack.first_index, "term": ack.term, "node": ack.node})


def _get(client: Client, args: argparse.Namespace) -> None:
    result = client.get(args.index, args.last, node=args.node, mode=args.mode or "")
    for e in result.entries:
        _print({"index": e.index, "term": e.term, "magic": e.magic, "id": payload_id(e.body),
                "body": e.body.decode(errors="replace")})
    print(f"# node {result.node}, commit index {result.commit_index}", file=sys.stderr)


def _metadata(client: Client, args: argparse.Namespace) -> None:
    reply = client.metadata()
    fields: dict[str, object] = {"leader": reply.leader, "term": reply.term, "role": reply.role,
                                 "peers": reply.peers}
    if reply.mode != "dledger":
        fields |= {"mode": reply.mode, "broker_role": reply.broker_role, "slaves": reply.slaves}
    _print(fields)


def _transfer(client: Client, args: argparse.Namespace) -> None:
    result = client.transfer(args.to)
    _print({"leader": args.to, "term": result.term, "asked": result.node})


def _pull(client: Client, args: argparse.Namespace) -> None:
    result = client.pull(args.offset, args.max, node=args.node)
    for e in result.entries:
        _print({"index": e.index, "term": e.term, "magic": e.magic, "id": payload_id(e.body),
                "body": e.body.decode(errors="replace")})
    print(f"# node {result.node}, next offset {result.next_offset}, serves {result.min_offset}.."
          f"{result.max_offset}, suggest {result.suggest}", file=sys.stderr)


def _promote(client: Client, args: argparse.Namespace) -> None:
    result = client.promote(args.node, args.role or "")
    _print({"master": result.node, "epoch": result.epoch})


_COMMANDS = {"append": _append, "get": _get, "metadata": _metadata, "transfer": _transfer, "pull": _pull,
             "promote": _promote}
