"""How a placement's bandwidth is printed: an in-host placement says in-host, not the
bus rate of its loopback as Mbit/s of a fabric it never crosses."""

from __future__ import annotations

import math

from end_to_end import runloop
from end_to_end.report import markdown
from end_to_end.result import bw_text
from job_scheduler.core.estimator import Estimator, nominal_bandwidth
from job_scheduler.core.policies import make_policy
from sluice_common.jobspec import JobSpec
from support.run_results import synthetic_result
from topologies import load_topology

TWO_RACK = load_topology("two-rack")


def test_one_host_is_in_host_whatever_the_bus_rate():
    assert bw_text(4_000_000_000.0, ["h1"], ["h1", "h1"]) == "in-host"
    assert bw_text(math.inf, ["h1"], ["h1"]) == "in-host"
    assert bw_text(None, ["h1"], ["h1"]) == "in-host"
    assert bw_text(1234.4, ["h1"], ["h3", "h4"]) == "1234 Mbit/s"
    assert bw_text(1234.4, ["h1"], ["h1", "h2"], "") == "1234"     # a pair crosses the fabric


def test_the_report_table_says_in_host():
    result = synthetic_result(priority=True, slow=1.0)
    result["decisions"].append({"t": 2.0, "job": "b", "gpus": 2, "ps_hosts": ["h2"],
                                "worker_hosts": ["h2", "h2"], "bw_nominal_mbps": 4e9,
                                "bw_estimate_mbps": 4e9, "C_n_s": 3.0, "C_n_nominal_s": 3.0,
                                "notes": {}})
    text = markdown(result)
    row = next(line for line in text.splitlines() if line.startswith("| 2.0 | b |"))
    assert "| in-host | in-host |" in row and "4000000000" not in text
    assert "| 1234 |" in text or "| 1235 |" in text        # a placement across hosts: its rate


class _Client:
    url = "http://198.18.0.1:1"         # where the job's workers would report

    def links(self):
        return {"ports": []}

    def register_job(self, body, wait):
        return {"token": ""}


class _PSJob:
    """A PS job that starts nothing (the line under test is said before any process)."""
    workers: list = []

    def __init__(self, *args, **kwargs):
        pass

    def registration(self):
        return {}

    def start(self):
        pass


def test_the_run_loop_says_in_host_for_a_one_host_start(tmp_path, monkeypatch):
    monkeypatch.setattr(runloop, "PSJob", _PSJob)
    job = JobSpec(name="solo", model="resnet18", dataset_size=640, epochs=1, batch_size=32,
                  max_gpus=2)
    est = Estimator(nominal_bw_mbps=nominal_bandwidth(TWO_RACK))
    run = runloop.RealTimeRun(TWO_RACK, [job], make_policy("fifo"), est, fabric=None,
                              client=_Client(), out_dir=tmp_path, runner=object())
    said: list[str] = []
    run.say = said.append
    run.loop.decide_slot([run.loop.admit(job)])
    start, = [line for line in said if line.startswith("start solo")]
    d = run.decisions[0]
    assert set(d["ps_hosts"]) | set(d["worker_hosts"]) == {d["ps_hosts"][0]}   # one host
    assert "bw estimate in-host (nominal in-host)" in start and "Mbit/s" not in start
