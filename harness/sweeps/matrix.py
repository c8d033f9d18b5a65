"""The nightly sweep's matrix and its budget: which `harness run` tests a sweep runs, and what each
must conclude.

A **cell** is the flags of one run (mode, size, flush policy, faults, time limit) and the verdict
the design predicts for it, with the reason. **Controls** are cells that must come back invalid:
if one comes back valid, the harness has lost its teeth. A cell with a `known_risk` may get the
other verdict without a bug (its fault is outside the design's model, or the loss it predicts
needs a timing the schedule may miss): the sweep reports it and does not fail on it.

`plan` picks the cells that fit a time budget, deterministically: every control, then the
other cells in turns by mode (`SHARE[mode]` cells a turn, DLedger's the most), each mode's in
the order of its list below (its priority: the families alone first, loss-prone ones early, then
mixes and other sizes and flush policies), skipping a cell that no longer fits.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.chaos.modes import MODES
from nemesis import catalogue

OVERHEAD_S = 25.0  # a run besides its time limit: setup, heal, reads, teardown, check, report (14-22 s seen)
COMMON = ("--rate", "300", "--nemesis-interval", "5")  # a cell's `extra` flags come after, and win
SHARE = {"dledger": 4}  # cells a turn of `plan`; 1 for the other modes


@dataclass(frozen=True)
class Cell:
    """One test of the sweep: its run flags and the verdict it expects, with why."""

    nemesis: str
    why: str
    expect: str = "valid"
    mode: str = "dledger"  # a mode of our node (harness.chaos.modes), or another system's name (--system)
    nodes: int = 3
    flush: str | None = "sync"  # our node's flush policy (None for other systems)
    time_limit: float = 30.0
    extra: tuple[str, ...] = ()
    variant: str = ""  # tells apart cells that share mode, faults, flush and size
    control: bool = False
    known_risk: str | None = None  # why the other verdict can come without a bug

    @property
    def name(self) -> str:
        parts = [self.mode, self.nemesis.replace(",", "+"), self.flush, f"{self.nodes}n", self.variant]
        return "-".join(p for p in parts if p)

    @property
    def families(self) -> list[str]:
        return catalogue.resolve(self.nemesis)

    @property
    def estimate_s(self) -> float:
        return self.time_limit + OVERHEAD_S

    def argv(self) -> list[str]:
        """The `harness run` flags of this cell (without seed, name and results folder)."""
        design = (["--mode", self.mode, "--flush", self.flush or "sync"] if self.mode in MODES
                  else ["--system", self.mode])
        return [*design, "--nodes", str(self.nodes), "--time-limit", f"{self.time_limit:g}",
                "--nemesis", self.nemesis, *COMMON, *self.extra]


RAFT = "a majority keeps every committed entry and elects a leader that has them all"
ONE_AT_A_TIME = ("--nemesis-concurrency", "1")
EVERY_NODE_LOSES_POWER = ("--power-loss-targets", "all", "--nemesis-interval", "3", *ONE_AT_A_TIME,
                          "--rate", "500")
# the master among them: a slave's power loss alone touches no client, and the claim is the master's
MASTER_LOSES_POWER = ("--power-loss-targets", "all")
ISOLATE_LOSE = ("--nemesis-interval", "4", "--consumers", "2")
PAGE_CACHE = ("SIGKILL, SIGSTOP, partitions and clock skew leave the page cache, so async flush loses "
              "nothing acknowledged")
DURABLE_MASTER = "with sync flush the master fsyncs before it acknowledges, and nothing promotes a slave"
WIPED_VOTE = ("a wiped node forgets its term and vote (outside Raft's stable-storage model): it may vote "
              "twice in a term and let two leaders commit")

CONTROLS = (
    Cell("power-loss", "async flush acknowledges before fsync: when every node loses power at once, "
         "acknowledged entries are gone", expect="invalid", flush="async", time_limit=40,
         extra=EVERY_NODE_LOSES_POWER, variant="all-nodes", control=True),
    Cell("isolate-lose", "an isolated ASYNC_MASTER acknowledges writes no slave has; promoting a slave "
         "loses them", expect="invalid", mode="master-slave-async", time_limit=15, extra=ISOLATE_LOSE,
         control=True),
    Cell("power-loss", "ASYNC_MASTER with async flush acknowledges what no disk has: when every node loses "
         "power at once, acknowledged writes are gone", expect="invalid", mode="master-slave-async",
         flush="async", time_limit=40, extra=EVERY_NODE_LOSES_POWER, variant="all-nodes", control=True),
)

DLEDGER = (
    Cell("kill", RAFT),
    Cell("partition", RAFT),
    Cell("power-loss", "with sync flush every acknowledged entry was fsynced on a majority"),
    Cell("default", PAGE_CACHE, flush="async", time_limit=60),
    Cell("pause", RAFT),
    Cell("all", RAFT, time_limit=50, extra=("--nemesis-interval", "2.5", "--nemesis-concurrency", "2")),
    Cell("all", RAFT, nodes=5, time_limit=60,
         extra=("--nemesis-interval", "4", "--nemesis-concurrency", "2")),
    *(Cell(family, RAFT) for family in ("clock", "disk", "packet", "churn", "part-kill", "pause-kill",
                                        "swizzle-clog", "bounce", "stale-leader")),
    Cell("lagging-majority", "every committed entry was fsynced on a majority, so on the one node that "
         "comes back to the lagging minority", nodes=5),
    Cell("isolate-lose", "the isolated leader commits nothing alone; the majority elects another",
         time_limit=15, extra=ISOLATE_LOSE),
    Cell("lose-node", RAFT, extra=ONE_AT_A_TIME, known_risk=WIPED_VOTE),
    Cell("stop", RAFT),
    Cell("default", RAFT, nodes=5, time_limit=60),
    Cell("crash", PAGE_CACHE, flush="async", nodes=5),
    Cell("partition", RAFT, nodes=5),
    Cell("part-kill", RAFT, nodes=5),
)

MASTER_SLAVE_REST = ("pause", "stop", "clock", "packet", "part-kill", "swizzle-clog", "bounce",
                     "stale-leader")
SYNC_MASTER = (
    Cell("kill", DURABLE_MASTER, mode="master-slave-sync"),
    Cell("partition", "an isolated SYNC_MASTER acknowledges nothing no slave has (SLAVE_NOT_AVAILABLE)",
         mode="master-slave-sync"),
    Cell("lose-node", "the harness promotes the most advanced slave, which holds everything a SYNC_MASTER "
         "acknowledged (it waits for a slave)", mode="master-slave-sync", extra=ONE_AT_A_TIME),
    Cell("isolate-lose", "an isolated SYNC_MASTER acknowledges nothing no slave has (SLAVE_NOT_AVAILABLE)",
         mode="master-slave-sync", time_limit=15, extra=ISOLATE_LOSE),
    Cell("power-loss", DURABLE_MASTER, mode="master-slave-sync", extra=MASTER_LOSES_POWER),
    Cell("default", DURABLE_MASTER, mode="master-slave-sync", nodes=5, time_limit=60),
    *(Cell(family, DURABLE_MASTER, mode="master-slave-sync") for family in MASTER_SLAVE_REST),
)
ASYNC_MASTER = (
    Cell("lose-node", "an ASYNC_MASTER acknowledges before its slaves pull; losing it loses what they had "
         "not pulled", expect="invalid", mode="master-slave-async",
         extra=("--lose-node-targets", "leader", *ONE_AT_A_TIME),
         known_risk="the slaves may have pulled every acknowledged write at the instant the master is lost"),
    Cell("kill", DURABLE_MASTER, mode="master-slave-async"),
    Cell("partition", "an isolated master keeps what it acknowledged; its slaves catch up after the heal",
         mode="master-slave-async"),
    Cell("default", DURABLE_MASTER, mode="master-slave-async"),
    Cell("power-loss", DURABLE_MASTER, mode="master-slave-async", extra=MASTER_LOSES_POWER),
    *(Cell(family, DURABLE_MASTER, mode="master-slave-async") for family in MASTER_SLAVE_REST),
)

NATS_ACKS_EARLY = ("JetStream acknowledges a publish before it fsyncs (sync_interval: every 2 minutes by "
                   "default): when every node loses power at once, acknowledged messages are gone, on a "
                   "young stream the stream itself (Jepsen's NATS 2.12.1 analysis, nats-server issue 7564)")
NATS_ALWAYS = ("--nats-sync-interval", "always")
JETSTREAM = "a majority of the stream's replicas keeps every acknowledged message and elects a leader"
NATS = (
    Cell("power-loss", NATS_ACKS_EARLY, expect="invalid", mode="nats", flush=None, time_limit=20,
         extra=("--power-loss-targets", "all"), variant="all-nodes", control=True),
    Cell("power-loss", "with sync_interval always a server fsyncs each message before it acknowledges",
         mode="nats", flush=None, time_limit=20, extra=("--power-loss-targets", "all", *NATS_ALWAYS),
         variant="all-nodes-always"),
    *(Cell(family, JETSTREAM, mode="nats", flush=None) for family in ("kill", "partition", "pause", "churn")),
    Cell("kill,partition,pause,churn", JETSTREAM, mode="nats", flush=None, nodes=5, time_limit=60),
)

ETCD_RAFT = "etcd's Raft fsyncs its WAL before it acknowledges; a majority keeps every acknowledged write"
# etcd under power loss is bench/reproduce.py's (with --unsafe-no-fsync the members may not come back
# at all, an unknown verdict); these cells are its must-pass, Jepsen's clean bill for etcd 3.4.
# A one-family cell holds two faults: drawn from kill's and pause's default targets, both may miss
# the leader and bite nothing (etcd's kill and pause cells at seed 4 changed no leader and failed no
# operation); aimed at the leader, each changes it.
AT_LEADER = {"kill": ("--kill-targets", "leader"), "pause": ("--pause-targets", "leader")}
ETCD = (
    *(Cell(family, ETCD_RAFT, mode="etcd", flush=None, extra=AT_LEADER.get(family, ()))
      for family in ("kill", "partition", "pause", "churn")),
    Cell("kill,partition,pause,churn", ETCD_RAFT, mode="etcd", flush=None, nodes=5, time_limit=60),
)

MATRIX: tuple[Cell, ...] = (*CONTROLS, *DLEDGER, *SYNC_MASTER, *ASYNC_MASTER, *NATS, *ETCD)
DESIGNS = tuple(dict.fromkeys(cell.mode for cell in MATRIX))  # our node's modes, then other systems

# The families no master-slave cell runs, and why.
NOT_IN_MASTER_SLAVE = {
    "churn": "it moves Raft leadership; master-slave has no election and refuses leadership transfer",
    "pause-kill": "it waits for the others to elect a new leader, which master-slave never does",
    "lagging-majority": "it waits for the lagging minority and one powered-on node to elect a leader, which "
                        "master-slave never does",
    "disk": "a master whose damaged tail recovery cuts stays master and nothing in the design repairs it, "
            "so the verdict hangs on whether the draw hit the master",
}


def chosen(only: str | None = None) -> list[Cell]:
    """The cells of MATRIX whose name contains one of the comma-separated words of `only` (every cell
    when None)."""
    return [cell for cell in MATRIX if matches(cell, only)]


def matches(cell: Cell, only: str | None) -> bool:
    """Whether `cell`'s name contains one of the comma-separated words of `only` (always when None)."""
    words = [word for word in (only or "").split(",") if word]
    return not words or any(word in cell.name for word in words)


def plan(cells: list[Cell], budget_s: float, seeds: int = 1) -> list[Cell]:
    """The cells to run within `budget_s` (each for `seeds` seeds), in running order; see the module doc.

    Controls always run, even past the budget.
    """
    picked = [cell for cell in cells if cell.control]
    left = budget_s - seeds * sum(cell.estimate_s for cell in picked)
    queues = [[cell for cell in cells if cell.mode == mode and not cell.control] for mode in DESIGNS]
    while any(queues):
        for mode, queue in zip(DESIGNS, queues, strict=True):
            for _ in range(SHARE.get(mode, 1)):
                while queue and seeds * queue[0].estimate_s > left:
                    queue.pop(0)  # the budget only shrinks: it will never fit
                if queue:
                    picked.append(queue.pop(0))
                    left -= seeds * picked[-1].estimate_s
    return picked
