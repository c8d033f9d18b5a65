"""The run command's flags, each declared once: the parser, validation, test.json and the
reproduce line are all derived from `FLAGS` (plus each fault family's own options, from the
nemesis catalogue).
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from checkers.layout import LINEARIZABLE_MODES, PREFIX_MODES
from harness.chaos.modes import MODES
from harness.hosts.inventory import Inventory, load_inventory
from harness.system import System, refusals
from nemesis import catalogue
from nemesis.base import comma_list
from systems import SYSTEMS

NODES = 5  # the cluster size of a run in containers unless --nodes says otherwise


@dataclass(frozen=True)
class Flag:
    """One flag: `--<name>`, its type and default, and a check returning an error or None.

    `replay`: the flag is recorded in test.json and in the command that reproduces a test.
    """

    name: str
    default: Any
    help: str
    type: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None
    check: Callable[[Any], str | None] | None = None
    replay: bool = True
    switch: bool = False
    system: str | None = None  # the system this flag is an option of (None: every system's)

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")


def _positive(value: float) -> str | None:
    return None if value > 0 else "must be positive"


def _not_negative(value: float) -> str | None:
    return None if value >= 0 else "must not be negative"


def _fraction(value: float) -> str | None:
    return None if 0 <= value <= 1 else "must be between 0 and 1"


def _sync_interval(value: str) -> str | None:
    from systems.nats.config import parse_sync_interval

    try:
        parse_sync_interval(value)
    except ValueError as e:
        return str(e)
    return None


FLAGS: tuple[Flag, ...] = (
    Flag("system", "dledger", "the system under test: " + "; ".join(f"{n}: {h}" for n, h in SYSTEMS.items()),
         choices=tuple(SYSTEMS)),
    Flag("mode", "dledger", "the design under test: " + "; ".join(
        f"{m.name}: {m.help}" for m in MODES.values()),
         choices=tuple(MODES), system="dledger"),
    Flag("nats-sync-interval", "default", "how often nats-server fsyncs its stream files: always (before "
         "each acknowledgement), a Go duration (10s, 500ms), or default (the server's own: every 2 minutes, "
         "acknowledging before)", check=_sync_interval, system="nats"),
    Flag("etcd-unsafe-no-fsync", False, "start every etcd member with --unsafe-no-fsync (etcd: \"will cause "
         "data loss\")", switch=True, system="etcd"),
    Flag("nodes", None, f"cluster size, 3 to 9 (default {NODES}; with --hosts, every host of the inventory, "
                        "or its first N)", int,
         check=lambda n: None if 3 <= n <= 9 else "give 3 to 9 nodes"),
    Flag("time-limit", 60.0, "seconds of workload", float, check=_positive),
    Flag("concurrency", "2n", "client workers: a number, or Nn for N per node"),
    Flag("rate", 500.0, "target ops/s over all workers; 0 for no pacing", float, check=_not_negative),
    Flag("nemesis", "default", "fault families and mixes, comma-separated, or none "
                                "(see `python -m harness faults`)"),
    Flag("nemesis-interval", 8.0, "mean seconds of each faulty and each quiet period", float,
         check=_positive),
    Flag("nemesis-concurrency", 2, "how many faults may be in force at once", int,
         check=lambda n: None if n >= 1 else "must be at least 1"),
    Flag("payload-size", 100, "bytes per appended body", int, check=_not_negative),
    Flag("flush", "sync", "node flush policy: sync (fsync before ack) or async (DLedger's)",
         choices=("async", "sync"), system="dledger"),
    Flag("timing", "default", "node timing profile: default (failover in about a second) or dledger "
                               "(DLedger's: 2 s heartbeats, about 6 s failover)",
         choices=("default", "dledger"), system="dledger"),
    Flag("read-mode", None, "how reads are served and held (dledger: default mixed, each read read-index or "
                            "lease at random, nodes guarding leases; committed in master-slave modes, which "
                            "have no linearizable read; nats: committed, reads by seq through the stream "
                            "leader; etcd: linearizable)", choices=(*LINEARIZABLE_MODES, *PREFIX_MODES)),
    Flag("read-fraction", 0.25, "share of ops that are reads", float, check=_fraction),
    Flag("consumers", None, "consumers pulling the log in order from offset 0 (RocketMQ's pull consumer), "
                            "failing over to other nodes (default 1 where the system takes consumers, "
                            "as dledger, nats and etcd do)", int, check=_not_negative),
    Flag("op-timeout", 3.0, "client timeout per op, seconds", float, check=_positive),
    Flag("catch-up-timeout", 30.0, "seconds to wait after healing for a leader and lagging nodes", float,
         check=_positive, replay=False),
    Flag("seed", None, "seed for every random choice (default: a fresh one)", int, replay=False),
    Flag("test-count", 1, "run this many tests (seeds seed, seed+1, ...)", int,
         check=lambda n: None if n >= 1 else "must be at least 1", replay=False),
    Flag("name", None, "test name, the results folder's parent (default: <mode>-<--nemesis words>, "
                    "e.g. dledger-default; compare: compare-<mode>-<words>)", replay=False),
    Flag("results-dir", Path("results"), "where results go: <dir>/<name>/<time>/, and <dir>/latest "
                                      "points at the newest", Path, replay=False),
    Flag("witnesses", 10, "witnesses per anomaly in results.json", int, check=_not_negative, replay=False),
    Flag("spark-master", None, "check on this Spark master, e.g. spark://HOST:7077 (default: "
                            "$SPARK_MASTER, else local[*])", replay=False),
    Flag("leave-running", False,
         "leave the cluster up after the run (remove it with python -m harness clean)", replay=False,
         switch=True),
    Flag("hosts", None, "run on the machines of this inventory (TOML) over SSH instead of containers: "
                        "on every host, or the first --nodes ones", system="dledger"),
    Flag("keep", False, "with --hosts: leave the copied code on the hosts (the next run reuses it)",
         replay=False, switch=True),
    Flag("mutant", None, "run the nodes with this seeded bug instead of the checkout's code, as a must-fail "
                         "control (`python -m harness mutants list`); containers only", system="dledger"),
)


def add_arguments(parser: argparse.ArgumentParser, without: tuple[str, ...] = ()) -> None:
    """Every flag of FLAGS but those named in `without`, then every fault family's options."""
    for flag in FLAGS:
        if flag.name in without:
            continue
        shown = flag.default is not None and not flag.switch
        text = f"{flag.help} (default {flag.default})" if shown else flag.help
        if flag.system is not None:
            text += f"; --system {flag.system} only"
        if flag.switch:
            parser.add_argument(f"--{flag.name}", action="store_true", help=text)
        else:  # a system's option stays None when not given: `validate` fills it for its system
            default = None if flag.system is not None else flag.default
            parser.add_argument(f"--{flag.name}", type=flag.type, default=default, choices=flag.choices,
                                help=text)
    group = parser.add_argument_group("fault options (see `python -m harness faults`)")
    for option in catalogue.options():
        group.add_argument(f"--{option.name}", default=option.default,
                           help=f"{option.help} (default {option.default})")


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ValueError(f"{self.prog}: {message}")


