"""bench.scheduler.whatif_table: the cells' commands, the table from their JSON, and a
failing cell failing the whole table."""

import json
from types import SimpleNamespace

import pytest

from bench.scheduler import whatif_table as wt


def arm(avg, p95=None, share=0.25, p99=0.5):
    return {"avg_jct_s": avg, "p95_jct_s": p95 or 2 * avg, "makespan_s": 10 * avg,
            "gpu_util": 0.8, "cross_rack_share": share, "uplink_util_p99": p99}


def result(jobs=20_000, a=1000.0, b=900.0, c=500.0, d=450.0, topology="cluster-2k"):
    return {"load": 0.7, "jobs": jobs, "topology": topology,
            "arms": {"a": arm(a), "b": arm(b), "c": arm(c), "d": arm(d)}}


CELLS = wt.cells("/t/philly.csv", "/t/tiresias.csv", 20_000)


def test_the_cells_are_three_fabrics_and_two_loads_for_philly_and_two_for_tiresias():
    assert [(c.trace, c.topology, c.load) for c in CELLS] == [
        ("philly", "cluster-2k", 0.7), ("philly", "cluster-2k-2to1", 0.7),
        ("philly", "cluster-2k-4to1", 0.7), ("philly", "cluster-2k", 0.9),
        ("philly", "cluster-2k-2to1", 0.9), ("philly", "cluster-2k-4to1", 0.9),
        ("tiresias", "two-rack-64", 0.7), ("tiresias", "two-rack-64", 0.9)]
    assert {c.jobs for c in CELLS[:6]} == {20_000} and {c.jobs for c in CELLS[6:]} == {None}


def test_a_cells_command_is_sluice_whatif_with_every_arm_as_json():
    assert wt.command(CELLS[1], python="py") == [
        "py", "-m", "sluice", "whatif", "--trace", "/t/philly.csv", "--trace-format",
        "philly", "--topology", "cluster-2k-2to1", "--load", "0.7", "--jobs", "20000",
        "--arms", "a,b,c,d", "--json"]
    tiresias = wt.command(CELLS[-1], python="py")
    assert "--jobs" not in tiresias
    assert tiresias[tiresias.index("--trace-format") + 1] == "tiresias"
    assert tiresias[tiresias.index("--load") + 1] == "0.9"


def test_the_table_has_a_row_per_cell_with_both_changes():
    text = wt.table([(CELLS[0], result()), (CELLS[6], result(jobs=60, a=200.0, b=210.0))])
    lines = text.splitlines()
    assert len(lines) == 4
    assert all(line.count("|") == 10 for line in lines)
    assert lines[2].startswith("| philly | cluster-2k | 0.7 | 1,000 / 900 / 500 / 450 "
                               "| 2,000 / 1,800 / 1,000 / 900 | -10.0 % | -10.0 % ")
    assert "| 0.25 / 0.25 / 0.25 / 0.25 | 0.50 / 0.50 / 0.50 / 0.50 |" in lines[2]
    assert "| tiresias | two-rack-64 | 0.7 | 200 / 210 / 500 / 450 " in lines[3]
    assert "| +5.0 % | -10.0 % |" in lines[3]


@pytest.mark.parametrize("mutate, words", [
    (lambda r: r["arms"].pop("c"), "arm c missing"),
    (lambda r: r["arms"]["d"].pop("uplink_util_p99"), "arm d: 'uplink_util_p99' missing"),
    (lambda r: r["arms"]["a"].update(avg_jct_s="fast"), "'avg_jct_s' missing or not a number"),
    (lambda r: r.update(jobs=1999), "ran 1999 jobs, the cell asked 20000"),
    (lambda r: r.pop("arms"), "no 'arms' object"),
    (lambda r: r.update(topology="cluster-2k-4to1"), "ran on 'cluster-2k-4to1', the cell "
                                                     "asked 'cluster-2k'"),
])
def test_output_unfit_for_the_table_fails_the_cell(mutate, words):
    bad = result()
    mutate(bad)
    with pytest.raises(wt.CellFailed, match=words):
        wt.parse_output(CELLS[0], 0, json.dumps(bad), "")


