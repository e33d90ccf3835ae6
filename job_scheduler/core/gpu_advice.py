"""Advice on a job's ``max_gpus`` from Liquid's resource estimator
(``resource_estimator``): used by ``sluice validate`` and ``sluice submit`` to warn when
a job may take GPUs beyond the point of diminishing returns, or (``--cap-gpus``) to cap
it there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import yaml

from sluice_common.jobspec import JobSpec
from job_scheduler.core.resource_estimator import Requirement, default_estimator


@dataclass(frozen=True)
class Advice:
    job: JobSpec
    need: Requirement

    @property
    def beyond(self) -> bool:
        return self.job.max_gpus > self.need.max_useful_gpus

    def warning(self) -> str:
        return (f"warning: job '{self.job.name}': max_gpus {self.job.max_gpus} is beyond the "
                f"point of diminishing returns (Liquid's estimate: "
                f"{self.need.max_useful_gpus} GPU(s), {self.need.gmem_gib:.1f} GiB GPU memory, "
                f"{self.need.bandwidth_gbps:.0f} Gbit/s per worker)")


def advise(jobs: Sequence[JobSpec]) -> list[Advice]:
    from job_scheduler.core.estimator import Estimator
    est, forest = Estimator(), default_estimator()
    return [Advice(job, forest.predict(est.params(job), job.batch_size)) for job in jobs]


def capped_text(text: str, advice: Sequence[Advice]) -> str:
    """The job YAML with every ``max_gpus`` beyond its point of diminishing returns
    lowered to it (other fields untouched; comments are not kept)."""
    caps = {a.job.name: a.need.max_useful_gpus for a in advice if a.beyond}
    data = yaml.safe_load(text)
    for raw in data["jobs"]:
        if raw.get("name") in caps:
            raw["max_gpus"] = caps[raw["name"]]
    return yaml.safe_dump(data, sort_keys=False)