def parsed(argv: list[str], prog: str, system: System | None = None) -> argparse.Namespace:
    """`argv` as the run command's flags, validated (`validate`); ValueError, naming `prog`, when bad."""
    parser = _RaisingParser(prog=prog)
    add_arguments(parser)
    args = parser.parse_args(argv)
    validate(args, system)
    return args


def validate(args: argparse.Namespace, system: System | None = None) -> None:
    """Check every flag; sets `args.under_test` (the system, `system` when given: a test's own, which
    `--system` then names), `args.faults` (family names) and `args.fault_options` (parsed values).

    ValueError naming the flag and what is wrong.
    """
    import systems
    from harness.chaos.generator import parse_concurrency

    if system is not None:
        args.system = system.name
    for flag in FLAGS:
        value = getattr(args, flag.dest)
        problem = flag.check(value) if flag.check and value is not None else None
        if problem:
            raise ValueError(f"--{flag.name} {value}: {problem}")
        _own_system(args, flag, value)
    args.inventory = _inventory(args)
    if args.mutant is not None:
        _check_mutant(args)
    read_modes = (system or systems.build(args)).read_modes
    if args.read_mode is None:
        args.read_mode = read_modes[0]
    elif args.read_mode not in read_modes:
        what = f"--mode {args.mode}" if args.system == "dledger" else f"--system {args.system}"
        raise ValueError(f"--read-mode {args.read_mode}: {what} serves only {', '.join(read_modes)}")
    system = args.under_test = system or systems.build(args)  # again: with the read mode resolved
    args.consumers = _consumers(args.consumers, system)
    args.workers = parse_concurrency(args.concurrency, args.nodes)
    args.faults, args.left_out = _faults(args.nemesis, system)
    _narrow_choices(args, system)
    args.fault_options = catalogue.parse_options({o.dest: getattr(args, o.dest) for o in catalogue.options()})


