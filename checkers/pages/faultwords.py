"""A fault's detail in words, for the report's fault table.

The detail is the fault's history value less its targets (checkers.run.faultlog): each family
adds its own keys (docs/formats.md, "Nemesis lines"). The keys several families share get
words of their own: a partition's shape and who is cut off from whom, a clock fault's offset
per node, a packet fault's magnitudes and links, the target spec a node fault drew its victims
by, the leader, a recipe's steps (each in the same words). Any other key reads `key: value`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

SPECS = {  # nemesis.targets.TARGETS
    "one": "one node at random",
    "leader": "the leader",
    "followers": "the followers",
    "minority": "a random minority",
    "majority": "a random majority",
    "all": "every node",
    "random-subset": "a random subset",
}


def describe(detail: Mapping[str, Any] | None, nodes: Iterable[str] = ()) -> str:
    """`detail` in words: the known keys first, in a fixed order, then `key: value` for the rest.
    `nodes`, the cluster's, tells a clean split from a cut some node bridges (a grudge names
    only the nodes that drop or are dropped)."""
    if not detail:
        return ""
    known = {**WORDS, "grudge": lambda grudge: cut(grudge, nodes)}
    words = [render(detail[key]) for key, render in known.items() if key in detail]
    words += [f"{key.replace('_', ' ')}: {compact(value)}" for key, value in detail.items()
              if key not in known]
    return "; ".join(word for word in words if word)


def cut(grudge: Mapping[str, list[str]], nodes: Iterable[str] = ()) -> str:
    """Who is cut off from whom. A clean split (every node hears exactly its own group) reads
    `split n1, n2 | n3, n4, n5`; anything else (one-way drops, a bridge, a ring) names, per node, the
    nodes it hears nothing from."""
    groups = _groups(grudge, nodes)
    if groups is not None:
        return "split " + " | ".join(", ".join(group) for group in groups)
    return "; ".join(f"{node} hears nothing from {', '.join(deaf)}" for node, deaf in sorted(grudge.items()))


def _groups(grudge: Mapping[str, list[str]], nodes: Iterable[str]) -> list[list[str]] | None:
    """The groups of a clean split, smallest first; None when the grudge is not one."""
    dropped = {(node, peer) for node, peers in grudge.items() for peer in peers}
    groups: list[list[str]] = []
    for node in sorted({*nodes, *(name for pair in dropped for name in pair)}):
        group = next((g for g in groups if (node, g[0]) not in dropped), None)
        if group is None:
            groups.append([node])
        else:
            group.append(node)
    clean = all(((a, b) in dropped) == (group_a is not group_b)
                for group_a in groups for a in group_a for group_b in groups for b in group_b if a != b)
    return sorted(groups, key=len) if clean and len(groups) > 1 else None


def offsets(by_node: Mapping[str, float]) -> str:
    """`n1 +2400 ms, n2 -3100 ms`: each node's clock offset."""
    return ", ".join(f"{node} {value:+.0f} ms" for node, value in sorted(by_node.items()))


def steps(done: list[Mapping[str, Any]]) -> str:
    """A recipe's steps in order: `isolate n1 at 0.0 s (split n1 | n2, n3), lose n1 at 1.2 s`."""
    said = []
    for step in done:
        rest = {k: v for k, v in step.items() if k not in ("step", "targets", "at_s")}
        words = f"{step.get('step')} {', '.join(step.get('targets') or []) or 'none'}"
        if isinstance(step.get("at_s"), int | float):
            words += f" at {step['at_s']:.1f} s"
        said.append(f"{words} ({describe(rest)})" if rest else words)
    return "steps: " + ", ".join(said)


def compact(value: Any) -> str:
    """A value as short text: lists comma-separated, mappings as `key value`, none for null."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {_nested(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_nested(v) for v in value)
    return str(value)


def _nested(value: Any) -> str:
    text = compact(value)
    return f"({text})" if isinstance(value, Mapping | list | tuple) and len(value) > 1 else text


WORDS: dict[str, Callable[[Any], str]] = {  # the order they are said in
    "shape": lambda shape: f"shape {shape}",
    "grudge": cut,
    "mode": lambda mode: f"mode {mode}",
    "offsets_ms": lambda by_node: f"clock offsets {offsets(by_node)}",
    "period_ms": lambda ms: f"strobing every {ms:g} ms",
    "loss": lambda p: f"{p:.0%} of packets lost",
    "delay_ms": lambda ms: f"delay {ms:g} ms",
    "jitter_ms": lambda ms: f"jitter {ms:g} ms",
    "duplicate": lambda p: f"{p:.0%} of packets sent twice",
    "rate_kbit": lambda kbit: f"{kbit:g} kbit/s",
    "target": lambda spec: f"targets drawn as {SPECS.get(spec, spec)}",
    "leader": lambda leader: f"leader {leader}" if leader else "no leader",
    "links": lambda links: "links " + ", ".join("–".join(link) for link in links),
    "steps": steps,
}
