"""`python -m checkers COMMAND`: check results folders."""

import sys

from nodes.cliparse import run_subcommands

COMMANDS = {
    "check": "checkers.checkcli",
    "serve": "checkers.service.server",
    "import": "checkers.importers.cli",
}

if __name__ == "__main__":
    sys.exit(run_subcommands("python -m checkers", __doc__ or "", COMMANDS))
