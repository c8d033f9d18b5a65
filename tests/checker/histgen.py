"""Injections of every anomaly the checker finds, into correct synthetic histories.

`inject(sim, name, rng)` breaks a `checkers.synth.simulate` history on purpose and returns
what the witness must show.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from checkers.checks.verdict import DRIFT, MARGIN_NS
from checkers.synth import Sim

Injection = Callable[[Sim, random.Random], dict[str, Any]]


def _position(sim: Sim, ident: str) -> int:
    return next(i for i, (_, x) in enumerate(sim.log) if x == ident)


def _set_final(sim: Sim, nodes: list[str], edit: Callable[[list[dict[str, Any]]], None]) -> None:
    for node in nodes:
        edit(sim.final[node])


def _lost(sim: Sim, rng: random.Random) -> dict[str, Any]:
    acked = [c["value"] for _, c in sim.ops("append", "ok")]
    victim = max(acked, key=lambda v: v["log_index"])
    _set_final(sim, sim.nodes, lambda e: e.__delitem__(slice(victim["log_index"], None)))
    return {"id": victim["id"]}


def _divergence(sim: Sim, rng: random.Random) -> dict[str, Any]:
    named = [i for i, (_, x) in enumerate(sim.log) if x is not None]
    index = rng.choice(named)
    sim.final[sim.nodes[-1]][index]["id"] = None
    return {"log_index": index}


def _append_everywhere(sim: Sim, ident: str) -> dict[str, Any]:
    index = len(sim.final[sim.nodes[0]])
    _set_final(sim, sim.nodes, lambda e: e.append({"log_index": index, "term": sim.log[-1][0], "id": ident}))
    return {"id": ident, "log_index": index}


def _duplicate(sim: Sim, rng: random.Random) -> dict[str, Any]:
    return _append_everywhere(sim, rng.choice(sim.ops("append", "ok"))[1]["value"]["id"])


def _phantom(sim: Sim, rng: random.Random) -> dict[str, Any]:
    return _append_everywhere(sim, "ghost-1")


def _aborted_read(sim: Sim, rng: random.Random) -> dict[str, Any]:
    return _append_everywhere(sim, rng.choice(sim.ops("append", "fail"))[0]["value"]["id"])


def _index_mismatch(sim: Sim, rng: random.Random) -> dict[str, Any]:
    _, done = rng.choice(sim.ops("append", "ok"))
    done["value"] = {**done["value"], "log_index": done["value"]["log_index"] + 1000}
    return {"id": done["value"]["id"]}


def _realtime_reorder(sim: Sim, rng: random.Random) -> dict[str, Any]:
    times = {
        inv["value"]["id"]: (inv["time"], c["time"] if c and c["type"] == "ok" else None)
        for inv, c in sim.ops("append")
    }
    for i in range(len(sim.log) - 1):
        a, b = sim.log[i][1], sim.log[i + 1][1]
        if a in times and b in times and times[a][1] is not None and times[a][1] < times[b][0]:

            def swap(entries: list[dict[str, Any]], i: int = i) -> None:
                entries[i]["id"], entries[i + 1]["id"] = entries[i + 1]["id"], entries[i]["id"]

            _set_final(sim, sim.nodes, swap)
            return {"later": b, "earlier": a}
    raise ValueError("no adjacent pair completed-before-invoked to swap")


def _reads(sim: Sim) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(i, c) for i, c in sim.ops("read", "ok") if c is not None]


def _stale_read(sim: Sim, rng: random.Random) -> dict[str, Any]:
    acks = [(c["time"], c["value"]["log_index"]) for _, c in sim.ops("append", "ok")]
    for inv, done in _reads(sim):
        seen = [e[0] for e in done["value"]["entries"]]
        known = [ix for t, ix in acks if t < inv["time"] and ix in seen]
        if known:
            cut = max(known)
            done["value"]["entries"] = [e for e in done["value"]["entries"] if e[0] < cut]
            return {"read": inv["index"] if "index" in inv else sim.history.index(inv)}
    raise ValueError("no read saw an index acknowledged before it")


def _future_read(sim: Sim, rng: random.Random) -> dict[str, Any]:
    invoked = {inv["value"]["id"]: inv["time"] for inv, _ in sim.ops("append")}
    for inv, done in _reads(sim):
        later = [
            i
            for i, (_, x) in enumerate(sim.log)
            if x in invoked and invoked[x] > done["time"] and i >= done["value"]["from"]
        ]
        if later:
            upto = min(later)
            done["value"]["to"] = max(done["value"]["to"], upto)
            done["value"]["entries"] = [[i, sim.log[i][1]] for i in range(done["value"]["from"], upto + 1)]
            return {"read": sim.history.index(inv)}
    raise ValueError("no read has an append invoked after it")


def _uncommitted_read(sim: Sim, rng: random.Random) -> dict[str, Any]:
    """A read that reports a commit index below the highest entry it returned."""
    inv, done = rng.choice([(i, c) for i, c in _reads(sim) if c["value"]["entries"]])
    seen = max(e[0] for e in done["value"]["entries"])
    done["value"]["commit_index"] = seen - rng.randint(1, 3)
    return {"read": sim.history.index(inv)}


def _nonmonotonic_read(sim: Sim, rng: random.Random) -> dict[str, Any]:
    reads = _reads(sim)
    for _, first in reads:
        if not first["value"]["entries"]:
            continue
        top = max(e[0] for e in first["value"]["entries"])
        for inv, done in reads:
            seen = [e[0] for e in done["value"]["entries"]]
            if inv["time"] > first["time"] and top in seen:
                done["value"]["entries"] = [e for e in done["value"]["entries"] if e[0] < top]
                return {"read": sim.history.index(inv)}
    raise ValueError("no read pair to make non-monotonic")


def _hole(sim: Sim, rng: random.Random) -> dict[str, Any]:
    noops = [i for i, (_, x) in enumerate(sim.log) if x is None and i < len(sim.log) - 1]
    index = noops[-1]
    node = sim.nodes[-1]
    sim.final[node] = [e for e in sim.final[node] if e["log_index"] != index]
    return {"node": node, "missing_from": index, "missing_to": index}


def _election_safety(sim: Sim, rng: random.Random) -> dict[str, Any]:
    node = sim.nodes[0]
    line = next(e for e in sim.events[node] if e.get("role") == "follower")
    sim.events[node].append({**line, "role": "leader", "leader": node, "time_ns": line["time_ns"] + 1})
    return {"term": line["term"]}


def _forgotten_vote(sim: Sim, rng: random.Random) -> dict[str, Any]:
    """A node restarts without the vote it granted last: it recovers the term before."""
    node = rng.choice(sim.nodes)
    last = max(e["time_ns"] for lines in sim.events.values() for e in lines)
    votes = [e for e in sim.events[node] if e.get("event") == "vote"]
    term = max((e["term"] for e in votes), default=0) + 1
    sim.events[node] += [
        {"event": "vote", "time_ns": last + 1, "node": node, "term": term, "candidate": sim.nodes[0]},
        {"event": "start", "time_ns": last + 2, "node": node, "term": term - 1, "vote": None, "fresh": False},
    ]
    return {"node": node}


def _leader_completeness(sim: Sim, rng: random.Random) -> dict[str, Any]:
    """A node reports a commit index in the first term past where the second term's leader's log ended."""
    leaders = [e for lines in sim.events.values() for e in lines if e.get("role") == "leader"]
    first, second = sorted(leaders, key=lambda e: e["term"])[:2]
    node = rng.choice(sim.nodes)
    sim.events[node].append({"event": "commit", "time_ns": second["time_ns"] - 2, "node": node,
                             "term": first["term"], "commit_index": second["end_index"] + 1})
    return {"term": second["term"], "node": second["node"]}


def _stale_leader_read(sim: Sim, rng: random.Random) -> dict[str, Any]:
    """A read answered by a leader of term N-1 though another node led term N before it was invoked."""
    inv, done = rng.choice([pair for pair in _reads(sim) if pair[1] is not None])
    served, newer = rng.sample(sim.nodes, 2)
    term = max(e["term"] for lines in sim.events.values() for e in lines) + 2
    before = inv["time"] - MARGIN_NS - int(inv["time"] * DRIFT)
    for node, t, at in ((served, term - 1, before - 10), (newer, term, before - 5)):
        sim.events[node].append({"event": "role", "time_ns": at, "node": node, "term": t, "role": "leader",
                                 "leader": node})
    done["node"] = served
    sim.history_wall_ns = 0
    return {"read": sim.history.index(inv), "served_by": served, "leader": newer}


def _relead(sim: Sim, rng: random.Random) -> dict[str, Any]:
    """The leader of a term leads it again after a follower line of the same term."""
    line = next(e for lines in sim.events.values() for e in lines if e.get("role") == "leader")
    sim.events[line["node"]] += [
        {**line, "role": "follower", "time_ns": line["time_ns"] + 1},
        {**line, "time_ns": line["time_ns"] + 2},
    ]
    return {"term": line["term"]}


def _shift_ack(sim: Sim, rng: random.Random) -> dict[str, Any]:
    _, done = rng.choice(sim.ops("append", "ok"))
    done["value"] = {**done["value"], "log_index": done["value"]["log_index"] + rng.choice((-1, 1))}
    return {"id": done["value"]["id"]}


def _swap_any(sim: Sim, rng: random.Random) -> dict[str, Any]:
    i, j = rng.sample(range(len(sim.log)), 2)

    def swap(entries: list[dict[str, Any]]) -> None:
        entries[i]["id"], entries[j]["id"] = entries[j]["id"], entries[i]["id"]

    _set_final(sim, sim.nodes, swap)
    return {}


def _truncate_read(sim: Sim, rng: random.Random) -> dict[str, Any]:
    inv, done = rng.choice([r for r in _reads(sim) if r[1]["value"]["entries"]])
    entries = done["value"]["entries"]
    done["value"]["entries"] = entries[: rng.randrange(len(entries))]
    return {"read": sim.history.index(inv)}


def _drop_tail(sim: Sim, rng: random.Random) -> dict[str, Any]:
    """A run cut off mid-way: the last lines of the history are gone."""
    del sim.history[len(sim.history) - rng.randrange(1, 6) :]
    return {}


def _consumes(sim: Sim) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(i, c) for i, c in sim.ops("consume", "ok") if c is not None]


def _consumed_then_lost(sim: Sim, rng: random.Random) -> dict[str, Any]:
    """A consumer that got an entry past the final log's end: an entry the log later lost."""
    if not _consumes(sim):
        raise ValueError("no consumes")
    index = len(sim.final[sim.nodes[0]])
    process = max(line["process"] for line in sim.history if line["process"] != "nemesis") + 1
    time = sim.history[-1]["time"] + 1
    asked = {"consumer": 99, "from": index}
    got = {**asked, "to": index, "entries": [[index, "consumed-ghost"]], "offset": index + 1}
    ghost = {"id": "consumed-ghost"}  # its append timed out: it may have landed, and was then lost
    appender = {"process": process + 1, "f": "append", "value": ghost, "node": "n1"}
    sim.history += [
        {"time": time - 2, "type": "invoke", **appender},
        {"time": time - 1, "type": "info", **appender},
        {"time": time, "type": "invoke", "process": process, "f": "consume", "value": asked, "node": "n1"},
        {"time": time + 5, "type": "ok", "process": process, "f": "consume", "value": got, "node": "n1"},
    ]
    return {"id": "consumed-ghost", "log_index": index}