def _narrow_choices(args: argparse.Namespace, system: System) -> None:
    """Drop from the options of the run's families the choices the system cannot take when they are
    the default; refuse them when given (ValueError with the reason), and an option left with none."""
    options = {option.name: option for name in args.faults for option in catalogue.FAMILIES[name].options}
    for option in options.values():
        text = getattr(args, option.dest)
        items = comma_list(text)
        answers = {item: system.refused_choice(option.dest, item) for item in items}
        refused = {item: why for item, why in answers.items() if why}
        for item, why in refused.items():
            if text != option.default or len(refused) == len(items):
                raise ValueError(f"--{option.name} {item}: --system {system.name} cannot take it: {why}")
        if refused:
            setattr(args, option.dest, ",".join(item for item in items if item not in refused))


def _consumers(given: int | None, system: System) -> int:
    """The run's consumers: 1 unless `--consumers` says, none for a system that takes none."""
    if system.consumers:
        return 1 if given is None else given
    if given:
        raise ValueError(f"--consumers {given}: --system {system.name} takes no consumers")
    return 0


def _own_system(args: argparse.Namespace, flag: Flag, value: Any) -> None:
    """A system's option: refused for another system, its default filled in for its own."""
    if flag.system is None:
        return
    if args.system != flag.system:
        if value not in (None, False):
            raise ValueError(f"--{flag.name}: an option of --system {flag.system}, "
                             f"not of --system {args.system}")
    elif value is None:
        setattr(args, flag.dest, flag.default)


def _faults(nemesis: str, system: System) -> tuple[list[str], dict[str, str]]:
    """The families of `--nemesis` the system takes, and those a mix named that it cannot take (-> why).

    A family named on its own that the system cannot take is refused (ValueError with the reason)."""
    faults = catalogue.resolve(nemesis)
    named = [word for word in catalogue.resolve_words(nemesis) if word in catalogue.FAMILIES]
    refused = refusals(system, faults)
    for name in named:
        if name in refused:
            raise ValueError(f"--nemesis {name}: --system {system.name} cannot take it: {refused[name]}")
    return [name for name in faults if name not in refused], refused


def _check_mutant(args: argparse.Namespace) -> None:
    from harness.mutants.catalogue import mutant

    try:
        mutant(args.mutant)
    except KeyError as e:
        raise ValueError(f"--mutant {args.mutant}: {e.args[0]}") from None
    if args.hosts is not None:
        raise ValueError("--mutant: runs in containers only (its node image is built from the mutated copy); "
                         "drop --hosts")


def _inventory(args: argparse.Namespace) -> Inventory | None:
    """The `--hosts` inventory, read and checked, cut to its first `--nodes` hosts; sets `args.nodes`
    (without --hosts: to NODES when not given)."""
    if args.hosts is None:
        if args.keep:
            raise ValueError("--keep: only with --hosts (containers leave nothing to keep)")
        args.nodes = NODES if args.nodes is None else args.nodes
        return None
    inventory = load_inventory(Path(args.hosts))
    count = len(inventory.hosts)
    if args.nodes is None and not 3 <= count <= 9:
        raise ValueError(f"--hosts {args.hosts}: names {count} hosts; a run needs 3 to 9 (give --nodes to "
                         "run on the first ones)")
    if args.nodes is not None and args.nodes > count:
        raise ValueError(f"--nodes {args.nodes}: {args.hosts} names only {count} hosts")
    args.nodes = count if args.nodes is None else args.nodes
    return inventory.first(args.nodes)


def replayed(args: argparse.Namespace, faults: list[str]) -> dict[str, Any]:
    """The flags that define a test, for test.json: every replayed flag, then the options of its faults."""
    values = {flag.dest: getattr(args, flag.dest) for flag in FLAGS if flag.replay}
    for name in faults:
        for option in catalogue.FAMILIES[name].options:
            values[option.dest] = getattr(args, option.dest)
    return values


def reproduce_command(args: argparse.Namespace, faults: list[str], seed: int, name: str) -> str:
    """The command line that reruns this test's schedule."""
    parts = ["python", "-m", "harness", "run"]
    for dest, value in replayed(args, faults).items():
        if value is None:
            continue
        parts += [f"--{dest.replace('_', '-')}", f"{value:g}" if isinstance(value, float) else str(value)]
    return shlex.join([*parts, "--seed", str(seed), "--name", name])
