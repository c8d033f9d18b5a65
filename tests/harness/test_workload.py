"""Workers record Jepsen outcomes: ok, fail for definite refusals, info (and a new process) otherwise.

The log here is an in-memory stand-in; real clients against real nodes run in the chaos tests.
"""

import json
import random
import threading
import time

from harness.chaos.generator import FaultStep, Mix
from harness.chaos.history import History
from harness.chaos.nemesis_runner import NemesisRunner
from harness.chaos.workload import (
    DIRECT_READ_TIMEOUT_S,
    Acked,
    LeaseGate,
    Served,
    WorkloadState,
    start_workers,
)
from nemesis.clock import CLOCK
from nemesis.pause import PAUSE
from nemesis.recipes import STALE_LEADER
from nodes.client import DefiniteFailure, IndeterminateFailure, ReadResult
from nodes.store.logstore import Entry
from systems.dledger import read_value


class ScriptedLog:
    """Appends succeed, except every 7th is refused and every 11th times out."""

    def __init__(self):
        self.entries: list[Entry] = []
        self.calls = 0
        self.lock = threading.Lock()
        self.closed = 0
        self.reads: list[tuple[str | None, str, float | None]] = []

    def connect(self):
        return self

    def append(self, body):
        with self.lock:
            self.calls += 1
            if self.calls % 7 == 0:
                raise DefiniteFailure("NOT_LEADER")
            if self.calls % 11 == 0:
                raise IndeterminateFailure("timeout")
            entry = Entry(len(self.entries), 1, body)
            self.entries.append(entry)
            return Acked(entry.index, "n1", {"term": 1})

    def read(self, first, last, node=None, mode="", timeout=None):
        with self.lock:
            self.reads.append((node, mode, timeout))
            result = ReadResult(self.entries[first : last + 1], len(self.entries) - 1, node or "n2", last)
            return Served(read_value(first, result), result.node)

    def close(self):
        self.closed += 1


def run_workload(tmp_path, ops_wanted=400, mix=None):
    log = ScriptedLog()
    state = WorkloadState()
    path = tmp_path / "history.jsonl"
    with History(path) as history:
        threads = start_workers(
            4, seed=9, rate=0, mix=mix or Mix(payload_size=32), history=history, state=state,
            connect=log.connect,
        )
        while sum(history.counts.values()) < ops_wanted and all(t.is_alive() for t in threads):
            threads[0].join(0.01)
        state.stop.set()
        for t in threads:
            t.join(5)
    return log, [json.loads(line) for line in path.read_text().splitlines()]


def test_outcomes_and_fresh_processes_after_info(tmp_path):
    _, ops = run_workload(tmp_path)
    completions = [op for op in ops if op["type"] != "invoke"]
    kinds = {op["type"] for op in completions if op["f"] == "append"}
    assert kinds == {"ok", "fail", "info"}
    open_by_process = {}
    for op in ops:
        if op["type"] == "invoke":
            assert op["process"] not in open_by_process
            open_by_process[op["process"]] = op
        else:
            assert open_by_process.pop(op["process"])["f"] == op["f"]
    assert not open_by_process, "every invoke completed"
    info_processes = {op["process"] for op in completions if op["type"] == "info"}
    assert info_processes
    for p in info_processes:
        info_at = next(op["index"] for op in completions if op["process"] == p and op["type"] == "info")
        assert not any(op["process"] == p and op["index"] > info_at for op in ops), "no reuse after info"
    processes = {op["process"] for op in ops}
    for w in range(4):
        mine = [op for op in completions if op["process"] % 4 == w]
        infos = sum(1 for op in mine if op["type"] == "info")
        used = infos if mine[-1]["type"] == "info" else infos + 1  # the run may end right after an info
        assert {p for p in processes if p % 4 == w} == {w + 4 * k for k in range(used)}, (
            "worker w uses w, then w+4 after its first info, w+8 after its second ..."
        )


def test_ok_values_carry_indexes_and_read_ids(tmp_path):
    log, ops = run_workload(tmp_path)
    acks = [op for op in ops if op["type"] == "ok" and op["f"] == "append"]
    assert all(log.entries[a["value"]["log_index"]].body.startswith(a["value"]["id"].encode()) for a in acks)
    reads = [op for op in ops if op["type"] == "ok" and op["f"] == "read"]
    assert reads, "reads are mixed in once something was acknowledged"
    for r in reads:
        v = r["value"]
        assert all(v["from"] <= i <= v["to"] for i, _ in v["entries"])
        assert all(ident.startswith("p") for _, ident in v["entries"])
        assert r["node"] == "n2"


