"""Disk corruption: SIGKILL a node, damage its store files, start it again.

The damage (`--disk-modes`: bitflip, truncate, zero-tail; `--disk-files`: data, index) hits
one of the last entries of the node's last data file, or that entry's index slot, through
the corrupt agent (nemesis/agents/corrupt.py, at /opt/dledger/agents/corrupt.py on the
nodes), which reports exactly what it changed. On restart the store's recovery must cut
the log just before the damaged entry (data) or rebuild the index from the data (index);
the history value holds the agent's report per node and the recovery summary the
restarted node logged (`store recovered: ...` in node.log).

Other systems' files (`blk`: a NATS stream's message blocks, `wal`: etcd's write-ahead log)
take the same three modes, byte-wise, within the last written bytes of the newest such file
(nemesis/agents/damage.py, stdlib only); the history value holds that agent's report, and what
the system's recovery made of it is in its own log (stdout.log).

Targets default to `one` and `leader`: one node at a time. A node that loses acknowledged
entries breaks Raft's stable-storage assumption, so damage on several nodes at once (a
majority with `followers` on three nodes) can lose committed entries by design.
"""

from __future__ import annotations

import json
import random
import shlex
from typing import Any

from nemesis.agents.corrupt import FILES, MODES
from nemesis.base import Family, NodeExited, Nodes, Option, comma_list
from nemesis.process import StartedWithin
from nemesis.targets import pick, targets_option

AGENT = "/opt/dledger/agents/corrupt.py"  # our node's store: nemesis/agents/corrupt.py
DAMAGE = "/opt/dledger/agents/damage.py"  # any other system's files: nemesis/agents/damage.py
RECOVERED = "store recovered: "
# Other systems' files, under the node's data dir: NATS JetStream's message blocks, etcd's WAL.
SYSTEM_FILES = {"blk": "jetstream/*/streams/*/msgs/*.blk", "wal": "etcd/member/wal/*.wal"}
FILE_KINDS = (*FILES, *SYSTEM_FILES)


class DiskFault(StartedWithin):
    """Corrupts the targets' store files across a SIGKILL and a restart; see the module doc."""

    def __init__(self, nodes: Nodes, targets: tuple[str, ...], modes: tuple[str, ...],
                 files: tuple[str, ...]) -> None:
        self.nodes = nodes
        self.targets = targets
        self.modes = modes
        self.files = files

    def start(self, rng: random.Random) -> dict[str, Any]:
        mode, file = rng.choice(self.modes), rng.choice(self.files)
        spec, victims = pick(self.nodes, self.targets, rng)
        damage, recovery = {}, {}
        for node in victims:
            damage[node], recovery[node] = self.corrupt(node, file, mode, rng.randrange(2**32))
        return {"target": spec, "targets": victims, "mode": mode, "file": file, "damage": damage,
                "recovery": recovery}

    def corrupt(self, node: str, file: str, mode: str, seed: int) -> tuple[dict[str, Any], str]:
        """Kill `node`, damage its `file` by `mode`, start it: the agent's report and the recovery summary."""
        where = ["--file", file] if file in FILES else ["--glob", SYSTEM_FILES[file]]
        command = shlex.join(["python3", AGENT if file in FILES else DAMAGE, "--dir", self.nodes.data_dir,
                              *where, "--mode", mode, "--seed", str(seed)])
        self.nodes.kill(node)
        try:
            report = json.loads(self.nodes.exec(node, command, timeout=60))
        finally:
            refused = self._restart(node)
        if refused or file not in FILES:
            return report, refused  # else what recovery made of it is the system's own business (its log)
        log = shlex.quote(f"{self.nodes.data_dir}/node.log")
        line = self.nodes.exec(node, f"grep -a {shlex.quote(RECOVERED)} {log} | tail -n 1").strip()
        return report, line.partition(RECOVERED)[2]

    def _restart(self, node: str) -> str:
        """Start `node` again: "" when it runs, else what it said as it refused (the system's answer
        to the damage, as etcd's panic on a log that lost committed entries)."""
        try:
            self.nodes.start(node)
        except NodeExited as e:
            return f"did not start again: {e.reason}"
        return ""


DISK = Family(
    name="disk", label="disk corruption", start_f="corrupt-file", stop_f=None,
    make=lambda nodes, o: DiskFault(nodes, o["disk_targets"], o["disk_modes"], o["disk_files"]),
    help="SIGKILL the targets, damage the tail of their store files (our node: one of the last entries), "
         "start them again",
    options=(
        targets_option("disk", "one,leader"),
        Option("disk-modes", ",".join(MODES), f"disk damage modes to draw from: {', '.join(MODES)}",
               choices=MODES, parse=comma_list),
        Option("disk-files", ",".join(FILE_KINDS),
               "files disk faults damage: data, index (our node's store), blk (a NATS stream's message "
               "blocks), wal (etcd's write-ahead log); each system takes its own",
               choices=FILE_KINDS, parse=comma_list),
    ),
    weight=0.5, needs=frozenset({"agents"}))
