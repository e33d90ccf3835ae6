"""A new executor is one registry entry (job_scheduler/service/executor_registry.py)
and its own module (here, the class below): `sluice scheduler --executor NAME` offers it,
the service builds it with its options, starts jobs through it, records its external id
and takes capacity from it."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest
import yaml

from job_scheduler.core.estimator import Estimator
from job_scheduler.service import executor_registry
from job_scheduler.service.app import build_service
from job_scheduler.service.cli import configure_scheduler, service_config
from job_scheduler.service.executor_registry import ExecutorKind
from job_scheduler.service.executors import Outcome
from job_scheduler.service.policy_step import make_policy_step
from topologies import load_topology

NAME = "recorder"


@dataclass(frozen=True)
class RecorderOptions:
    prefix: str = "rec-"


class RecorderExecutor:
    """An executor of its own module's kind: it records what it is asked, runs nothing."""
    kind = NAME

    def __init__(self, options: RecorderOptions, chosen: bool):
        self.options, self.chosen = options, chosen
        self.launched: list[str] = []
        self.capacity_calls = 0

    def plan(self, job, decision, now):
        return {"executor": self.kind, "started_at": now}

    def launch(self, job, env=None):
        self.launched.append(job.name)
        return {"external_id": self.options.prefix + job.name}

    def poll(self, job, now):
        return Outcome("finished", now, 0) if now - job.started_at > 3600 else None

    def learned(self, job):
        return {}

    def stop(self, job):
        pass

    def capacity(self, state, running):
        self.capacity_calls += 1


@pytest.fixture
def recorder():
    kind = executor_registry.register(ExecutorKind(
        NAME, "records the jobs it is asked to run", options_type=RecorderOptions,
        options=lambda config, topology: RecorderOptions(prefix=f"{topology.name}-"),
        build=lambda context, options: RecorderExecutor(options or RecorderOptions(),
                                                        context.chosen),
        capacity=lambda executor: executor.capacity))
    yield kind
    executor_registry.unregister(NAME)


def test_sluice_scheduler_selects_it_and_its_builder_runs_the_jobs(recorder, tmp_path):
    parser = argparse.ArgumentParser()
    configure_scheduler(parser)
    assert NAME in parser.format_help()
    args = parser.parse_args(["--executor", NAME, "--db", str(tmp_path / "s.db"),
                              "--listen", "127.0.0.1:0", "--policy", "fifo"])
    config = service_config(args)
    topology = load_topology(config.topology)
    estimator = Estimator()
    options = recorder.options(config, topology)
    service, server = build_service(config, topology,
                                    make_policy_step("fifo", topology, estimator),
                                    estimator, options)
    try:
        ours = service.executors[NAME]
        assert isinstance(ours, RecorderExecutor) and ours.chosen and service.executor == NAME
        assert ours.options.prefix == "two-rack-"
        # the others are built too (a previous run's jobs are reconciled), not chosen
        assert set(service.executors) == set(executor_registry.names())
        service.submit(yaml.safe_dump({"jobs": [{"name": "j1", "model": "resnet18",
                                                 "dataset_size": 1000, "epochs": 1,
                                                 "batch_size": 32, "max_gpus": 1}]}), "t")
        service.tick()
        assert ours.launched == ["j1"] and ours.capacity_calls >= 1
        job = service.store.jobs()[0]
        assert (job.executor, job.external_id) == (NAME, "two-rack-j1")
        assert job.to_public()["external_id"] == "two-rack-j1"
    finally:
        server.server_close()
        service.store.close()


def test_an_unknown_executor_is_refused_naming_the_registered_ones(tmp_path):
    from job_scheduler.service.app import ServiceConfig

    with pytest.raises(ValueError, match="executor: must be one of simulated, local"):
        ServiceConfig(db=tmp_path / "s.db", executor="kubernetes")


def test_a_builder_must_make_its_own_kind(recorder, tmp_path):
    from job_scheduler.service.app import ServiceConfig
    from job_scheduler.service.executor_registry import ExecutorContext

    config = ServiceConfig(db=tmp_path / "s.db", executor=NAME)
    wrong = ExecutorKind("other", "x", build=lambda c, o: RecorderExecutor(o, c.chosen))
    context = ExecutorContext(config, load_topology("two-rack"), Estimator(),
                              tmp_path / "s.db", chosen=False)
    with pytest.raises(TypeError, match="made a 'recorder' executor"):
        wrong.make(context, RecorderOptions())
    with pytest.raises(TypeError, match="options must be RecorderOptions"):
        recorder.make(context, object())
