"""Crash faults: SIGKILL (kill) or SIGTERM (stop) the chosen nodes, then start them again."""

from __future__ import annotations

from typing import Any

from nemesis.base import Family, Nodes
from nemesis.process import ProcessFault, each, not_running
from nemesis.targets import targets_option


def _start_one(nodes: Nodes):
    return lambda node: nodes.start(node)


def _kill(nodes: Nodes, options: dict[str, Any]) -> ProcessFault:
    return ProcessFault(nodes, options["kill_targets"], each(nodes.kill), _start_one(nodes),
                        not_running(nodes))


def _stop(nodes: Nodes, options: dict[str, Any]) -> ProcessFault:
    return ProcessFault(nodes, options["stop_targets"], each(nodes.stop), _start_one(nodes),
                        not_running(nodes))


KILL = Family(
    name="kill", label="kill", start_f="kill", stop_f="start", make=_kill,
    help="SIGKILL the targets' node process, then start it again (recovery from disk)",
    options=(targets_option("kill", "leader,minority,one"),), weight=1.0)

STOP = Family(
    name="stop", label="stop", start_f="terminate", stop_f="restart", make=_stop,
    help="SIGTERM the targets' node process (a graceful exit), then start it again",
    options=(targets_option("stop", "one,leader"),), weight=0.5)
