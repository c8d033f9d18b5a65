"""Histories from other projects, with known answers, imported and checked in one Spark session.

Porcupine's kv files (tests/checker/thirdparty/porcupine): every key of an `-ok` file must end
valid, and each `-bad` file must have a key that ends invalid. The single-partition cases of
Jepsen's Kafka checker tests (tests/checker/thirdparty/jepsen_kafka): each must end with exactly
the invalid checks its `expected.json` names per key, or be refused by the importer as it says.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers.checks.check import check_many
from checkers.importers import jepsen, porcupine
from checkers.importers.writer import Refused, write
from checkers.layout import ResultsDir

pytestmark = pytest.mark.spark
THIRDPARTY = Path(__file__).parent / "thirdparty"
PORCUPINE = sorted((THIRDPARTY / "porcupine").glob("*.txt"))
JEPSEN = THIRDPARTY / "jepsen_kafka"
EXPECTED: dict[str, dict[str, Any]] = json.loads((JEPSEN / "expected.json").read_text())["cases"]


@pytest.fixture(scope="module")
def verdicts(spark, tmp_path_factory) -> dict[str, Any]:
    """source file name -> {key: results} for what imported, or the refusal's message."""
    root = tmp_path_factory.mktemp("thirdparty")
    folders: dict[tuple[str, str], Path] = {}
    refused: dict[str, str] = {}
    sources = [(path, porcupine.convert) for path in PORCUPINE]
    sources += [(JEPSEN / name, jepsen.convert) for name in EXPECTED]
    for path, convert in sources:
        try:
            written = write(convert(path), root / path.name)
        except Refused as e:
            refused[path.name] = str(e)
            continue
        folders.update({(path.name, folder.key): place for folder, place in written})
    results = check_many([ResultsDir.open(p) for p in folders.values()], spark, witnesses=5)
    found: dict[str, Any] = dict(refused)
    for (name, key), result in zip(folders, results, strict=True):
        found.setdefault(name, {})[key] = {**result, "folder": str(folders[name, key])}
    return found


def _invalid(result: dict[str, Any]) -> list[str]:
    return sorted(name for name, c in result["checks"].items() if c["valid"] is False)


@pytest.mark.parametrize("path", [p for p in PORCUPINE if p.stem.endswith("-ok")], ids=lambda p: p.name)
def test_every_key_of_a_porcupine_ok_history_ends_valid(verdicts, path):
    keys = verdicts[path.name]
    assert keys, "nothing imported"
    assert {key: r["valid"] for key, r in keys.items() if r["valid"] is not True} == {}, {
        key: _invalid(r) for key, r in keys.items()}


@pytest.mark.parametrize("path", [p for p in PORCUPINE if p.stem.endswith("-bad")], ids=lambda p: p.name)
def test_a_porcupine_bad_history_has_a_key_that_ends_invalid(verdicts, path):
    keys = verdicts[path.name]
    assert any(r["valid"] is False for r in keys.values()), {key: r["valid"] for key, r in keys.items()}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_jepsen_kafka_case_ends_with_the_checks_it_expects(verdicts, name):
    case, found = EXPECTED[name], verdicts[name]
    if "refused" in case:
        assert isinstance(found, str), f"imported, though expected refused: {case['refused']}"
        assert case["refused"] in found
        return
    assert not isinstance(found, str), f"refused: {found}"
    assert {key: _invalid(r) for key, r in found.items()} == case["ours"], case["why"]
    for result in found.values():
        assert result["valid"] is (not _invalid(result)), result["checks"]



def test_the_report_and_timeline_of_imported_histories(verdicts):
    """A clean imported key and an invalid one: the report says the verdict was judged from the
    history alone and names the checks that did not apply; the timeline is written."""
    from checkers.pages.report import write_report

    clean = next(iter(verdicts["c01-ok.txt"].values()))
    bad = next(r for r in verdicts["c01-bad.txt"].values() if r["valid"] is False)
    for result in (clean, bad):
        folder = Path(result["folder"])
        html = write_report(folder, result).read_text()
        assert "Not applicable to this folder" in html and "election-safety" in html
        assert (folder / "timeline.html").is_file()
    assert "judged from the history alone" in write_report(Path(clean["folder"]), clean).read_text()
    assert "Invalid." in write_report(Path(bad["folder"]), bad).read_text()
