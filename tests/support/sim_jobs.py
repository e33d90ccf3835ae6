"""Jobs, placements and a pinned policy for driving the simulator by hand."""

from __future__ import annotations

from sluice_common.placement import Placement
from job_scheduler.core.policies import Policy
from sluice_common.jobspec import JobSpec


def job(name, arrival=0.0, max_gpus=4, model="resnet50", m=20000):
    return JobSpec(name=name, model=model, dataset_size=m, epochs=1, batch_size=32,
                   max_gpus=max_gpus, arrival=arrival)


class Pinned(Policy):
    """A test policy: start each job at its slot on a placement given up front."""
    name = "pinned"

    def __init__(self, placements):
        self.placements = placements

    def step(self, sim):
        for j in list(sim.waiting):
            sim.start(j, self.placements[sim.jobs[j].name])


CROSS_A = Placement("a", ("h1",), ("h3",) * 4)      # 4 flows over both rack uplinks
CROSS_B = Placement("b", ("h2",), ("h4",) * 4)


TWO_GPUS = """name: two-gpu
switches: [{name: t1, role: tor}]
racks: [{name: r1, tor: t1}]
hosts: [{name: h1, rack: r1, gpus: 2, bw: 10000}]
"""


CONTENDED = """jobs:
  - {name: long1, model: vgg16, dataset_size: 400000, epochs: 1, batch_size: 32, max_gpus: 2}
  - {name: long2, model: resnet50, dataset_size: 400000, epochs: 1, batch_size: 32,
     max_gpus: 1, arrival: 10}
  - {name: short1, model: resnet18, dataset_size: 20000, epochs: 1, batch_size: 32,
     max_gpus: 1, arrival: 300}
  - {name: short2, model: alexnet, dataset_size: 20000, epochs: 1, batch_size: 32,
     max_gpus: 1, arrival: 400}
"""
