"""The seams between the nemesis and the cluster it hurts.

A **family** (kill, partition, clock, ...) is one module that declares everything about
itself in one `Family` value: its history `f` names (a start/stop pair, or an instant
`start_f` with no `stop_f`), its label, its command-line options and their validation, its
schedule weight, what it needs from a node, and how to build its `Fault` against a cluster.
The catalogue (`nemesis.catalogue`) registers every family; nothing else keeps a list.

A `Fault` injects one fault at a time: `start` returns the history value of what it did
(always with `"targets"`: the nodes it hurt), `stop` undoes it and returns its value,
`heal` removes every fault of its family whatever state it is in (idempotent, also on
error paths), and `leftovers` says what of the family is still in force on the nodes (an
empty list once healed: the tests and the run's final check use it).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from nodes.peers import Address


class NodeExited(Exception):
    """A node's process exited as it started: the system refused to start on what its node holds
    (a damaged store, say). `reason`: what it said as it exited, in the file `where`."""

    def __init__(self, node: str, reason: str, where: str) -> None:
        super().__init__(f"{node}: the node exited at start ({where}: {reason})")
        self.node = node
        self.reason = reason


class Nodes(Protocol):
    """What a nemesis needs from the cluster: names, addresses, a shell, the node process."""

    @property
    def names(self) -> list[str]:
        ...

    @property
    def data_dir(self) -> str:
        """The node's data directory (store, currterm, control files) on every node."""
        ...

    def address(self, node: str) -> str:
        """The node's IP address inside the run's network."""
        ...

    def exec(self, node: str, command: str, timeout: float = 10.0) -> str:
        """Run `command` on the node over SSH; its stdout; raises when it exits non-zero."""
        ...

    def kill(self, node: str) -> None:
        """SIGKILL the node process and wait until it is gone."""
        ...

    def stop(self, node: str, wait: float = 10.0) -> None:
        """SIGTERM the node process and wait until it exits."""
        ...

    def start(self, node: str | None = None, wait: float = 20.0) -> None:
        """Start the node process (every node when None; a running node is left alone) and wait
        up to `wait` seconds until it listens (0: not at all). `NodeExited` when it exits as it starts."""
        ...

    def pause(self, node: str) -> None:
        """SIGSTOP the node process."""
        ...

    def wipe(self, node: str) -> None:
        """Delete what the stopped node keeps in its data dir (its logs stay)."""
        ...

    def resume(self, node: str) -> None:
        """SIGCONT the node process."""
        ...

    def running(self, node: str) -> bool:
        """Whether the node process exists (also when paused)."""
        ...

    def state(self, node: str) -> str | None:
        """The node process's `ps` state letter (`T` when paused), None when it is gone."""
        ...

    def network_peers(self) -> dict[str, Address]:
        """Each node's client address, for `nodes.client.Client`."""
        ...

    def leader(self, timeout: float = 1.0) -> str | None:
        """The node that currently claims leadership in the highest term, if any answers."""
        ...

    def transfer(self, to: str, timeout: float) -> dict[str, Any]:
        """Move leadership to `to`; the cluster's answer as history fields (`result`, ...)."""
        ...


class Fault(Protocol):
    """One family's faults against one cluster."""

    def start(self, rng: random.Random) -> dict[str, Any]:
        """Inject a fault; the history value describing it, with `"targets"`."""
        ...

    def stop(self) -> dict[str, Any]:
        """Undo what `start` injected; the history value (with `"targets"`). Unused for instants."""
        ...

    def heal(self) -> None:
        """Remove every fault of this family, whatever state it is in."""
        ...

    def leftovers(self) -> list[str]:
        """What of this family is still in force on the nodes, one phrase each; [] when clean."""
        ...


def positive(text: str) -> float:
    """A positive number, for numeric options."""
    value = float(text)
    if value <= 0:
        raise ValueError("give a positive number")
    return value


def comma_list(text: str) -> tuple[str, ...]:
    """`a, b,c` -> ("a", "b", "c")."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


@dataclass(frozen=True)
class Option:
    """One command-line option of a family: `--<name>`, parsed from text, checked by `choices`.

    `choices` (for comma-list options) names every allowed item; `parse` turns the text into
    the value the family gets (a tuple of names by default); it raises ValueError with a
    message for a bad value.
    """

    name: str
    default: str
    help: str
    choices: tuple[str, ...] = ()
    parse: Callable[[str], Any] = comma_list

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    def value(self, text: str) -> Any:
        """The parsed value; ValueError naming the flag and what is allowed."""
        try:
            value = self.parse(text)
        except ValueError as e:
            raise ValueError(f"--{self.name} {text!r}: {e}") from None
        if self.choices:
            items = value if isinstance(value, tuple) else (value,)
            unknown = [item for item in items if item not in self.choices]
            if unknown or not items:
                what = ", ".join(unknown) or "none given"
                raise ValueError(f"--{self.name}: unknown {what}; choose from {', '.join(self.choices)}")
        return value


@dataclass(frozen=True)
class HostCleanup:
    """One mechanism a family may leave on a machine of an inventory from any run, for `harness.hosts.db`.

    `clean`: one line of shell that removes it, idempotent, printing a line per thing removed;
    `root`: `clean` runs only as root; `listing`: shell that prints one line per leftover, by kind
    (`iptables: `, `qdisc: `, `mount: `, `agent process: `, `file: `). Both run with `$data_dir`
    and `$code_dir` set to the host's folders. Families sharing a mechanism share its value.
    """

    clean: str
    listing: str
    root: bool = False


@dataclass(frozen=True)
class Family:
    """Everything about one fault family; see the module doc.

    `repeat`: for an instant family that fires again and again while its slot in the schedule
    lasts (leader churn), the `dest` of its option giving the seconds between firings; None
    fires it once per slot. `needs`: node capabilities the family requires: `"fuse"` (the
    data dir on the power-loss file system: /dev/fuse, fusermount3, python3-pyfuse3),
    `"root"` (privileged commands: iptables, tc, mounts, files in /run), `"iptables"`,
    `"tc"`, `"eth0"` (it shapes eth0, so the peer traffic must go through it), `"agents"`
    (it runs programs from /opt/dledger/agents). Containers have all of them; on machines of
    an inventory (`harness run --hosts`) a run whose families need what a host lacks is refused
    before it starts. `in_all`: False for a family outside every design's fault model (losing a
    node's disk breaks Raft's stable-storage assumption), which the `all` mix leaves out.
    `steps_clocks`: the family may step node clocks, outside the bounded drift lease reads rest
    on, so a `mixed` run sends no lease read while it is in force (an explicit `--read-mode
    lease` run still does); a start value with `"stepped_clock": false` says this one did not.
    `host_cleanup`: what its faults may leave on a node's machine outside the node's files
    (chains, qdiscs, mounts, processes, files in /run); () for none.
    """

    name: str
    label: str
    start_f: str
    stop_f: str | None
    make: Callable[[Nodes, dict[str, Any]], Fault]
    help: str
    options: tuple[Option, ...] = ()
    weight: float = 1.0
    repeat: str | None = None
    needs: frozenset[str] = field(default_factory=frozenset)
    in_all: bool = True
    steps_clocks: bool = False
    host_cleanup: tuple[HostCleanup, ...] = ()

    @property
    def instant(self) -> bool:
        return self.stop_f is None

    def vocabulary(self) -> dict[str, Any]:
        """This family's entry in test.json's `"faults"`."""
        return {"start": self.start_f, "stop": self.stop_f, "label": self.label}
