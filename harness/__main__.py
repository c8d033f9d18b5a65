"""`python -m harness COMMAND`: build images, run chaos tests against containers, compare the
designs under one test, run the nightly sweep, list faults, re-render a run's report, serve the
results folder, hunt seeded node bugs, clean up."""

import sys
import traceback

from harness.errors import HarnessError
from nodes.cliparse import EXIT_INTERNAL, EXIT_UNKNOWN, run_subcommands

COMMANDS = {
    "image": "harness.containers.image",
    "clean": "harness.containers.clean",
    "run": "harness.chaos.run",
    "compare": "harness.sweeps.compare",
    "nightly": "harness.sweeps.nightly",
    "mutants": "harness.mutants.command",
    "faults": "harness.faults",
    "serve": "harness.serving.serve",
    "report": "harness.serving.report",
}


def main() -> int:
    try:
        return run_subcommands("python -m harness", __doc__ or "", COMMANDS)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_UNKNOWN
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INTERNAL
    except Exception:
        traceback.print_exc()
        print("internal error: the traceback above is a harness bug; please report it", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
