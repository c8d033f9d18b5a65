"""Edge cases: empty and cut-off histories, only failures, missing final logs, read modes, stores,
node events (a term led twice, a wiped node)."""

from __future__ import annotations

import pytest

from checkers.reference import reference_check

pytestmark = pytest.mark.spark


def _verdicts(result):
    return {name: c["valid"] for name, c in result["checks"].items()}


def test_empty_history_is_unknown_not_valid(checked):
    _, result = checked["empty"]
    assert result["valid"] == "unknown"
    assert result["stats"]["history_lines"] == 0
    assert all(c["count"] == 0 for c in result["checks"].values())
    assert result["checks"]["lost"]["valid"] == "unknown" and "final" in result["checks"]["lost"]["note"]


def test_only_failures_loses_nothing(checked):
    _, result = checked["only-failures"]
    assert result["stats"]["append_ops"] > 0
    assert {n for n, v in _verdicts(result).items() if v is not True} == {"replica-disagreement"}


def test_cut_off_run_is_checked_with_open_invokes_as_indeterminate(checked):
    case, result = checked["cut-off"]
    lines = case.path.joinpath("history.jsonl").read_text().splitlines()
    assert result["stats"]["history_lines"] == len(lines) - 1, "the torn last line is skipped"
    assert result["stats"]["client_completions"] < result["stats"]["append_ops"] + result["stats"]["read_ops"]
    assert {n for n, v in _verdicts(result).items() if v is not True} == {"replica-disagreement"}


def test_missing_final_log_of_one_node_is_noted_and_the_rest_decided(checked):
    _, result = checked["missing-node-log"]
    assert any("n3" in note for note in result["notes"])
    assert result["checks"]["lost"]["valid"] is True, "two of three final logs are a majority"
    assert set(result["stats"]["final_log_ends"]) == {"n1", "n2"}


def test_without_final_logs_the_checks_that_need_them_are_unknown(checked):
    _, result = checked["no-final-logs"]
    for name in ("lost", "index-mismatch", "realtime-reorder", "hole"):
        assert result["checks"][name]["valid"] == "unknown", name
    assert result["checks"]["stale-read"]["valid"] is True
    assert result["valid"] == "unknown"


def test_committed_mode_reports_stale_reads_as_allowed(checked):
    _, result = checked["committed-mode"]
    stale = result["checks"]["stale-read"]
    assert stale["count"] >= 1 and stale["valid"] is True and stale["allowed_by_read_mode"] == "committed"
    assert result["valid"] is not False
    assert any("prefix model" in note for note in result["notes"])


def test_agreeing_store_files_make_the_verdict_fully_valid(checked):
    _, result = checked["stores"]
    assert result["checks"]["replica-disagreement"] == {
        "valid": True, "count": 0, "witnesses": [], "evidence": ["stores", "final-logs"]
    }
    assert result["checks"]["lost"]["evidence"] == ["history", "final-logs"]
    assert result["valid"] is True


def test_a_store_that_disagrees_at_a_committed_index_is_found(checked):
    case, result = checked["stores-disagree"]
    check = result["checks"]["replica-disagreement"]
    assert check["valid"] is False and check["count"] == 1
    [witness] = check["witnesses"]
    assert witness["log_index"] == case.expected["log_index"]
    tampered = [n for n in witness["nodes"] if n["store_id"] == "tampered"]
    assert tampered and tampered[0]["final_id"] != "tampered"


def test_a_node_leading_one_term_twice_breaks_election_safety(checked):
    case, result = checked["relead"]
    check = result["checks"]["election-safety"]
    assert check["valid"] is False and check["count"] == 1, check
    [witness] = check["witnesses"]
    assert witness["term"] == case.expected["term"] and witness["leaderships"] == 2, witness
    assert len(witness["leaders"]) == 1, "one node, twice: not two names"
    assert reference_check(case.path)["checks"]["election-safety"]["count"] == 1


def test_a_wiped_node_starting_fresh_has_not_forgotten_its_vote(checked):
    case, result = checked["wiped"]
    check = result["checks"]["forgotten-vote"]
    assert check["valid"] is True and check["count"] == 0, check
    assert reference_check(case.path)["checks"]["forgotten-vote"]["count"] == 0
