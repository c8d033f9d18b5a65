"""The catalogue: every fault family and named mix, the only list of them in the project.

`--nemesis` takes family names and mix names, comma-separated (`none` for no faults). The
run writes `vocabulary(families)` into test.json's `"faults"`; plots, reports and checks
read fault names from there.
"""

from __future__ import annotations

from typing import Any

from nemesis.base import Family, Fault, Nodes, Option
from nemesis.bounce import BOUNCE
from nemesis.churn import CHURN
from nemesis.clock import CLOCK
from nemesis.disk import DISK
from nemesis.kill import KILL, STOP
from nemesis.lagging import LAGGING_MAJORITY
from nemesis.lose import ISOLATE_LOSE, LOSE_NODE
from nemesis.packet import PACKET
from nemesis.partition import PARTITION
from nemesis.pause import PAUSE
from nemesis.power import POWER_LOSS
from nemesis.recipes import PART_KILL, PAUSE_KILL, STALE_LEADER, SWIZZLE_CLOG

FAMILIES: dict[str, Family] = {f.name: f for f in (
    KILL, STOP, BOUNCE, PAUSE, PARTITION, CLOCK, CHURN, PACKET, DISK, PAUSE_KILL, PART_KILL, STALE_LEADER,
    SWIZZLE_CLOG, POWER_LOSS, LAGGING_MAJORITY, LOSE_NODE, ISOLATE_LOSE)}

# Named mixes. `default` is what `make chaos` runs: leader-aware crashes (later, at once, with
# power lost, with the disk damaged), pauses, partitions, clock skew, leader churn and the
# recipes that build the states seeded bugs need (a stale leader asked to read, a stale minority
# in the new majority, a majority whose newest entries were fsynced only on nodes still down),
# drawn so that every run changes the leader.
MIXES: dict[str, tuple[str, ...]] = {
    "default": ("kill", "bounce", "pause", "partition", "clock", "stale-leader", "part-kill", "pause-kill",
                "power-loss", "lagging-majority", "disk", "churn"),
    "crash": ("kill", "stop"),
}


def mixes() -> dict[str, tuple[str, ...]]:
    """The named mixes, `all` (every family inside the fault model) included."""
    return {**MIXES, "all": tuple(name for name, family in FAMILIES.items() if family.in_all)}


def resolve_words(text: str) -> list[str]:
    """The words of a `--nemesis` value, `none` and blanks dropped (`kill, default` -> [kill, default])."""
    return [w for w in (w.strip() for w in text.split(",")) if w and w != "none"]


def resolve(text: str) -> list[str]:
    """`kill,default` -> the families named, mixes expanded, in order, once each; `none` -> []."""
    names: list[str] = []
    known = mixes()
    for word in resolve_words(text):
        if word in known:
            names += known[word]
        elif word in FAMILIES:
            names.append(word)
        else:
            raise ValueError(f"--nemesis: unknown fault {word!r}; families: {', '.join(FAMILIES)}; "
                             f"mixes: {', '.join(known)}; or none")
    return list(dict.fromkeys(names))


def options() -> list[Option]:
    """Every family's options, once each."""
    seen: dict[str, Option] = {}
    for family in FAMILIES.values():
        for option in family.options:
            seen.setdefault(option.name, option)
    return list(seen.values())


def parse_options(texts: dict[str, str]) -> dict[str, Any]:
    """Each option's parsed value by `dest`, from `{dest: text}` (defaults for what is missing)."""
    return {o.dest: o.value(texts.get(o.dest, o.default)) for o in options()}


def build(names: list[str], nodes: Nodes, values: dict[str, Any] | None = None) -> dict[str, Fault]:
    """The faults of `names` against `nodes`, keyed by family name."""
    values = values if values is not None else parse_options({})
    return {name: FAMILIES[name].make(nodes, values) for name in names}


def vocabulary(names: list[str]) -> dict[str, dict[str, Any]]:
    """test.json's `"faults"`: {family: {"start", "stop", "label"}}."""
    return {name: FAMILIES[name].vocabulary() for name in names}


def needs(names: list[str]) -> set[str]:
    """What the families of `names` need from the nodes (e.g. `"fuse"`)."""
    return {need for name in names for need in FAMILIES[name].needs}