def test_a_failed_process_or_non_json_output_fails_the_cell():
    with pytest.raises(wt.CellFailed, match="exit status 2: .*no such topology"):
        wt.parse_output(CELLS[0], 2, "", "warming up\nerror: no such topology\n")
    with pytest.raises(wt.CellFailed, match="not JSON"):
        wt.parse_output(CELLS[0], 0, "avg 12 s", "")
    tiresias = result(jobs=60, topology="two-rack-64")
    assert wt.parse_output(CELLS[6], 0, json.dumps(tiresias), "")["jobs"] == 60


def fake_runner(fail_topology=None):
    def run(argv):
        topo = argv[argv.index("--topology") + 1]
        if topo == fail_topology:
            return 1, "", "Traceback ...\nRuntimeError: stalled\n"
        jobs = int(argv[argv.index("--jobs") + 1]) if "--jobs" in argv else 60
        return 0, json.dumps(result(jobs=jobs, topology=topo)), ""
    return run


def test_every_cell_back_gives_the_table_and_a_complete_document():
    log = []
    records = wt.run_cells(CELLS, fake_runner(), log.append)
    text, doc = wt.report(records, "Philly window: ...")
    assert len(log) == len(CELLS) and log[0].startswith("[1/8] philly (20,000 jobs) on ")
    assert text.startswith("Philly window: ...") and text.count("\n| philly |") == 6
    assert doc["complete"] is True and len(doc["cells"]) == 8
    assert doc["cells"][0]["result"]["arms"]["a"]["avg_jct_s"] == 1000.0


def test_a_failing_cell_is_reported_and_no_table_is_printed():
    log = []
    records = wt.run_cells(CELLS, fake_runner(fail_topology="cluster-2k-4to1"), log.append)
    text, doc = wt.report(records, "w")
    assert text is None and doc["complete"] is False
    failed = [line for line in log if "FAILED" in line]
    assert len(failed) == 2 and all("cluster-2k-4to1" in line for line in failed)
    assert "RuntimeError: stalled" in failed[0]
    errors = [c["error"] for c in doc["cells"]]
    assert sum(e is not None for e in errors) == 2 and len(errors) == 8   # all cells tried


def test_main_exits_1_on_a_failing_cell_and_keeps_the_raw_results(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(wt, "subprocess_runner", fake_runner(fail_topology="two-rack-64"))
    out = tmp_path / "cells.json"
    assert wt.main(["--quick", "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""                        # no partial table on stdout
    assert "INCOMPLETE: 2 of 8 cells failed" in captured.err
    assert "the first 2,000 jobs by submission in philly.csv, from line" in captured.err
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["cells"][0]["cell"]["jobs"] == 2000


def test_main_prints_the_table_when_every_cell_came_back(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(wt, "subprocess_runner", fake_runner())
    out = tmp_path / "cells.json"
    assert wt.main(["--jobs", "300", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("\n| philly |") == 6 and printed.count("\n| tiresias |") == 2
    assert json.loads(out.read_text())["complete"] is True


def test_a_bad_jobs_count_is_an_option_error():
    with pytest.raises(SystemExit) as err:
        wt.main(["--jobs", "0"])
    assert err.value.code == 2


def test_the_window_is_named_by_its_first_and_last_job():
    jobs = [SimpleNamespace(arrival=0.0, extra={"line": 7}),
            SimpleNamespace(arrival=7200.0, extra={"line": 3})]
    assert wt.window_label("/x/philly.csv", jobs) == (
        "Philly window: the first 2 jobs by submission in philly.csv, from line 7 to line 3 "
        "(2.0 h of submissions)")
