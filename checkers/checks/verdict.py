"""The verdict: the checks, results.json's format and the short table printed for people.

`REGISTRY` is the one list of checks: its order is results.json's, and each `Check` says what
the report says it looks for, which evidence of a results folder it needs and uses beyond the
history (`layout.INPUTS`), and how its count counts (informational, or allowed in the prefix
read modes). The Spark checker, the reference checker and the report all read it from here.

A check is invalid when it found anomalies; "not applicable" when evidence it needs is absent
from the folder by design (an imported history has no node files); "unknown" when evidence it
needs or uses should be there and is not (a run that collected no final logs); valid
otherwise. The history alone decides every check that needs nothing else.
`recovered` is informational; stale and non-monotonic reads are allowed in the prefix read
modes (`committed`, `follower`, `unsafe`) and reported as such.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from checkers.layout import PREFIX_MODES

FINAL = "final-logs"


@dataclass(frozen=True)
class Check:
    """One check of the verdict."""

    name: str
    about: str  # what it looks for, in one sentence (the report's "what it looks for")
    needs: tuple[str, ...] = ()  # evidence beyond the history it cannot decide without
    uses: tuple[str, ...] = ()  # evidence beyond the history it adds when the folder has it
    reads_history: bool = True  # False: decided from node files only

    def evidence(self, present: frozenset[str]) -> list[str]:
        """The inputs it decided on, of those `present` in the folder."""
        own = ("history",) if self.reads_history else ()
        return [i for i in (*own, *self.needs, *self.uses) if i in present]
    informational: bool = False  # counted and shown, never invalid
    allowed_in_prefix_modes: bool = False  # only reported in the prefix read modes


REGISTRY: tuple[Check, ...] = (
    Check("lost", "an acknowledged append that a later read or consume covering its position does not "
          "return, or (with final logs) an acknowledged append or an entry an ok read saw that the final "
          "log does not hold", uses=(FINAL,)),
    Check("divergence", "one log index holding different ids"),
    Check("duplicate", "one id at two indexes"),
    Check("phantom", "an id in a log or read that no client appended"),
    Check("aborted-read", "an id seen whose append definitely failed"),
    Check("index-mismatch", "the ack said index i, a read, a consume or the final log has the id at j",
          uses=(FINAL,)),
    Check("realtime-reorder", "append A completed before B was invoked, yet A's index is after B's",
          uses=(FINAL,)),
    Check("stale-read", "a read invoked after an append to index i was acknowledged does not see i "
          "(a read of the whole log: does not return every append acknowledged before it)",
          allowed_in_prefix_modes=True),
    Check("future-read", "a read or consume saw an id whose append was invoked after it returned"),
    Check("uncommitted-read", "a read returned an entry past the commit index it reported with it "
          "(a read answers with committed entries only)", allowed_in_prefix_modes=True),
    Check("nonmonotonic-read", "a later read sees a shorter committed log", allowed_in_prefix_modes=True),
    Check("hole", "a gap in an ok read's entries, or below the highest committed index in a final log",
          uses=(FINAL,)),
    Check("malformed-answer", "a read or consume answer that contradicts its own request: entries "
          "out of order or repeated, outside [from, to], or `to` before from - 1"),
    Check("replica-disagreement", "node data files disagree at an index both committed",
          needs=("stores", FINAL), reads_history=False),
    Check("election-safety", "two leaders in one term, or one node leading a term twice", needs=("events",),
          reads_history=False),
    Check("stale-leader-read", "a read-index or lease read answered by a leader of a term below one "
          "whose leader was elected before the read was invoked", needs=("events",)),
    Check("leader-completeness", "a leader whose log, when it took office, ended below an index committed "
          "in an earlier term", needs=("events",), reads_history=False),
    Check("forgotten-vote", "a node that restarted with an earlier term, or another vote, than the term and "
          "vote it had saved or granted (Raft saves both before it answers)", needs=("events",),
          reads_history=False),
    Check("consumed-then-lost", "an entry a consumer consumed, missing from the final log", needs=(FINAL,)),
    Check("consume-divergence",
          "a consumed entry that the final log holds at another index (or not at that index), "
          "or two consumes that got different ids at one index",
          uses=(FINAL,)),
    Check("skipped-offset",
          "a consumer that moved its offset past entries it never consumed: it pulled from beyond "
          "its committed offset, got entries that are not consecutive from where it pulled, or "
          "committed an offset past the entries it got"),
    Check("recovered", "indeterminate appends that did land (not an error)", needs=(FINAL,),
          informational=True),
)
# stale-leader-read (`checkers.checks.leaderreads`): the read modes it judges, how long before an
# invoke a leader line must come, and the monotonic clock's drift from the wall clock it allows
JUDGED_MODES = ("read-index", "lease")
MARGIN_NS = 50_000_000
DRIFT = 0.0005
BY_NAME = {c.name: c for c in REGISTRY}
CHECKS = tuple(c.name for c in REGISTRY)
INFORMATIONAL = frozenset(c.name for c in REGISTRY if c.informational)
ALLOWED_IN_PREFIX_MODES = frozenset(c.name for c in REGISTRY if c.allowed_in_prefix_modes)
NOT_APPLICABLE = "not applicable"

Verdict = bool | str  # True, False or "unknown"


def undecided(by_design: frozenset[str], missing: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(check -> why it is unknown, check -> why it is not applicable) for a folder holding the
    evidence `by_design` (`layout.INPUTS`), of which `missing` (input -> why) is absent."""
    unknown: dict[str, str] = {}
    not_applicable: dict[str, str] = {}
    for c in REGISTRY:
        absent = [name for name in c.needs if name not in by_design]
        if absent:
            not_applicable[c.name] = f"needs {' and '.join(absent)}, which this folder has none of by design"
            continue
        lacking = [missing[name] for name in (*c.needs, *c.uses) if name in missing and name in by_design]
        if lacking:
            unknown[c.name] = lacking[0]
    return unknown, not_applicable


