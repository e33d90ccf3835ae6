"""`make test`'s one list of the slowest tests over its two pytest runs
(tests/support/slowest_tests.py, from the runs' JUnit XML reports)."""

from __future__ import annotations

import subprocess
import sys

from support.paths import REPO
from support.slowest_tests import cases, node_id, report, slowest

UNIT_XML = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.unit.project.test_api_schemathesis" name="test_a[full]" time="274.6"/>
<testcase classname="tests.unit.pkg.test_mod.TestThing" name="test_b" time="0.5"><skipped/></testcase>
<testcase classname="tests.unit.pkg.test_mod" name="test_c" time="3"><failure message="x"/></testcase>
</testsuite></testsuites>"""
FABRIC_XML = """<testsuites><testsuite name="pytest">
<testcase classname="tests.fabric.slurm.test_slurm_preempt_run" name="test_d" time="162.0"/>
</testsuite></testsuites>"""
FILES = {"tests/unit/project/test_api_schemathesis.py", "tests/unit/pkg/test_mod.py",
         "tests/fabric/slurm/test_slurm_preempt_run.py"}


def test_node_ids_are_pytests_with_the_classes_after_the_file():
    assert node_id("tests.unit.pkg.test_mod.TestThing", "test_b", FILES.__contains__) == \
        "tests/unit/pkg/test_mod.py::TestThing::test_b"
    assert node_id("tests.unit.pkg.test_mod", "test_c[x.y]", FILES.__contains__) == \
        "tests/unit/pkg/test_mod.py::test_c[x.y]"
    assert node_id("no.such.module", "test_e", FILES.__contains__) == "no.such.module::test_e"


def test_every_case_of_a_report_counts_skipped_and_failed_ones_too():
    assert cases(UNIT_XML) == [("tests.unit.project.test_api_schemathesis", "test_a[full]", 274.6),
                               ("tests.unit.pkg.test_mod.TestThing", "test_b", 0.5),
                               ("tests.unit.pkg.test_mod", "test_c", 3.0)]


def test_the_slowest_come_first_and_only_as_many_as_asked():
    timed = [("b", 1.0), ("a", 1.0), ("c", 9.0), ("d", 0.1)]
    assert slowest(timed, 3) == [("c", 9.0), ("a", 1.0), ("b", 1.0)]
    assert slowest(timed, 10) == [("c", 9.0), ("a", 1.0), ("b", 1.0), ("d", 0.1)]


def test_one_list_over_both_runs_and_a_missing_report_is_named(tmp_path):
    for path in FILES:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    (tmp_path / "unit.xml").write_text(UNIT_XML)
    (tmp_path / "fabric.xml").write_text(FABRIC_XML)
    text = report(2, [tmp_path / "unit.xml", tmp_path / "fabric.xml", tmp_path / "gone.xml"],
                  tmp_path)
    lines = text.splitlines()
    assert lines[0].startswith("2 slowest tests of 4 ")
    assert lines[1:3] == ["   274.60s  tests/unit/project/test_api_schemathesis.py::test_a[full]",
                          "   162.00s  tests/fabric/slurm/test_slurm_preempt_run.py::test_d"]
    assert lines[3:] == [f"no report at {tmp_path / 'gone.xml'} (its run wrote none)"]


def test_the_command_line_prints_the_list_and_refuses_a_bad_count(tmp_path):
    (tmp_path / "unit.xml").write_text(UNIT_XML)
    script = str(REPO / "tests" / "support" / "slowest_tests.py")
    ok = subprocess.run([sys.executable, script, "1", str(tmp_path / "unit.xml")],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[1] == \
        "   274.60s  tests/unit/project/test_api_schemathesis.py::test_a[full]"
    bad = subprocess.run([sys.executable, script, "many", str(tmp_path / "unit.xml")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr
