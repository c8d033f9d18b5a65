"""Final logs: byte-identical files are parsed once and stand for every node that wrote them."""

from __future__ import annotations

import pytest

from checkers.checks.finallogs import load_final_logs
from checkers.layout import ResultsDir
from checkers.synth import simulate

pytestmark = pytest.mark.spark


def test_identical_final_logs_are_parsed_once_and_a_differing_one_on_its_own(spark, tmp_path):
    sim = simulate(5, n_ops=120)
    del sim.final["n3"][-1]  # n3 lags one entry behind: its file is not n1's
    folder = sim.write(tmp_path / "run")
    length = len(sim.final["n1"])
    finals = load_final_logs(spark, [ResultsDir.open(folder)])
    try:
        assert finals.cached.count() == 2 * length - 1, "n2 wrote the same bytes as n1: not parsed again"
        per_node = {r["node"]: r["count"] for r in finals.entries.groupBy("node").count().collect()}
        assert per_node == {"n1": length, "n2": length, "n3": length - 1}
        assert finals.ends == {0: {"n1": length - 1, "n2": length - 1, "n3": length - 2}}
        assert finals.longest == {0: "n1"}
        assert finals.cluster.count() == length
        for b in {b for (_, node, b) in finals.blocks if node == "n1"}:
            assert finals.blocks[0, "n2", b] == finals.blocks[0, "n1", b]
        assert {node for (_, node, _) in finals.blocks} == {"n1", "n2", "n3"}
    finally:
        finals.unpersist()


def test_the_cluster_log_of_identical_files_is_the_first_nodes(spark, tmp_path):
    sim = simulate(6, n_ops=60)
    del sim.final["n1"][-1]  # n2 and n3 hold the longest log, byte for byte
    finals = load_final_logs(spark, [ResultsDir.open(sim.write(tmp_path / "run"))])
    try:
        assert finals.longest == {0: "n2"}
        assert finals.ends[0]["n2"] == finals.ends[0]["n3"] == finals.ends[0]["n1"] + 1
        top = finals.cluster.orderBy("log_index", ascending=False).first()
        assert (top["log_index"], top["id"]) == (len(sim.final["n2"]) - 1, sim.final["n2"][-1]["id"])
    finally:
        finals.unpersist()
