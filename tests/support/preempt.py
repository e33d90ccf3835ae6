"""Helpers of the preemption tests (service and Slurm): a scripted policy step, a run's
logged progress, and the sized job mix whose suspends and migration fire."""

from __future__ import annotations

from pathlib import Path

from ps_runtime.launcher import parse_batches


class ScriptedStep:
    """A policy step that answers what the test scripts, one slot at a time (the
    service's side of a Suspend is under test here, not a policy's choice)."""
    name = "scripted"
    preemptive = True

    def __init__(self):
        self.next: list = []
        self.added: dict[int, dict] = {}

    def add(self, q, *, in_id_order=False, work_left=1.0, restore_s=0.0):
        self.added[q.id] = {"work_left": work_left, "restore_s": restore_s}

    def remove(self, job_id):
        pass

    def ended(self, job_id):
        pass

    def suspended(self, job_id, work_left):
        self.added[job_id] = {"work_left": work_left}

    def decide(self, state, now, progress=None):
        out, self.next = self.next, []
        return out


def _batches(run_dir: Path) -> int:
    """The last batch every worker of the run has logged."""
    logs = sorted((run_dir / "ps").glob("worker*.log"))
    done = [max((r.batch for r in parse_batches(p.read_text().splitlines())), default=0)
            for p in logs]
    return min(done) if logs else 0


# The preemption run's jobs (tests/unit/job_scheduler/service/test_scheduler_preempt_run.py):
# model sizes the sluice policy prices (googlenet at batch 512: long1 ~300 s on one GPU,
# ~180 s on two; long2 ~246 s; short1 ~3 s); each job's real length is its command's.
# short1 has no arrival: the run submits it once long1 trains.
JOBS = {"jobs": [
    {"name": "long1", "model": "googlenet", "dataset_size": 750080, "epochs": 1,
     "batch_size": 512, "max_gpus": 2},
    {"name": "long2", "model": "googlenet", "dataset_size": 614400, "epochs": 1,
     "batch_size": 512, "max_gpus": 1}]}
SHORT = {"jobs": [
    {"name": "short1", "model": "resnet18", "dataset_size": 10240, "epochs": 1,
     "batch_size": 32, "max_gpus": 1}]}
