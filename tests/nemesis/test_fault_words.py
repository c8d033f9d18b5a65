"""The report's fault detail in words (checkers.pages.faultwords), on the values the families really
record: docs/formats.md's nemesis lines through the fault log, and the families' own `start`
against the recording stand-in."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from recording import RecordingNodes

from checkers.pages.faultwords import cut, describe
from checkers.run.faultlog import fault_log
from nemesis.catalogue import build, parse_options, vocabulary
from nemesis.partition import PartitionFault

FORMATS = Path(__file__).resolve().parents[2] / "docs" / "formats.md"


def started(family: str, seed: int = 3, **options: str) -> tuple[list[str], dict[str, Any]]:
    """A family's first fault on five recorded nodes (n3 leads): its targets and its detail."""
    fault = build([family], RecordingNodes(), parse_options(options))[family]
    value = fault.start(random.Random(seed))
    return value.pop("targets"), value


def test_the_documented_partition_line_reads_as_its_shape_and_who_is_cut_off() -> None:
    lines = [json.loads(line) for line in FORMATS.read_text().splitlines()
             if line.startswith("{") and '"process": "nemesis"' in line]
    assert [line["f"] for line in lines] == ["start-partition", "start-partition"]
    [record] = fault_log(lines, vocabulary(["partition"]), [], 0)["faults"]
    assert describe(record["detail"]) == "shape isolate-leader; split n1 | n2, n3; leader n1"


def test_a_kill_says_how_its_targets_were_drawn() -> None:
    targets, detail = started("kill", kill_targets="leader")
    assert targets == ["n3"] and describe(detail) == "targets drawn as the leader"


def test_a_clock_fault_gives_each_nodes_offset() -> None:
    targets, detail = started("clock", clock_targets="minority", clock_modes="bump")
    offsets = ", ".join(f"{node} {detail['offsets_ms'][node]:+d} ms" for node in targets)
    assert describe(detail) == (f"mode bump; clock offsets {offsets}; targets drawn as a random minority; "
                                "leader n3")


@pytest.mark.parametrize(("shape", "words"), [
    ("isolate-leader", "split n3 | n1, n2, n4, n5"),
    ("leader-minority", "split n2, n3 | n1, n4, n5"),
    ("one-way", "n5 hears nothing from n1, n2, n3, n4"),
])
def test_a_partition_names_its_shape_and_who_hears_whom(shape: str, words: str) -> None:
    nodes = RecordingNodes()
    detail = PartitionFault(nodes, (shape,)).start(random.Random(3))
    assert describe(detail, nodes.names).startswith(f"shape {shape}; {words}")


def test_a_bridge_is_no_clean_split_so_each_node_says_whom_it_cannot_hear() -> None:
    nodes = RecordingNodes()
    detail = PartitionFault(nodes, ("bridge",)).start(random.Random(3))
    [hub] = set(nodes.names) - set(detail["grudge"])
    assert cut(detail["grudge"]).startswith("split ")  # the grudge alone does not show the hub
    words = cut(detail["grudge"], nodes.names)
    assert words == "; ".join(f"{node} hears nothing from {', '.join(deaf)}"
                              for node, deaf in sorted(detail["grudge"].items()))
    assert hub not in words


def test_a_packet_fault_gives_its_magnitudes_and_links() -> None:
    _targets, detail = started("packet", packet_modes="loss", packet_targets="one")
    words = describe(detail)
    link = "–".join(detail["links"][0])
    assert words.startswith(f"mode loss; 20% of packets lost; targets drawn as one node at random; "
                            f"links {link}")


def test_a_recipe_says_its_steps_each_in_the_same_words() -> None:
    _targets, detail = started("stale-leader", stale_leader_modes="pause")
    assert describe(detail).startswith("mode pause; leader n3; steps: pause n3 at 0.0 s, "
                                       "isolate n3 at 0.0 s (split n3 | n1, n2, n4, n5), resume n3 at 0.0 s")


def test_unknown_detail_reads_as_compact_key_value_text() -> None:
    detail = {"promoted": {"node": "n2", "epoch": 3, "ends": {"n2": 12, "n4": 10}}, "stepped_clock": False,
              "order": ["n5", "n2"], "error": None}
    assert describe(detail) == ("promoted: node n2, epoch 3, ends (n2 12, n4 10); stepped clock: no; "
                                "order: n5, n2; error: none")
    assert describe(None) == describe({}) == ""