def _consume_divergence(sim: Sim, rng: random.Random) -> dict[str, Any]:
    """A consume that got, at one index, an id the final log holds at another."""
    named = [
        (c, k) for _, c in _consumes(sim) for k, e in enumerate(c["value"]["entries"]) if e[1] is not None
    ]
    done, k = rng.choice(named)
    index, ident = done["value"]["entries"][k]
    other = rng.choice([x for _, x in sim.log if x is not None and x != ident])
    done["value"]["entries"][k] = [index, other]
    return {"log_index": index}


def _skipped_offset(sim: Sim, rng: random.Random) -> dict[str, Any]:
    """A consume left out of the history: its consumer's next pull starts past its offset."""
    by_consumer: dict[int, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for inv, done in _consumes(sim):
        by_consumer.setdefault(inv["value"]["consumer"], []).append((inv, done))
    middles = [
        (ops[n - 1], ops[n], ops[n + 1])
        for ops in by_consumer.values()
        for n in range(1, len(ops) - 1)
        if ops[n][1]["value"]["entries"] and ops[n + 1][1]["value"]["from"] > ops[n - 1][1]["value"]["offset"]
    ]
    (_, before), (inv, done), (_, after) = rng.choice(middles)
    sim.history[:] = [line for line in sim.history if line is not inv and line is not done]
    return {
        "consumer": inv["value"]["consumer"],
        "reason": "from-past-offset",
        "missing_from": before["value"]["offset"],
        "missing_to": after["value"]["from"] - 1,
    }


def _shift_consumed(sim: Sim, rng: random.Random) -> dict[str, Any]:
    """One consumed entry moved to the index before or after it."""
    done = rng.choice([c for _, c in _consumes(sim) if c["value"]["entries"]])
    k = rng.randrange(len(done["value"]["entries"]))
    index, ident = done["value"]["entries"][k]
    done["value"]["entries"][k] = [index + rng.choice((-1, 1)), ident]
    return {}


def _move_offset(sim: Sim, rng: random.Random) -> dict[str, Any]:
    """A consume that committed an offset a little off the entries it got."""
    _, done = rng.choice(_consumes(sim))
    done["value"] = {**done["value"], "offset": done["value"]["offset"] + rng.choice((-2, -1, 1, 2))}
    return {}


MUTATIONS: dict[str, Injection] = {
    "relead": _relead,
    "shift-ack": _shift_ack,
    "swap-final": _swap_any,
    "truncate-read": _truncate_read,
    "drop-tail": _drop_tail,
    "shift-consumed": _shift_consumed,
    "move-offset": _move_offset,
}
INJECTIONS: dict[str, Injection] = {
    "lost": _lost,
    "divergence": _divergence,
    "duplicate": _duplicate,
    "phantom": _phantom,
    "aborted-read": _aborted_read,
    "index-mismatch": _index_mismatch,
    "realtime-reorder": _realtime_reorder,
    "stale-read": _stale_read,
    "future-read": _future_read,
    "uncommitted-read": _uncommitted_read,
    "nonmonotonic-read": _nonmonotonic_read,
    "hole": _hole,
    "election-safety": _election_safety,
    "leader-completeness": _leader_completeness,
    "forgotten-vote": _forgotten_vote,
    "stale-leader-read": _stale_leader_read,
}


# The consumer checks' anomalies, for histories simulated with consumers.
CONSUMER_INJECTIONS: dict[str, Injection] = {
    "consumed-then-lost": _consumed_then_lost,
    "consume-divergence": _consume_divergence,
    "skipped-offset": _skipped_offset,
}


def inject(sim: Sim, name: str, rng: random.Random) -> dict[str, Any]:
    """Break `sim` with anomaly `name` (or a MUTATIONS name); returns fields the witness must show."""
    return {**INJECTIONS, **CONSUMER_INJECTIONS, **MUTATIONS}[name](sim, rng)
