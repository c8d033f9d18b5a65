"""`python -m nodes COMMAND`: run, inspect and talk to DLedger nodes."""

import sys

from nodes.cliparse import run_subcommands

COMMANDS = {
    "read-file": "nodes.inspect",
}

if __name__ == "__main__":
    sys.exit(run_subcommands("python -m nodes", __doc__ or "", COMMANDS))
