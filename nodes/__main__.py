"""`python -m nodes COMMAND`: run, inspect and talk to DLedger nodes."""

import sys

from nodes.cliparse import run_subcommands

COMMANDS = {
    "read-file": "nodes.store.readfile",
    "serve": "nodes.serve",
    "append": "nodes.tools",
    "get": "nodes.tools",
    "metadata": "nodes.tools",
    "transfer": "nodes.tools",
    "pull": "nodes.tools",
    "promote": "nodes.tools",
    "simulate": "nodes.sim.cli",
    "simulate-many": "nodes.sim.many",
    "build-sim": "nodes.sim.compiled",
}

if __name__ == "__main__":
    sys.exit(run_subcommands("python -m nodes", __doc__ or "", COMMANDS))
