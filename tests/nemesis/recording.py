"""A recording stand-in for the cluster (the nemesis's `Nodes`): no containers, every action recorded.

It keeps just enough state to answer as a cluster would: which node processes are gone or
paused; who leads (the leader stays while it is up, else the first node up in name order
takes over when a majority is up and `elect` is on); and each node's CHAOS chain, kept from
the iptables commands the nemesis runs, so `links()` says who still gets whose packets.
"""

from __future__ import annotations

import re

import networkx as nx

RULE = re.compile(r"iptables (-[ADFS]) CHAOS((?: +(?!2>)[^ ;|&]+)*)")  # the rule, not a 2>/dev/null
HOOK = re.compile(r"iptables -I (INPUT|OUTPUT) -j CHAOS\b")


class RecordingNodes:
    def __init__(self, count: int = 5, leader: str | None = "n3", elect: bool = True) -> None:
        self.names = [f"n{i}" for i in range(1, count + 1)]
        self.data_dir = "/data"
        self.commands: list[tuple[str, str]] = []
        self.events: list[tuple[str, str]] = []
        self.chains: dict[str, list[str]] = {n: [] for n in self.names}
        self.hooks: dict[str, set[str]] = {n: set() for n in self.names}
        self.gone: set[str] = set()
        self.paused: set[str] = set()
        self._leader = leader
        self.elect = elect

    def address(self, node: str) -> str:
        return f"10.9.0.{node[1:]}"

    def exec(self, node: str, command: str, timeout: float = 10.0) -> str:
        self.commands.append((node, command))
        self.hooks[node].update(HOOK.findall(command))
        rules, shown = self.chains[node], []
        for action, spec in RULE.findall(command):
            if action == "-A":
                rules.append(spec.strip())
            elif action == "-D" and spec.strip() in rules:
                rules.remove(spec.strip())
            elif action == "-F":
                rules.clear()
            else:
                shown += ["-N CHAOS", *(f"-A CHAOS {rule}" for rule in rules)]
        return "\n".join(shown)

    def hears(self, sender: str, receiver: str) -> bool:
        """Whether `receiver` gets `sender`'s packets through both nodes' CHAOS rules."""
        dropped_in = "INPUT" in self.hooks[receiver] and \
            f"-s {self.address(sender)} -j DROP" in self.chains[receiver]
        dropped_out = "OUTPUT" in self.hooks[sender] and \
            f"-d {self.address(receiver)} -j DROP" in self.chains[sender]
        return not (dropped_in or dropped_out)

    def links(self) -> nx.DiGraph:
        """Who still gets whose packets: an edge a->b when b hears a."""
        graph = nx.DiGraph()
        graph.add_nodes_from(self.names)
        graph.add_edges_from((a, b) for a in self.names for b in self.names if a != b and self.hears(a, b))
        return graph

    def _act(self, action: str, node: str) -> None:
        self.events.append((action, node))

    def kill(self, node: str) -> None:
        self._act("kill", node)
        self.gone.add(node)
        self.paused.discard(node)

    def stop(self, node: str, wait: float = 10.0) -> None:
        self._act("stop", node)
        self.gone.add(node)
        self.paused.discard(node)

    def start(self, node: str | None = None, wait: float = 20.0) -> None:
        for name in [node] if node else self.names:
            self._act("start", name)
            self.gone.discard(name)

    def pause(self, node: str) -> None:
        self._act("pause", node)
        self.paused.add(node)

    def resume(self, node: str) -> None:
        self._act("resume", node)
        self.paused.discard(node)

    def running(self, node: str) -> bool:
        return node not in self.gone

    def state(self, node: str) -> str | None:
        return None if node in self.gone else "T" if node in self.paused else "S"

    def leader(self, timeout: float = 1.0) -> str | None:
        up = [n for n in self.names if n not in self.gone and n not in self.paused]
        if self._leader not in up:
            self._leader = up[0] if self.elect and len(up) > len(self.names) // 2 else None
        return self._leader

    def transfer(self, to: str, timeout: float) -> dict:
        self._act("transfer", to)
        self._leader = to
        return {"result": "transferred"}