def decide(
    found: dict[str, tuple[int, list[Any]]],
    undecidable: dict[str, str],
    read_mode: str,
    stats: dict[str, Any],
    notes: list[str],
    not_applicable: dict[str, str] | None = None,
    present: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """results.json for one history from its anomalies, the checks it could not decide, the
    checks that do not apply to it, and the inputs `present` in its folder (`layout.INPUTS`)."""
    not_applicable = not_applicable or {}
    checks: dict[str, dict[str, Any]] = {}
    for name in CHECKS:
        count, witnesses = found.get(name, (0, []))
        entry: dict[str, Any] = {"valid": True, "count": count, "witnesses": witnesses}
        if present and name not in not_applicable:
            entry["evidence"] = BY_NAME[name].evidence(present)
        if name in not_applicable:
            entry["valid"] = NOT_APPLICABLE
        elif name in INFORMATIONAL:
            entry["informational"] = True
        elif name in ALLOWED_IN_PREFIX_MODES and read_mode in PREFIX_MODES:
            entry["allowed_by_read_mode"] = read_mode
        elif count:
            entry["valid"] = False
        elif name in undecidable:
            entry["valid"] = "unknown"
        why = not_applicable.get(name) or undecidable.get(name)
        if why:
            entry["note"] = why
        checks[name] = entry
    judged = [c["valid"] for n, c in checks.items() if n not in INFORMATIONAL]
    valid: Verdict = False if False in judged else "unknown" if "unknown" in judged else True
    if not_applicable:
        notes = [*notes, f"not applicable here: {', '.join(sorted(not_applicable))}"]
    if read_mode in PREFIX_MODES:
        notes = [
            *notes,
            f"read mode {read_mode}: reads held to the prefix model only; "
            "stale and non-monotonic reads are allowed and reported, not invalid",
        ]
    return {"valid": valid, "read_mode": read_mode, "checks": checks, "stats": stats, "notes": notes}


def add_never_read(verdict: dict[str, Any], never_read: int) -> None:
    """Say in `verdict`'s `lost`, when it is unknown for want of final logs, how many
    acknowledged appends no read or consume ever returned (Jepsen's drain count): `never_read`
    and a clause of its note. An unread append is not proven lost, so the check stays unknown."""
    lost = verdict["checks"]["lost"]
    if lost["valid"] != "unknown":
        return
    lost["never_read"] = never_read
    if never_read == 0:
        said = "every acknowledged append was read back"
    elif never_read == 1:
        said = "1 acknowledged append was never read back"
    else:
        said = f"{never_read} acknowledged appends were never read back"
    lost["note"] = f"{lost['note']}; {said}" if lost.get("note") else said


def exit_code(valid: Verdict) -> int:
    """0 valid, 1 invalid, 2 unknown."""
    return 0 if valid is True else 1 if valid is False else 2


def verdict_line(result: dict[str, Any]) -> str:
    """The verdict and read mode, that the faults did not bite when results.json's `bite` says so,
    and the scheduled faults that never ran."""
    line = f"valid: {json.dumps(result['valid'])}  (read mode {result['read_mode']})"
    bite = result.get("bite")
    if bite and not bite["bit"]:
        line += f"{', but' if result['valid'] is True else ';'} {bite['note']}"
    if bite and bite.get("unrun"):
        line += f"; scheduled but never ran: {', '.join(bite['unrun'])}"
    return line


def table(result: dict[str, Any]) -> str:
    """A short verdict table: one line per check, what the nodes exercised, the verdict last."""
    lines = [f"{'check':<22} {'verdict':<8} {'count':>8}  first witness"]
    for name, c in result["checks"].items():
        verdict = {True: "ok", False: "INVALID", "unknown": "unknown", NOT_APPLICABLE: "n/a"}[c["valid"]]
        if c.get("allowed_by_read_mode") and c["count"]:
            verdict = "allowed"
        if c.get("informational"):
            verdict = "info"
        first = json.dumps(c["witnesses"][0], separators=(",", ":")) if c["witnesses"] else ""
        count = c["count"]
        if "never_read" in c:  # an unknown `lost`: the acknowledged appends nothing read back
            count = c["never_read"]
            first = first or "acknowledged, never read back (no final logs)"
        lines.append(f"{name:<22} {verdict:<8} {count:>8}  {first[:100]}")
    if result.get("exercised"):
        lines.append(f"exercised: {result['exercised']['summary']}")
    lines.append(verdict_line(result))
    lines.extend(f"note: {n}" for n in result["notes"])
    return "\n".join(lines)
