"""Warm-pool sizing: each host's pool holds what its planned jobs take.

In `sluice demo`, h2 runs goog-b, res-e and res-f (12 PS processes) within 17 s; with one
pool size (8) for every host, res-f's processes on h2 were refills still importing MXNet
at nice 19, and its worker on h4 waited 12-14 s for them.
"""

from __future__ import annotations

import io
import os
from collections import Counter

from end_to_end.model_run import model_run
from end_to_end.run import (DEMO_JOBS, DEMO_TOPOLOGY, WARM_PER_HOST, RunConfig,
                            run_estimator, validate, warm_pool_sizes)
from ps_runtime.launcher import PSJob, WorkerOptions
from ps_runtime.plan import HostPlan, Node
from ps_runtime.warm import WarmRunner, pool_sizes, processes_per_host
from sluice_common.jobspec import JobSpec


class _Proc:
    def __init__(self, host):
        self.host = host
        self.pid = 0
        self.stdin = io.BytesIO()
        r, w = os.pipe()                 # a warm process says "ready" on its stdout
        os.write(w, b"ready\n")
        os.close(w)
        self.stdout = os.fdopen(r, "rb")

    def poll(self):
        return None


class _Base:
    """A ProcessRunner that starts nothing and records which host each spawn was for."""

    def __init__(self):
        self.spawned: list[str] = []

    def start(self, host, argv, env, log, stdin=None):
        self.spawned.append(host)
        return _Proc(host)


def test_processes_per_host_counts_scheduler_servers_and_workers():
    demand = processes_per_host([(["h2"], ["h1", "h2", "h2", "h3"]),
                                 (["h2", "h4"], ["h4"])])
    # job 1: scheduler + server on h2, workers h1, h2, h2, h3; job 2: scheduler on h2,
    # servers h2 and h4, worker h4
    assert demand == {"h1": 1, "h2": 6, "h3": 1, "h4": 2}


def test_processes_per_host_matches_the_launchers_plan(tmp_path):
    servers, workers = ["h2", "h4"], ["h2", "h2", "h4", "h1"]
    spec = JobSpec(name="j", model="resnet18", dataset_size=1024, epochs=1, batch_size=32,
                   max_gpus=4)
    plan = HostPlan(tuple(Node(h, "10.0.0.1") for h in servers),
                    tuple(Node(h, "10.0.0.1") for h in workers))
    job = PSJob(spec, plan, _Base(), tmp_path, batches=1, base_port=20000,
                options=WorkerOptions(compute="emulated"))
    started = Counter(p.node.host for p in job._plan())
    assert processes_per_host([(servers, workers)]) == started


def test_pool_sizes_add_a_spare_within_bounds():
    assert pool_sizes(["a", "b", "c"], {"a": 12, "b": 1, "c": 40}, spare=1, minimum=4,
                      maximum=16) == {"a": 13, "b": 4, "c": 16}


def test_demo_pools_cover_every_process_its_plan_starts_on_a_host():
    config = RunConfig(jobs=str(DEMO_JOBS), topology=DEMO_TOPOLOGY)
    jobs, topology = validate(config)
    planned = model_run(jobs, topology, config,
                        run_estimator(topology, config.compute, config.profile)).records
    sizes = warm_pool_sizes(topology, planned)
    need = processes_per_host((r["ps_hosts"], r["worker_hosts"]) for r in planned)
    assert set(sizes) == {h.name for h in topology.hosts}
    for host, n in need.items():
        assert sizes[host] > n, (host, n, sizes)
    # the busiest host needs more than the one size that starved it
    assert max(need.values()) > WARM_PER_HOST
    assert warm_pool_sizes(topology, None) == WARM_PER_HOST


def test_warm_runner_fills_and_refills_each_host_to_its_own_size(tmp_path):
    base = _Base()
    runner = WarmRunner(base, ["h1", "h2"], per_host={"h1": 2, "h2": 5})
    assert base.spawned.count("h1") == 2 and base.spawned.count("h2") == 5
    with open(tmp_path / "w.log", "w") as log:
        runner.start("h2", ["python", "-m", "ps_runtime.server"], {}, log)
    assert len(runner.idle["h2"]) == 5 and base.spawned.count("h2") == 6   # refilled to 5
    assert len(runner.idle["h1"]) == 2 and runner.cold == 0
    plain = WarmRunner(_Base(), ["h1", "h2"], per_host=3)
    assert {h: len(p) for h, p in plain.idle.items()} == {"h1": 3, "h2": 3}


def test_warm_runner_without_refill_tops_up_only_when_asked(tmp_path):
    # sluice demo and the experiments measure passes: a refill importing MXNet during one
    # doubled the demo's cross-rack batches, so they refill between passes
    base = _Base()
    runner = WarmRunner(base, ["h1", "h2"], per_host={"h1": 2, "h2": 3}, refill=False)
    with open(tmp_path / "w.log", "w") as log:
        runner.start("h2", ["python", "-m", "ps_runtime.server"], {}, log)
        runner.start("h2", ["python", "-m", "ps_runtime.worker"], {}, log)
    assert len(runner.idle["h2"]) == 1 and base.spawned.count("h2") == 3   # nothing spawned
    assert runner.taken == 2 and runner.cold == 0
    runner.fill()
    assert len(runner.idle["h2"]) == 3 and base.spawned.count("h2") == 5
    assert len(runner.idle["h1"]) == 2 and base.spawned.count("h1") == 2
