"""Packet faults between chosen nodes: loss, delay with jitter, duplication, reordering, rate limits.

A fault draws a mode from `--packet-modes` (one effect, several joined with `+`, or `all`)
and a target spec from `--packet-targets` (nemesis.targets); the faulted links are the
pairs of nodes with at least one end among the targets, hurt both ways. Every effect uses
a real mechanism, probed once per node and named in the history value's `mechanism`:

* loss: iptables `statistic --mode random` DROP on the receiving node of the packets from
  its faulted peers (TCP retransmits what is lost: stalls of 200 ms and more);
* rate: tc htb on eth0, one class per faulted peer (a u32 filter on its address);
* delay (± jitter), duplicate, reorder: tc netem as the leaf of that peer's htb class where
  the kernel has sch_netem (netem's jitter can reorder packets; TCP puts them back in order).
  Otherwise the frame relay (nemesis/agents/relay.py) on the receiving node, to which
  iptables nat REDIRECTs the peers' connections to the node port: it holds, duplicates and
  reorders whole frames, i.e. the messages of the peer protocol. Connections already up are
  not redirected (conntrack), so the node's ends of them are destroyed (`ss -K`) and a guard
  rejects (tcp-reset) any direct packet left: the peers reconnect, through the relay.

The rules live in chains `CHAOS-PACKET` (filter, jumped to from INPUT; nat, from
PREROUTING), the root qdisc has handle `d1:`, the relay a pid file: stopping and healing
remove exactly these (the partition family's `CHAOS` chain is not touched).
"""

from __future__ import annotations

import itertools
import json
import random
import shlex
from dataclasses import dataclass
from typing import Any

from nemesis.base import Family, HostCleanup, Nodes, Option, comma_list
from nemesis.targets import pick, targets_option

NODE_PORT = 20911  # harness.containers.cluster.NODE_PORT; the nemesis does not import the harness
CHAIN = "CHAOS-PACKET"
QDISC = "d1"
RELAY_PORT = 20912
RELAY_SCRIPT = "/opt/dledger/agents/relay.py"
RELAY_PID = "/run/dledger-packet-relay.pid"
RELAY_STATS = "/run/dledger-packet-relay.json"
RELAY_LOG = "/run/dledger-packet-relay.log"
MODES = ("loss", "delay", "duplicate", "reorder", "rate")
HELD = ("delay", "duplicate", "reorder")  # the effects of netem, or of the relay
# The qdisc kinds this kernel has, tried on lo (whose traffic a 0-ms qdisc does not change).
PROBE = "for q in netem htb; do tc qdisc add dev lo root handle d2: $q >/dev/null 2>&1 && " \
        "tc qdisc del dev lo root && echo $q; done; true"
TIMEOUT_S = 30.0


def parse_modes(text: str) -> tuple[tuple[str, ...], ...]:
    """`loss,delay+reorder,all` -> (("loss",), ("delay", "reorder"), MODES): what a fault draws from."""
    draws = []
    for item in comma_list(text):
        parts = MODES if item == "all" else tuple(p.strip() for p in item.split("+"))
        unknown = [p for p in parts if p not in MODES]
        if unknown or not all(parts):
            raise ValueError(f"unknown mode {item!r}; use {', '.join(MODES)}, several joined with +, or all")
        draws.append(tuple(m for m in MODES if m in parts))
    if not draws:
        raise ValueError("give at least one mode")
    return tuple(draws)


