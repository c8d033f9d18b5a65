"""The fault log: what each fault did, from a history and the nodes' events (pure, no cluster)."""

from checkers.pages.timeline import TimelineReader
from checkers.run.faultlog import fault_log
from checkers.run.faultperiods import FaultPairing
from checkers.run.reader import feed

S = 1_000_000_000
WALL = 1_700_000_000 * S
VOCAB = {"kill": {"start": "kill", "stop": "start", "label": "kill"},
         "churn": {"start": "transfer-leader", "stop": None, "label": "leader churn"}}


def op(t, kind, process, f, value=None):
    return {"time": int(t * S), "type": kind, "process": process, "f": f, "value": value}


def client(t_invoke, t_done, kind, f="append", process=0):
    return [op(t_invoke, "invoke", process, f), op(t_done, kind, process, f)]


def role(t, node, term, what):
    return {"event": "role", "real_ns": WALL + int(t * S), "time_ns": 0, "node": node, "term": term,
            "role": what, "leader": node if what == "leader" else None}


def test_a_leader_kill_is_recorded_with_its_effects():
    history = [
        *client(0.5, 1.0, "ok"),
        op(2.0, "invoke", "nemesis", "kill"), op(2.1, "info", "nemesis", "kill", {"targets": ["n1"]}),
        *client(2.2, 3.0, "info"), *client(2.3, 2.4, "fail"), *client(3.1, 4.5, "ok"),
        op(6.0, "invoke", "nemesis", "start"), op(6.5, "info", "nemesis", "start", {"targets": ["n1"]}),
        *client(6.6, 7.0, "ok"),
    ]
    events = [role(0.1, "n1", 1, "leader"), role(2.5, "n2", 2, "candidate"), role(2.9, "n2", 2, "leader")]
    log = fault_log(history, VOCAB, events, WALL)
    (kill,) = log["faults"]
    assert kill["family"] == "kill" and kill["targets"] == ["n1"]
    assert kill["start_s"] == 2.0 and kill["end_s"] == 6.5
    assert kill["leader_before"] == "n1" and kill["leader_hit"] is True
    assert kill["leader_changes"] == 1 and kill["elections"] == 1
    assert kill["ops"] == {"ok": 1, "fail": 1, "info": 1}
    assert kill["longest_no_append_s"] == 2.5  # from the start (2.0) to the ok at 4.5
    assert kill["recovery_s"] == 0.5  # the ok append at 7.0
    assert log["leader_changes"] == 1 and log["elections"] == 1


def test_without_node_events_who_led_is_unknown_not_zero():
    """Another system under test writes no events.jsonl: the leader fields are null, the ops still count."""
    history = [op(2.0, "invoke", "nemesis", "kill"), op(2.1, "info", "nemesis", "kill", {"targets": ["n1"]}),
               *client(2.2, 3.0, "info"), op(6.0, "invoke", "nemesis", "start"),
               op(6.5, "info", "nemesis", "start", {"targets": ["n1"]})]
    log = fault_log(history, VOCAB, None, WALL)
    (kill,) = log["faults"]
    assert log["leader_changes"] is None and log["elections"] is None
    assert (kill["leader_hit"], kill["leader_changes"], kill["elections"]) == (None, None, None)
    assert kill["ops"] == {"ok": 0, "fail": 0, "info": 1}


def test_a_read_refused_by_the_one_node_it_asked_is_not_a_fault_effect():
    asked = {"from": 0, "to": 1, "at": "n3"}
    history = [op(1.0, "invoke", "nemesis", "kill"), op(1.1, "info", "nemesis", "kill", {"targets": ["n3"]}),
               op(1.2, "invoke", 0, "read", asked), {**op(1.3, "fail", 0, "read", asked),
                                                     "error": "n3 answered NOT_LEADER"},
               op(1.4, "invoke", 1, "read", asked), op(1.5, "info", 1, "read", asked),
               *client(1.6, 1.7, "fail", process=2), op(3.0, "invoke", "nemesis", "start"),
               op(3.1, "info", "nemesis", "start", {"targets": ["n3"]})]
    (kill,) = fault_log(history, VOCAB, [role(0.1, "n1", 1, "leader")], WALL)["faults"]
    assert kill["ops"] == {"ok": 0, "fail": 1, "info": 1}, "a directed read's NOT_LEADER refusal is left out"


def test_a_directed_read_that_found_its_node_dead_is_a_fault_effect():
    asked = {"from": 0, "to": 1, "at": "n3"}
    history = [op(1.0, "invoke", "nemesis", "kill"), op(1.1, "info", "nemesis", "kill", {"targets": ["n3"]}),
               op(1.2, "invoke", 0, "read", asked), {**op(1.3, "fail", 0, "read", asked),
                                                     "error": "n3: connection refused"},
               op(3.0, "invoke", "nemesis", "start"),
               op(3.1, "info", "nemesis", "start", {"targets": ["n3"]})]
    (kill,) = fault_log(history, VOCAB, [role(0.1, "n1", 1, "leader")], WALL)["faults"]
    assert kill["ops"]["fail"] == 1


