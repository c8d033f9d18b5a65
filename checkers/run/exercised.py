"""What a run exercised, and whether its faults bit: results.json's `exercised` and `bite`.

`exercised` reads every node's events.jsonl once. Its `rules` lines (see nodes/events.py)
each hold the guarded rules of `nodes.coverage.RULES` fired since the process's previous
one, so they sum over the lines and over the incarnations of a node in one file. Its role
lines give the elections won (a node becoming leader of a term), the distinct leaders, the
leader changes (the leaders of successive terms differ; the first leader is not a change)
and the step-downs (a leader's next role line is not leader: it stepped down, or it was
killed and came back). Commit lines, most of a file, are not parsed here: the election
check reads every line.

`bite`: a run with faults whose nodes changed no leader and whose operations none failed or
was indeterminate (test.json's client and consume outcomes; without them, the outcomes while
each fault was in force) did not test much, whatever its verdict; nor did a run that asked for
faults (test.json's `faults`) whose schedule ran none. `unrun` names the families the schedule
held that never started (test.json's `nemesis_unrun`: the run ended first).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from checkers.jsonlines import event_line_problem, iter_jsonl
from checkers.layout import ResultsDir, read_json_object
from nodes.coverage import RULES

NO_BITE = "the faults changed no leader and failed no operation"
NO_FAULT = "no fault ran: the nemesis schedule held no slot (a time limit too short for the nemesis interval)"
COMMIT_LINE = b'"event":"commit"'  # as the nodes write it (compact JSON)


def run_summary(layout: ResultsDir) -> dict[str, Any]:
    """results.json's `exercised` and `bite` of one folder (None when it has no events, or
    `bite` when the run had no faults); InputError names a malformed events line."""
    logs = layout.event_logs()
    found = exercised(logs) if logs else None
    return {"exercised": found, "bite": bite(read_json_object(layout.path / "test.json") or {}, found)}


def exercised(event_logs: dict[str, Path]) -> dict[str, Any]:
    """The rules fired and the elections of every node's events.jsonl (node -> path)."""
    fired: Counter[str] = Counter()
    won: set[tuple[int, str]] = set()  # (term, leader)
    step_downs = 0
    for path in event_logs.values():
        leading = False
        for event in _events(path):
            if event.get("event") == "rules":
                fired.update(event["counts"])
            elif "role" in event:
                if event["role"] == "leader":
                    won.add((event["term"], event["node"]))
                elif leading:
                    step_downs += 1
                leading = event["role"] == "leader"
    names = [*RULES, *sorted(set(fired) - set(RULES))]
    rules = {name: fired[name] for name in names if fired[name]}
    leaders = [node for _, node in sorted(won)]
    changes = sum(a != b for a, b in itertools.pairwise(leaders))
    never = [name for name in RULES if not fired[name]]
    summary = (f"{_n(len(won), 'election')} won by {_n(len(set(leaders)), 'leader')}, "
               f"{_n(changes, 'leader change')}, {_n(step_downs, 'step-down')}; "
               f"{len(RULES) - len(never)} of {len(RULES)} guarded rules fired "
               f"({_n(sum(rules.values()), 'firing')}), {len(never)} never")
    return {"rules": rules, "never_fired": never, "elections": len(won), "leaders": sorted(set(leaders)),
            "leader_changes": changes, "step_downs": step_downs, "summary": summary}


def bite(test: dict[str, Any], found: dict[str, Any] | None) -> dict[str, Any] | None:
    """Whether the run's faults changed a leader or failed an operation; None when the run asked
    for no faults, or had no events (`found`, from `exercised`) to tell whether its faults bit."""
    faults = (test.get("fault_log") or {}).get("faults") or []
    unrun = test.get("nemesis_unrun", [])
    if not faults and test.get("faults") and "fault_log" in test:
        return {"faults": 0, "leader_changes": None, "failed_ops": None, "bit": False, "note": NO_FAULT,
                "unrun": unrun}
    if not faults or found is None:
        return None
    if isinstance(test.get("client_outcomes"), dict):
        outcomes = [test["client_outcomes"], test.get("consume_outcomes") or {}]
        refused = test.get("directed_read_refusals", 0)  # the asked node did not lead: no fault needed
    else:
        outcomes, refused = [fault.get("ops", {}) for fault in faults], 0
    failed = sum(o.get("fail", 0) + o.get("info", 0) for o in outcomes) - refused
    bit = found["leader_changes"] > 0 or failed > 0
    return {"faults": len(faults), "leader_changes": found["leader_changes"], "failed_ops": failed,
            "bit": bit, "note": None if bit else NO_BITE, "unrun": unrun}


def _events(path: Path) -> Iterator[dict[str, Any]]:
    """The lines of one events.jsonl but its commit lines; InputError names a line that is not
    JSON or not well-formed; a torn last line is skipped (`checkers.jsonlines.iter_jsonl`)."""
    for _, record in iter_jsonl(path, _problem, skip=COMMIT_LINE):
        yield record


def _problem(record: Any) -> str | None:
    """What is wrong with an events line: a role line's problem, or a rules line's."""
    problem = event_line_problem(record)
    if problem or record.get("event") != "rules":
        return problem
    counts = record.get("counts")
    if not (isinstance(counts, dict)
            and all(type(n) is int and n >= 0 for n in counts.values())):
        return "a rules line needs `counts`, an object of rule names to counts (integers from 0)"
    return None


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"
