"""A sweep's `junit.xml`: one test case per run, for the CI's test report.

Class name `nightly.<mode>`, name `<cell> seed <seed>`, time the run's duration. A run that
got another verdict than its cell expects has a `<failure>` (an `<error>` when it reached no
verdict at all) whose message names the violated checks and the report; a known risk that
came true, a run the interrupt cut short, or one the hosts cannot run, is `<skipped>` with the
message.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from harness.sweeps.summary import Row


def junit_xml(rows: list[Row], name: str, timestamp: str) -> ET.ElementTree:
    """The JUnit document of `rows`, one suite called `name`."""
    suite = ET.Element("testsuite", name=name, timestamp=timestamp)
    tally = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for row in rows:
        case = ET.SubElement(suite, "testcase", classname=f"nightly.{row.mode}",
                             name=f"{row.cell} seed {row.seed}", time=f"{row.duration_s:.1f}")
        tally["tests"] += 1
        if row.outcome == "fail":
            kind = "error" if row.verdict in ("error", "unknown") else "failure"
            tally["errors" if kind == "error" else "failures"] += 1
            problem = ET.SubElement(case, kind, message=row.message or "", type=f"verdict-{row.verdict}")
            problem.text = "\n".join(line for line in (row.message, row.why, row.reproduce) if line)
        elif row.outcome in ("known-risk", "interrupted", "skipped"):
            tally["skipped"] += 1
            ET.SubElement(case, "skipped", message=row.message or row.outcome)
    suite.set("time", f"{sum(row.duration_s for row in rows):.1f}")
    for key, value in tally.items():
        suite.set(key, str(value))
    suites = ET.Element("testsuites", name=name)
    suites.append(suite)
    for key in ("tests", "failures", "errors", "skipped", "time"):
        suites.set(key, suite.get(key, ""))
    ET.indent(suites)
    return ET.ElementTree(suites)


def write_junit(path: Path, rows: list[Row], name: str, timestamp: str) -> Path:
    """Write `junit.xml` of `rows` at `path`; the path."""
    junit_xml(rows, name, timestamp).write(path, encoding="utf-8", xml_declaration=True)
    return path