def probability(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise ValueError("give a probability in (0, 1]")
    return value


def positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise ValueError("give a positive number")
    return value


@dataclass(frozen=True)
class Magnitudes:
    """The option values: how hard each effect bites when it is drawn."""

    loss: float
    delay_ms: float
    jitter_ms: float
    duplicate: float
    rate_kbit: float


@dataclass(frozen=True)
class Shape:
    """What one fault does to each faulted link, both ways. A reorder without a delay holds
    each packet or frame for 0..2 x jitter, so that later ones overtake earlier ones."""

    modes: tuple[str, ...]
    loss: float = 0.0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    duplicate: float = 0.0
    rate_kbit: float = 0.0

    @classmethod
    def of(cls, modes: tuple[str, ...], m: Magnitudes) -> Shape:
        timed = "delay" in modes or "reorder" in modes
        return cls(modes,
                   loss=m.loss if "loss" in modes else 0.0,
                   delay_ms=m.delay_ms if "delay" in modes else m.jitter_ms if timed else 0.0,
                   jitter_ms=m.jitter_ms if timed else 0.0,
                   duplicate=m.duplicate if "duplicate" in modes else 0.0,
                   rate_kbit=m.rate_kbit if "rate" in modes else 0.0)

    @property
    def reorder(self) -> bool:
        return "reorder" in self.modes

    def value(self) -> dict[str, Any]:
        """The mode and the magnitudes in force, for the history."""
        value: dict[str, Any] = {"mode": "+".join(self.modes)}
        if self.loss:
            value["loss"] = self.loss
        if self.delay_ms:
            value |= {"delay_ms": self.delay_ms, "jitter_ms": self.jitter_ms}
        if self.duplicate:
            value["duplicate"] = self.duplicate
        if self.rate_kbit:
            value["rate_kbit"] = self.rate_kbit
        return value


def faulted_links(chosen: list[str], names: list[str]) -> list[tuple[str, str]]:
    """Every pair of `names` with at least one end in `chosen`."""
    return [(a, b) for a, b in itertools.combinations(names, 2) if a in chosen or b in chosen]


def peers_of(node: str, links: list[tuple[str, str]]) -> list[str]:
    return [b if a == node else a for a, b in links if node in (a, b)]


def mechanisms(modes: tuple[str, ...], kinds: frozenset[str]) -> dict[str, str]:
    """Which mechanism carries each mode on a node whose kernel has the qdisc `kinds`."""
    if "rate" in modes and "htb" not in kinds:
        raise RuntimeError("a packet rate limit needs the htb qdisc, which this kernel lacks")
    netem = {"netem", "htb"} <= kinds
    named = {"loss": "iptables-statistic", "rate": "tc-htb"}
    return {mode: named.get(mode, "tc-netem" if netem else "relay") for mode in modes}


def _chain(table: str, hook: str) -> str:
    return (f"iptables -t {table} -N {CHAIN} 2>/dev/null; iptables -t {table} -C {hook} -j {CHAIN} "
            f"2>/dev/null || iptables -t {table} -I {hook} -j {CHAIN}")


def loss_command(peers: list[str], loss: float) -> str:
    rules = "; ".join(f"iptables -A {CHAIN} -s {ip} -m statistic --mode random --probability {loss:g} -j DROP"
                      for ip in peers)
    return f"{_chain('filter', 'INPUT')}; set -e; {rules}"


def netem_args(shape: Shape) -> str:
    args = []
    if shape.delay_ms:
        args.append(f"delay {shape.delay_ms:g}ms {shape.jitter_ms:g}ms")
    if shape.reorder:
        args.append("reorder 25%")
    if shape.duplicate:
        args.append(f"duplicate {shape.duplicate * 100:g}%")
    return " ".join(args)


def tc_command(peers: list[str], shape: Shape, netem: bool) -> str:
    """An htb root with one class per peer: limited to the rate, with a netem leaf when `netem`."""
    rate = f"{shape.rate_kbit:g}kbit" if shape.rate_kbit else "10gbit"
    lines = [f"tc qdisc add dev eth0 root handle {QDISC}: htb"]
    for i, ip in enumerate(peers, 1):
        cls = f"{QDISC}:{i:x}"
        lines += [f"tc class add dev eth0 parent {QDISC}: classid {cls} htb rate {rate} ceil {rate}",
                  f"tc filter add dev eth0 parent {QDISC}: protocol ip prio 1 u32 match ip dst {ip}/32 "
                  f"flowid {cls}"]
        if netem:
            lines.append(f"tc qdisc add dev eth0 parent {cls} netem {netem_args(shape)}")
    return "set -e; " + "; ".join(lines)


def relay_command(shape: Shape, seed: int, address: str) -> str:
    """Start the relay detached and wait (bounded) until it listens; its log on stderr if it does not.

    It forwards to the node at `address` (the node listens on its own address only)."""
    args = ["python3", RELAY_SCRIPT, "--port", str(RELAY_PORT), "--target", f"{address}:{NODE_PORT}",
            "--delay-ms", f"{shape.delay_ms:g}", "--jitter-ms", f"{shape.jitter_ms:g}",
            "--duplicate", f"{shape.duplicate:g}", "--seed", str(seed), "--stats", RELAY_STATS]
    args += ["--reorder"] if shape.reorder else []
    return (f"setsid {shlex.join(args)} > {RELAY_LOG} 2>&1 < /dev/null & echo $! > {RELAY_PID}; "
            f"for i in $(seq 200); do ss -Hltn 'sport = :{RELAY_PORT}' | grep -q . && exit 0; "
            f"kill -0 $(cat {RELAY_PID}) 2>/dev/null || break; sleep 0.05; done; cat {RELAY_LOG} >&2; exit 1")


def redirect_command(peers: list[str]) -> str:
    """Send the peers' new connections to the relay, and make their current ones reconnect."""
    nat = "; ".join(f"iptables -t nat -A {CHAIN} -s {ip} -p tcp --dport {NODE_PORT} -j REDIRECT "
                    f"--to-ports {RELAY_PORT}" for ip in peers)
    guard = "; ".join(f"iptables -A {CHAIN} -s {ip} -p tcp --dport {NODE_PORT} -j REJECT "
                      f"--reject-with tcp-reset" for ip in peers)
    reset = "; ".join(f"ss -Ktn 'dst {ip} and sport = :{NODE_PORT}' > /dev/null" for ip in peers)
    return f"{_chain('nat', 'PREROUTING')}; {_chain('filter', 'INPUT')}; set -e; {nat}; {guard}; {reset}"


def node_commands(shape: Shape, mechanism: dict[str, str], address: str, peers: list[str],
                  seed: int) -> list[str]:
    """The commands that put `shape` on the links of the node at `address` to `peers`."""
    used = set(mechanism.values())
    commands = []
    if "iptables-statistic" in used:
        commands.append(loss_command(peers, shape.loss))
    if used & {"tc-htb", "tc-netem"}:
        commands.append(tc_command(peers, shape, netem="tc-netem" in used))
    if "relay" in used:
        commands += [relay_command(shape, seed, address), redirect_command(peers)]
    return commands


def clean_command() -> str:
    """Remove the family's chains, root qdisc and relay from a node; prints the relay's last counters."""
    chains = "; ".join(f"while iptables -t {t} -D {hook} -j {CHAIN} 2>/dev/null; do :; done; "
                       f"iptables -t {t} -F {CHAIN} 2>/dev/null; iptables -t {t} -X {CHAIN} 2>/dev/null"
                       for t, hook in (("nat", "PREROUTING"), ("filter", "INPUT")))
    qdisc = f"if tc qdisc show dev eth0 | grep -q ' {QDISC}: root'; then tc qdisc del dev eth0 root; fi"
    relay = (f"if [ -f {RELAY_PID} ]; then pid=$(cat {RELAY_PID}); kill $pid 2>/dev/null; "
             f"for i in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.05; done; "
             f"kill -9 $pid 2>/dev/null; rm -f {RELAY_PID}; fi; "
             f"cat {RELAY_STATS} 2>/dev/null; rm -f {RELAY_STATS} {RELAY_STATS}.tmp {RELAY_LOG}")
    return f"{chains}; {qdisc}; {relay}; true"


LEFTOVERS = (f"iptables -S 2>/dev/null | grep -- {CHAIN}; iptables -t nat -S 2>/dev/null | grep -- {CHAIN}; "
             f"tc qdisc show dev eth0 | grep -v ' 0: '; pgrep -af '[a]gents/relay.py'; true")

# The chains, the qdisc and the relay (`clean_command`'s relay counters are not wanted here).
PACKET_CLEANUP = HostCleanup(
    clean=f"({clean_command()}) >/dev/null 2>&1",
    listing=f"""iptables -w 5 -S 2>/dev/null | grep -- {CHAIN} | sed 's/^/iptables: /'
iptables -w 5 -t nat -S 2>/dev/null | grep -- {CHAIN} | sed 's/^/iptables nat: /'
tc qdisc show 2>/dev/null | grep ' {QDISC}: ' | sed 's/^/qdisc: /'
pgrep -af '[a]gents/relay.py' | sed 's/^/agent process: /'
ls -d {RELAY_PID} {RELAY_STATS} {RELAY_STATS}.tmp {RELAY_LOG} 2>/dev/null | sed 's/^/file: /'""",
    root=True)


class PacketFault:
    """Loss, delay, duplication, reordering and rate limits on chosen links; see the module doc."""

    def __init__(self, nodes: Nodes, targets: tuple[str, ...], modes: tuple[tuple[str, ...], ...],
                 magnitudes: Magnitudes) -> None:
        self.nodes = nodes
        self.targets = targets
        self.modes = modes
        self.magnitudes = magnitudes
        self.kinds: dict[str, frozenset[str]] = {}
        self.touched: list[str] = []

    def _kinds(self, node: str) -> frozenset[str]:
        if node not in self.kinds:
            self.kinds[node] = frozenset(self.nodes.exec(node, PROBE).split())
        return self.kinds[node]

    def start(self, rng: random.Random) -> dict[str, Any]:
        modes = rng.choice(self.modes)
        spec, chosen = pick(self.nodes, self.targets, rng)
        links = faulted_links(chosen, self.nodes.names)
        if not links:
            raise RuntimeError(f"no link to fault: {chosen} are all the nodes there are")
        shape = Shape.of(modes, self.magnitudes)
        used: dict[str, dict[str, str]] = {}
        for node in [n for n in self.nodes.names if any(n in link for link in links)]:
            used[node] = mechanisms(modes, self._kinds(node))
            if node not in self.touched:
                self.touched.append(node)
            peers = [self.nodes.address(p) for p in peers_of(node, links)]
            seed = rng.randrange(1 << 32)
            self._clean(node)  # one packet fault per node: a relay or qdisc left over would block this one
            for command in node_commands(shape, used[node], self.nodes.address(node), peers, seed):
                self.nodes.exec(node, command, TIMEOUT_S)
        mechanism = next(iter(used.values())) if len({json.dumps(u) for u in used.values()}) == 1 else used
        return {**shape.value(), "target": spec, "targets": chosen, "links": [list(link) for link in links],
                "mechanism": mechanism}

    def _clean(self, node: str) -> dict[str, Any] | None:
        """Clean `node`; the relay's counters if one ran there."""
        out = self.nodes.exec(node, clean_command(), TIMEOUT_S).strip()
        return json.loads(out) if out else None

    def stop(self) -> dict[str, Any]:
        cleaned = sorted(self.touched)
        relays = {node: stats for node in cleaned if (stats := self._clean(node))}
        self.touched.clear()
        return {"targets": cleaned, **({"relay": relays} if relays else {})}

    def heal(self) -> None:
        for node in self.nodes.names:
            self._clean(node)
        self.touched.clear()

    def leftovers(self) -> list[str]:
        return [f"{node}: {line}" for node in self.nodes.names
                for line in self.nodes.exec(node, LEFTOVERS).splitlines() if line.strip()]


def _make(nodes: Nodes, o: dict[str, Any]) -> PacketFault:
    magnitudes = Magnitudes(o["packet_loss"], o["packet_delay_ms"], o["packet_jitter_ms"],
                            o["packet_duplicate"], o["packet_rate_kbit"])
    return PacketFault(nodes, o["packet_targets"], o["packet_modes"], magnitudes)


PACKET = Family(
    name="packet", label="packet faults", start_f="start-packet", stop_f="stop-packet", make=_make,
    help="lose, delay (with jitter), duplicate, reorder or rate-limit the traffic of the targets' links",
    options=(
        targets_option("packet", "leader,one,all"),
        Option("packet-modes", "loss,delay,duplicate,reorder,rate,all",
               f"packet fault modes to draw from: {', '.join(MODES)}, several joined with +, or all",
               parse=parse_modes),
        Option("packet-loss", "0.2", "probability a packet of a faulted link is dropped", parse=probability),
        Option("packet-delay-ms", "100", "delay added to each direction of a faulted link, ms",
               parse=positive),
        Option("packet-jitter-ms", "50", "the delay varies by up to this much either way, ms",
               parse=positive),
        Option("packet-duplicate", "0.2", "probability a packet (a frame, with the relay) is sent twice",
               parse=probability),
        Option("packet-rate-kbit", "100", "bandwidth of a rate-limited link, kbit/s each way",
               parse=positive),
    ),
    weight=1.0, needs=frozenset({"root", "iptables", "tc", "eth0", "agents"}), host_cleanup=(PACKET_CLEANUP,))
