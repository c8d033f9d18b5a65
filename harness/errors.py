"""Errors the harness raises for conditions a user can act on; each message says what to do."""

from __future__ import annotations

from nemesis.base import NodeExited


class HarnessError(Exception):
    """A failure of the harness's environment or of a command it ran, with an actionable message."""


class EngineUnavailable(HarnessError):
    """The Docker engine is missing, stopped or unreachable."""


class ImageBuildError(HarnessError):
    """Building the base or the node image failed."""


class CommandFailed(HarnessError):
    """A command run on a node over SSH exited non-zero."""


class CommandTimeout(HarnessError):
    """A command run on a node over SSH did not finish in time."""


class SshRefused(HarnessError):
    """A host answered SSH but refused the login (key or user not accepted) or its host key did not match."""


class HostsRefused(HarnessError):
    """The inventory's hosts cannot run what was asked: tools, privileges or folders are missing; the
    message lists every problem, host by host."""


class NodeExitedAtStart(HarnessError, NodeExited):
    """`nemesis.base.NodeExited` as the harness raises it: a run that cannot start a node says why."""
