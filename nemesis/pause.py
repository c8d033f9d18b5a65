"""Pause faults: SIGSTOP the chosen nodes' process, SIGCONT it later.

A paused leader keeps believing it leads; when it resumes, the others may have elected a
new leader and committed past it: a real test of stale leadership and of lease reads.
"""

from __future__ import annotations

from typing import Any

from nemesis.base import Family, Nodes
from nemesis.process import ProcessFault, each
from nemesis.targets import targets_option


def _paused(nodes: Nodes):
    return lambda node: f"{node}: the node process is paused" if nodes.state(node) == "T" else None


def _pause(nodes: Nodes, options: dict[str, Any]) -> ProcessFault:
    return ProcessFault(nodes, options["pause_targets"], each(nodes.pause), nodes.resume, _paused(nodes))


PAUSE = Family(
    name="pause", label="pause", start_f="pause", stop_f="resume", make=_pause,
    help="SIGSTOP the targets' node process, SIGCONT it at the end of the fault",
    options=(targets_option("pause", "leader,minority"),), weight=1.0)
