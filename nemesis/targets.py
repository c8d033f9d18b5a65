"""Whom a node fault hits: Jepsen's target specs, leader-aware.

`one` a random node, `leader` the current leader (a random node when none answers),
`followers` every node but the leader, `minority` a random minority (leader included at
random), `majority` a random majority, `all` every node, `random-subset` a random non-empty
subset. Used by kill, stop, pause and power-loss.
"""

from __future__ import annotations

import random

from nemesis.base import Nodes, Option, comma_list

TARGETS = ("one", "leader", "followers", "minority", "majority", "all", "random-subset")


def choose(target: str, names: list[str], leader: str | None, rng: random.Random) -> list[str]:
    """The nodes `target` picks among `names`, sorted; `leader` is who leads now (or None)."""
    n = len(names)
    if target == "one":
        return [rng.choice(names)]
    if target == "leader":
        return [leader if leader in names else rng.choice(names)]
    if target == "followers":
        chief = leader if leader in names else rng.choice(names)
        return sorted(x for x in names if x != chief)
    if target == "minority":
        return sorted(rng.sample(names, max(1, (n - 1) // 2)))
    if target == "majority":
        return sorted(rng.sample(names, n // 2 + 1))
    if target == "all":
        return sorted(names)
    if target == "random-subset":
        return sorted(rng.sample(names, rng.randint(1, n)))
    raise ValueError(f"unknown target {target!r}; choose from {', '.join(TARGETS)}")


def pick(nodes: Nodes, targets: tuple[str, ...], rng: random.Random) -> tuple[str, list[str]]:
    """Draw a target spec from `targets` and the nodes it picks; asks for the leader only when needed."""
    target = rng.choice(targets)
    leader = nodes.leader() if target in ("leader", "followers") else None
    return target, choose(target, nodes.names, leader, rng)


def targets_option(family: str, default: str) -> Option:
    """The `--<family>-targets` option."""
    return Option(f"{family}-targets", default, f"whom {family} faults hit, drawn from: {', '.join(TARGETS)}",
                  choices=TARGETS, parse=comma_list)
