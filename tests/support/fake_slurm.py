"""A fake Slurm client (the executor's bookkeeping tests: no I/O) and a job spec for it."""

from __future__ import annotations

from slurm_client import JobInfo, SlurmCommandError, SlurmUnavailable
from sluice_common.jobspec import parse_jobs_text


SPEC = parse_jobs_text("jobs:\n  - {name: j, model: resnet18, batch_size: 8, dataset_size: 64, "
                       "epochs: 1, max_gpus: 3}\n")[0]


class FakeSlurm:
    def __init__(self):
        self.submitted = []
        self.parts: dict[int, list[JobInfo]] = {}
        self.details: dict[int, list[JobInfo]] = {}
        self.cancelled = []
        self.down = False
        self.reject = None
        self.node_list = []              # sinfo/scontrol: NodeInfo per node
        self.gpu_indices = {}            # Slurm job id -> node -> GPU indices

    def nodes(self):
        self._check()
        return list(self.node_list)

    def job_gpu_indices(self):
        self._check()
        return {k: dict(v) for k, v in self.gpu_indices.items()}

    def _check(self):
        if self.down:
            raise SlurmUnavailable("squeue", "Unable to contact slurm controller")

    def submit(self, sub, env=None, unset=()):
        self._check()
        if self.reject:
            raise SlurmCommandError("sbatch", self.reject)
        self.submitted.append((sub, dict(env or {}), tuple(unset)))
        return 100 + len(self.submitted)

    def jobs(self, ids=(), name=None):
        self._check()
        out = [p for parts in self.parts.values() for p in parts]
        if name:
            return [p for p in out if p.name == name]
        return [p for p in out if p.leader in set(ids)]

    def job(self, job_id):
        self._check()
        return self.details.get(job_id, [])

    def accounted(self, ids):           # sacct: what slurmdbd recorded
        self._check()
        self.sacct_calls = getattr(self, "sacct_calls", 0) + 1
        return [p for p in getattr(self, "acct", []) if p.leader in set(ids)]

    def cancel(self, job_id, signal=None):
        self.cancelled.append(job_id)


TOPO = {"name": "t", "switches": [{"name": "tor1", "role": "tor"}, {"name": "tor2", "role": "tor"},
                                  {"name": "sp", "role": "spine"}],
        "racks": [{"name": "r1", "tor": "tor1"}, {"name": "r2", "tor": "tor2"}],
        "hosts": [{"name": "h1", "rack": "r1", "gpus": 4, "bw": 100},
                  {"name": "h2", "rack": "r1", "gpus": 4, "bw": 100},
                  {"name": "h3", "rack": "r2", "gpus": 4, "bw": 100}],
        "links": [{"a": "tor1", "b": "sp", "bw": 100}, {"a": "tor2", "b": "sp", "bw": 100}]}
