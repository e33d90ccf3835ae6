"""comparison.json of the four-arm demo, built from run results (no fabric)."""

import json

import pytest

from end_to_end import arms_report
from end_to_end.arms import ARMS
from topologies import load_topology


def result(jcts: dict[str, float | None], hosts: dict[str, list[str]]) -> dict:
    jobs = []
    for name, jct in jcts.items():
        jobs.append({"name": name, "status": "finished" if jct is not None else "failed",
                     "turnaround": jct, "gpus": len(hosts[name]), "ps_hosts": hosts[name][:1],
                     "worker_hosts": hosts[name]})
    done = [v for v in jcts.values() if v is not None]
    return {"jobs": jobs, "summary": {"makespan_s": 40.0 + len(done), "avg_jct_s": None}}


TOPO = load_topology("two-rack-100g")
NAMES = [h.name for h in TOPO.hosts]
HOSTS = {"x": [NAMES[0], NAMES[0]], "y": [NAMES[0], NAMES[3]], "z": [NAMES[2]]}


def test_comparison_has_the_documented_shape_and_figures():
    results = {"a": result({"x": 10.0, "y": 30.0, "z": 20.0}, HOSTS),
               "d": result({"x": 8.0, "y": 12.0, "z": None}, HOSTS)}
    predicted = {"a": {"x": 11.0, "y": 24.0, "z": 20.0}, "d": {"x": 8.0, "y": 12.6}}
    cmp = arms_report.comparison(TOPO, [ARMS["a"], ARMS["d"]], results, predicted, seed=47,
                                 wall_time_s=123.44, topology=TOPO.name, jobs=3)
    assert cmp["seed"] == 47 and cmp["wall_time_s"] == 123.4 and set(cmp["arms"]) == {"a", "d"}
    assert cmp["topology"] == "two-rack-100g" and cmp["jobs"] == 3
    a, d = cmp["arms"]["a"], cmp["arms"]["d"]
    for arm in (a, d):
        assert {"avg_jct_s", "p95_jct_s", "makespan_s", "jobs"} <= set(arm)
        for job in arm["jobs"].values():
            assert {"jct_s", "predicted_jct_s", "racks"} <= set(job)
    assert a["avg_jct_s"] == 20.0 and a["p95_jct_s"] == pytest.approx(29.0)
    assert a["makespan_s"] == 43.0 and a["finished"] == 3
    assert a["jobs"]["y"]["racks"] == sorted({TOPO.host_by_name[h].rack for h in HOSTS["y"]})
    assert len(a["jobs"]["y"]["racks"]) == 2 and len(a["jobs"]["x"]["racks"]) == 1
    assert a["worst_prediction_error_pct"] == 20.0            # y: |24 - 30| / 30
    # a job that did not finish has no JCT and counts in neither average nor error
    assert d["jobs"]["z"]["jct_s"] is None and d["finished"] == 2 and d["jobs_total"] == 3
    assert d["avg_jct_s"] == 10.0 and d["worst_prediction_error_pct"] == 5.0
    json.dumps(cmp)                                            # JSON as written


def test_p95_is_linear_between_order_statistics():
    assert arms_report.p95([5.0]) == 5.0 and arms_report.p95([]) is None
    assert arms_report.p95(list(map(float, range(1, 21)))) == pytest.approx(19.05)


def test_markdown_and_the_plot(tmp_path):
    results = {k: result({"x": 10.0 + i, "y": 30.0 - i, "z": 20.0}, HOSTS)
               for i, k in enumerate("abcd")}
    predicted = {k: {"x": 10.0, "y": 25.0, "z": 21.0} for k in "abcd"}
    cmp = arms_report.comparison(TOPO, list(ARMS.values()), results, predicted, seed=1,
                                 wall_time_s=1.0)
    text = arms_report.markdown(cmp)
    assert "(+0.0 % vs a)" in text and "| x | 10.0 / 10.0 / 2 / " in text
    png = arms_report.write_plot(cmp, tmp_path / "c.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
