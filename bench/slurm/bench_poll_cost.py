"""Slurm commands per minute with 200 running jobs, per-job polling vs batched.

    python -m bench.slurm.bench_poll_cost [--jobs 200] [--slot 1] [--poll-interval 5] [--json OUT]

No Slurm daemons: the scheduler service's real slot (``SchedulerService.tick``: every
running job polled, then capacity read before the decision) runs over a job store with
``--jobs`` running Slurm jobs, against :class:`CountingSlurm`, the real
:class:`~slurm_client.client.SlurmClient` with only its process call replaced by canned
22.05 answers (every job RUNNING, nodes from the recorded ``sinfo --json``) and a count
of each command. One simulated minute of slots (``--slot`` s each, simulated clock):

- before: each job asked alone (the executor's path when the service does not call
  ``prepare_poll``), capacity read every slot;
- after: ``prepare_poll`` (one ``squeue --jobs=...`` for all, one ``sacct`` only for jobs
  squeue lacks: none here) every ``--poll-interval`` s, capacity read on those polls.

Prints the commands per minute of each and the ratio after/before; the goal is "at most
a few per poll, independent of the number of jobs", so it also prints the
commands per poll for ``--jobs`` and for 10 jobs.
"""

from __future__ import annotations

import copy
import json
import tempfile
from collections import Counter
from pathlib import Path

from bench import harness
from bench.harness import ROOT

SINFO_FIXTURE = ROOT / "tests" / "data" / "slurm" / "sinfo.json"


class CountingSlurm:
    """A SlurmClient whose ``run`` answers like Slurm 22.05 and counts every command."""

    def __new__(cls, topology):
        from slurm_client import SlurmClient

        class _Client(SlurmClient):
            def __init__(self):
                super().__init__()
                self.counts: Counter = Counter()
                self.sinfo = sinfo_json(topology)

            def run(self, argv, *, env=None, unset=()):
                self.counts[argv[0]] += 1
                if argv[0] == "squeue":
                    ids = next(a for a in argv if a.startswith("--jobs="))[7:].split(",")
                    return "".join(f"{i}|RUNNING|None|h1|root|sluice-job-{i}\n" for i in ids)
                if argv[:2] == ["sinfo", "--version"]:
                    return "slurm 22.05.8\n"
                if argv[0] == "sinfo":
                    return self.sinfo
                return ""          # scontrol -d show job -o (no GRES detail), sacct
        return _Client()


def sinfo_json(topology) -> str:
    data = json.loads(SINFO_FIXTURE.read_text())
    first = data["nodes"][0]
    nodes = []
    for h in topology.hosts:
        n = copy.deepcopy(first)
        n.update(name=h.name, hostname=h.name, address=h.ip, gres=f"gpu:{h.gpus}",
                 gres_used="gpu:0", state="idle")
        nodes.append(n)
    data["nodes"] = nodes
    return json.dumps(data)


def one_minute(jobs: int, slot: float, poll_interval: float, batched: bool) -> Counter:
    from job_scheduler.core.decisions import StartDecision
    from job_scheduler.core.estimator import Estimator
    from job_scheduler.service.policy_step import make_policy_step
    from job_scheduler.service.scheduler import SchedulerService
    from job_scheduler.service.slurm_executor import SlurmExecutor, SlurmJobOptions
    from job_scheduler.service.store import JobStore
    from sluice_common.jobspec import parse_jobs_text
    from sluice_common.placement import Placement
    from topologies import load_topology

    topology = load_topology(f"cluster-2k:leaves={max(1, -(-jobs // 32))}")
    hosts = [h.name for h in topology.hosts]
    with tempfile.TemporaryDirectory() as tmp:
        store = JobStore(Path(tmp) / "s.db")
        text = "jobs:\n" + "".join(f"  - {{name: j{k}, model: resnet18, batch_size: 8, "
                                   "dataset_size: 64, epochs: 1, max_gpus: 1}\n"
                                   for k in range(jobs))
        _, ids = store.add_submission("bench.yaml", text, parse_jobs_text(text, "bench.yaml"))
        for k, job_id in enumerate(ids):
            host = hosts[k // 4]
            placement = StartDecision(job_id, Placement(str(job_id), (host,), (host,)))
            store.update(job_id, state="running", gpus=1, executor="slurm", attempts=1,
                         placement=placement.placement_record(), started_at=0.0,
                         run_dir=f"{tmp}/run-{job_id}", external_id=str(1000 + job_id))
        client = CountingSlurm(topology)
        ex = SlurmExecutor(client, topology, tmp, SlurmJobOptions(poll_interval=poll_interval))
        if not batched:               # the service's hook does nothing: job by job
            ex.prepare_poll = _absent
        clock = [0.0]
        policy = make_policy_step("fifo", topology, Estimator(None), slot=slot)
        svc = SchedulerService(store, topology, policy, {"slurm": ex}, "slurm",
                               clock=lambda: clock[0], capacity=ex.capacity)
        client.counts.clear()
        for _ in range(round(60 / slot)):
            svc.tick()
            clock[0] += slot
        running = len(store.jobs(["running"]))
        store.close()
    assert running == jobs, f"{running} of {jobs} jobs still running: the fake is wrong"
    return client.counts


def _absent(*_args, **_kw):
    """Stands for "the service does not call prepare_poll" (the per-job path)."""
    return None


def main(argv=None) -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--slot", type=float, default=1.0)
    ap.add_argument("--poll-interval", type=float, default=5.0)
    args = ap.parse_args(argv)
    before = one_minute(args.jobs, args.slot, 0.0, batched=False)
    after = one_minute(args.jobs, args.slot, args.poll_interval, batched=True)
    small = one_minute(10, args.slot, args.poll_interval, batched=True)
    polls = 60 / max(args.poll_interval, args.slot)
    print(f"before: {dict(before)}\nafter:  {dict(after)}\nafter, 10 jobs: {dict(small)}")
    figures = [
        harness.figure(f"Slurm commands per minute, {args.jobs} running jobs, batched "
                       f"(poll every {args.poll_interval:g} s, slot {args.slot:g} s)",
                       sum(after.values()), "commands/min", baseline=sum(before.values()),
                       baseline_unit="commands/min (per-job polling, every slot)"),
        harness.figure(f"Slurm commands per poll, {args.jobs} running jobs",
                       sum(after.values()) / polls, "commands/poll",
                       baseline=sum(small.values()) / polls,
                       baseline_unit="commands/poll with 10 running jobs"),
    ]
    if args.json:
        harness.write_json(args.json, {"figures": figures, "before": dict(before),
                                       "after": dict(after), "after_10_jobs": dict(small)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