def test_a_follower_fault_that_moved_nothing_says_so():
    history = [op(1.0, "invoke", "nemesis", "kill"), op(1.1, "info", "nemesis", "kill", {"targets": ["n3"]}),
               *client(1.2, 1.3, "ok"), op(3.0, "invoke", "nemesis", "start"),
               op(3.1, "info", "nemesis", "start", {"targets": ["n3"]})]
    (kill,) = fault_log(history, VOCAB, [role(0.1, "n1", 1, "leader")], WALL)["faults"]
    assert kill["leader_hit"] is False and kill["leader_changes"] == 0 and kill["recovery_s"] is None
    assert kill["longest_no_append_s"] == 1.8


def test_instant_faults_and_errors():
    history = [op(1.0, "invoke", "nemesis", "transfer-leader"),
               op(1.4, "info", "nemesis", "transfer-leader", {"targets": ["n1", "n2"], "to": "n2"}),
               op(2.0, "invoke", "nemesis", "kill"),
               {**op(2.2, "info", "nemesis", "kill"), "error": "CommandFailed: boom"}]
    churn, kill = fault_log(history, VOCAB, [], WALL)["faults"]
    assert (churn["start_s"], churn["end_s"], churn["detail"]) == (1.0, 1.4, {"to": "n2"})
    assert kill["error"] == "CommandFailed: boom" and kill["targets"] == []


def consume(t_invoke, t_done, kind, consumer=0, process=9):
    asked = {"consumer": consumer, "from": 0}
    done = {**asked, "to": -1, "entries": [], "offset": 0} if kind == "ok" else asked
    return [op(t_invoke, "invoke", process, "consume", asked), op(t_done, kind, process, "consume", done)]


def test_consumer_stall_is_the_longest_stretch_a_consumer_got_no_answer_and_consumes_are_not_client_ops():
    history = [
        *consume(0.0, 0.1, "ok"), *consume(0.0, 0.2, "ok", consumer=1, process=8),
        op(1.0, "invoke", "nemesis", "kill"), op(1.1, "info", "nemesis", "kill", {"targets": ["n1"]}),
        *consume(1.2, 1.3, "fail"), *consume(1.4, 4.4, "info"), *consume(4.5, 4.6, "ok", process=14),
        *consume(1.5, 1.6, "ok", consumer=1, process=8),
        op(5.0, "invoke", "nemesis", "start"), op(5.1, "info", "nemesis", "start", {"targets": ["n1"]}),
    ]
    (kill,) = fault_log(history, VOCAB, [], WALL)["faults"]
    assert kill["consumer_stall_s"] == 3.6  # consumer 0: from the start (1.0) to its ok at 4.6
    assert kill["ops"] == {"ok": 0, "fail": 0, "info": 0}
    (plain,) = fault_log([op(1.0, "invoke", "nemesis", "kill"), op(1.1, "info", "nemesis", "kill", {})],
                         VOCAB, [], WALL)["faults"]
    assert "consumer_stall_s" not in plain


def test_a_fault_never_stopped_lasts_to_the_end_of_the_history_in_the_log_as_in_the_report():
    """An interrupted run: the kill was never stopped, the last line is a client's info. The fault
    log's record and the report's band both end at that line (not at the last ok op)."""
    history = [op(1.0, "invoke", "nemesis", "kill"), op(1.1, "info", "nemesis", "kill", {"targets": ["n1"]}),
               *client(2.0, 3.0, "ok"), *client(3.5, 5.0, "info")]
    (kill,) = fault_log(history, VOCAB, [], WALL)["faults"]
    assert (kill["start_s"], kill["end_s"], kill["recovery_s"]) == (1.0, 5.0, None)
    assert kill["ops"] == {"ok": 1, "fail": 0, "info": 1} and kill["longest_no_append_s"] == 2.0
    faults = FaultPairing(VOCAB)
    bands = TimelineReader(faults)
    feed(history, [faults, bands])
    assert [(p.fault, p.start, p.end) for p in bands.timeline.faults] == [("kill", 1.0, 5.0)]


def test_a_start_that_never_completed_is_in_force_to_the_end_without_a_value():
    history = [*client(0.5, 1.0, "ok"), op(2.0, "invoke", "nemesis", "kill"), *client(2.1, 2.6, "info")]
    (kill,) = fault_log(history, VOCAB, [role(0.1, "n1", 1, "leader")], WALL)["faults"]
    assert (kill["start_s"], kill["end_s"], kill["targets"], kill["leader_hit"]) == (2.0, 2.6, [], False)