def test_reads_go_where_and_how_their_op_says(tmp_path):
    mix = Mix(payload_size=32, read_modes=("read-index", "lease"), nodes=("n1", "n3"), direct_fraction=0.5)
    log, ops = run_workload(tmp_path, mix=mix)
    asked = {(node, mode, timeout) for node, mode, timeout in log.reads}
    assert {mode for _, mode, _ in asked} == {"read-index", "lease"}
    assert (None, "lease", None) in asked, "an undirected read goes to the leader with the op timeout"
    assert ("n3", "lease", DIRECT_READ_TIMEOUT_S) in asked, "a directed read asks its node, briefly"
    invoked = {}
    for op in ops:
        if op["f"] == "read" and op["type"] == "invoke":
            invoked[op["process"]] = op["value"]
        elif op["f"] == "read" and op["type"] == "ok":
            assert op["node"] == invoked[op["process"]].get("at", "n2"), "the asked node answered"


def test_client_bugs_become_info_not_open_invokes(tmp_path):
    class Broken(ScriptedLog):
        def append(self, body):
            raise KeyError("boom")

    log = Broken()
    state = WorkloadState()
    with History(tmp_path / "h.jsonl") as history:
        threads = start_workers(1, 1, 0, Mix(), history, state, log.connect)
        while history.counts["info"] < 3:
            threads[0].join(0.01)
        state.stop.set()
        threads[0].join(5)
        assert history.open_processes() == {}
    lines = [json.loads(x) for x in (tmp_path / "h.jsonl").read_text().splitlines()]
    assert "client error: KeyError('boom')" in lines[1]["error"]


def test_lease_reads_wait_out_clock_faults():
    gate = LeaseGate(quiet_s=600)
    assert gate.mode("lease") == "lease" and gate.mode("read-index") == "read-index"
    gate.stepping(True)
    assert gate.mode("lease") == "read-index", "no lease read while a clock is stepped"
    gate.stepping(False)
    assert gate.mode("lease") == "read-index", "nor while a lease taken on the stepped clock may run"
    brief = LeaseGate(quiet_s=0)
    brief.stepping(True)
    brief.stepping(True)
    brief.stepping(False)
    assert brief.mode("lease") == "read-index", "one of two clock faults still in force"
    brief.stepping(False)
    assert brief.mode("lease") == "lease"


def test_the_nemesis_closes_the_lease_gate_around_clock_faults(tmp_path):
    class Fault:
        def start(self, rng):
            seen.append(gate.mode("lease"))
            return {"targets": []}

        def stop(self):
            return {"targets": []}

    seen: list[str] = []
    gate = LeaseGate(quiet_s=600)
    families = {"clock": CLOCK, "pause": PAUSE}
    with History(tmp_path / "h.jsonl") as history:
        runner = NemesisRunner(families, {"clock": Fault(), "pause": Fault()}, [], history,
                               random.Random(1), gate)
        runner.inject("pause")
        runner.inject("clock")
        runner.stop_faults()
    assert seen == ["lease", "read-index"], "closed before the clock fault starts, not for a pause"
    assert gate.mode("lease") == "read-index"


def test_a_fault_that_did_not_step_a_clock_reopens_the_lease_gate_at_once(tmp_path):
    class Fault:
        def __init__(self, stepped):
            self.stepped = stepped

        def start(self, rng):
            return {"targets": [], "stepped_clock": self.stepped}

        def stop(self):
            return {"targets": []}

    gate = LeaseGate(quiet_s=600)
    with History(tmp_path / "h.jsonl") as history:
        runner = NemesisRunner({"stale-leader": STALE_LEADER}, {"stale-leader": Fault(False)}, [], history,
                               random.Random(1), gate)
        runner.inject("stale-leader")
        assert gate.mode("lease") == "lease", "a paused stale leader keeps lease reads in the model"
        runner.stop_faults()
        assert gate.mode("lease") == "lease", "and its stop releases nothing twice"
        runner.faults["stale-leader"] = Fault(True)
        runner.inject("stale-leader")
        assert gate.mode("lease") == "read-index"


def test_a_nemesis_behind_its_schedule_says_how_late_it_ran_and_what_never_ran(tmp_path):
    entered, release = threading.Event(), threading.Event()

    class Slow:
        def start(self, rng):
            entered.set()
            release.wait(10)
            return {"targets": []}

        def stop(self):
            return {"targets": []}

    schedule = [FaultStep(0, "start", "pause"), FaultStep(1, "stop", "pause"),
                FaultStep(2, "start", "clock"), FaultStep(3, "stop", "clock")]
    with History(tmp_path / "h.jsonl") as history:
        runner = NemesisRunner({"clock": CLOCK, "pause": PAUSE}, {"pause": Slow(), "clock": Slow()}, schedule,
                               history, random.Random(1))
        runner.start(time.monotonic() - 10)  # every step is due 7 to 10 s ago
        assert entered.wait(10), "the first fault never started"
        assert not runner.finish(0), "the schedule cannot be done while a fault op hangs"
        assert runner.unrun() == ["clock"]
        release.set()
        assert runner.finish(10)
        assert runner.unrun() == []
        assert runner.late >= 7
        runner.stop_faults()
