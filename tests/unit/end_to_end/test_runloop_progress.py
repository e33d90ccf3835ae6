"""One path for a job's progress in the run loop: the workers report it to the controller
themselves (ps_runtime/progress.py); the loop hands them the controller's URL and the
job's token and follows their logs for its own picture only. Real ps-lite processes on
loopback addresses (no fabric) and the controller's real HTTP API on a fake flow table."""

from __future__ import annotations

import yaml

from controller.client import ControllerClient
from job_scheduler.core.estimator import Estimator
from job_scheduler.core.policies import make_policy
from ps_runtime.plan import BLOCK
from ps_runtime.runners import LocalRunner
from ps_runtime.worker_overrides import WorkerOverrides
from sluice_common.jobspec import JobSpec
from end_to_end.result import iterations_of
from end_to_end.run_options import RunOptions
from end_to_end.runloop import RealTimeRun, reported_by_rank
from topologies import load_topology


def test_reported_by_rank_keys_the_controllers_batches_by_worker_rank():
    assert reported_by_rank({"w10": 3, "w2": 5, "w0": 7}) == {"0": 7, "2": 5, "10": 3}
    assert reported_by_rank({}) == {}
    assert reported_by_rank({"s0": 1, "wx": 2, "w1": 4}) == {"1": 4}


class LoopClient(ControllerClient):
    """The loop's client: a progress report sent from the loop's own process is recorded
    and fails."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reported: list = []

    def progress(self, *args, **kwargs):
        self.reported.append(args)
        raise AssertionError("the run loop reported progress itself")


def _loopback_topology(tmp_path):
    """Two racks of one GPU host each, at loopback addresses the processes can bind."""
    doc = {"name": "lo-two-rack",
           "switches": [{"name": "t1", "role": "tor"}, {"name": "t2", "role": "tor"},
                        {"name": "s1", "role": "spine"}],
           "racks": [{"name": "r1", "tor": "t1"}, {"name": "r2", "tor": "t2"}],
           "hosts": [{"name": "h1", "rack": "r1", "gpus": 1, "bw": 10000, "ip": "127.0.1.1"},
                     {"name": "h2", "rack": "r2", "gpus": 1, "bw": 10000, "ip": "127.0.1.2"}],
           "links": [{"a": "t1", "b": "s1", "bw": 100}, {"a": "t2", "b": "s1", "bw": 100}]}
    path = tmp_path / "topo.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_topology(str(path))


def test_the_workers_report_their_batches_and_the_loop_reports_none(tmp_path, free_port_base):
    from controller.api import ApiServer
    from controller.fake_fabric import bring_up
    from support.controller_fakes import ADMIN, make_service

    topology = _loopback_topology(tmp_path)
    api = ApiServer(bring_up(make_service(topology, rank="remaining")), "127.0.0.1", 0).start()
    client = LoopClient(api.url, ADMIN)
    job = JobSpec(name="pj", model="resnet18", dataset_size=4 * 30, epochs=1, batch_size=4,
                  max_gpus=2)
    options = RunOptions(priority=True, slot_s=0.5, compute="emulated",
                         worker_overrides={"*": WorkerOverrides(compute_s=0.03,
                                                                bytes_per_batch=4096)},
                         job_timeout_s=240, port_base=free_port_base(4 * BLOCK))
    try:
        result = RealTimeRun(topology, [job], make_policy("fifo"), Estimator(), None, client,
                             tmp_path / "run", options, policy_name="fifo",
                             runner=LocalRunner()).run()
    finally:
        api.stop()
    (rec,) = result["jobs"]
    assert rec["status"] == "finished", rec.get("error")
    assert rec["gpus"] == 2 and rec["batches"] == 15
    assert client.reported == []
    assert len(iterations_of(rec)) == rec["gpus"] * rec["batches"]
    # what the controller held for every worker at the job's end: its own last report
    assert rec["controller"]["reported_batch"] == {"0": 15, "1": 15}
    for w in range(rec["gpus"]):
        log = (tmp_path / "run" / "jobs" / "pj" / f"worker{w}.log").read_text()
        assert "cannot reach the controller" not in log
