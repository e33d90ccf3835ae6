"""How good is the estimated start the scheduler service shows a queued job?

A window of a Tiresias trace is replayed through the scheduler service
(``SchedulerService`` with the simulated executor, in process, on a virtual clock: the
slot loop of ``sluice scheduler --executor simulated --time-factor F`` without its HTTP
front and without waiting for the wall clock). Each job is submitted at its (scaled)
arrival; right after its submission its ``estimated_start`` is read as ``GET /jobs``
shows it (the policy's dry run, ``job_scheduler/service/wait_forecast.py``); the slots
then run until every job started. Per policy it prints the absolute error of that
estimate against the actual start as a share of the job's wait (median, p90) over the
jobs that waited at least a slot, and the jobs with no estimate.

A job runs for its estimated C(n) times ``--time-factor`` (the simulated executor;
on the virtual clock the factor costs no wall time either way, so it defaults to 1:
the slot stays small next to the jobs); arrival gaps are scaled by ``--compress`` (and
by the time factor) so that jobs queue on the topology. ``--duration-error E``: each
job really runs (1+e) times what its executor predicted, e uniform in [-E, E], while
the service (and so the dry run) keeps the prediction, as a real job's C(n) is
misjudged. The figures on the trace's own durations are the estimator's C(n) (a job
file does not carry the trace's duration).

    .venv/bin/python -m bench.scheduler.bench_wait_estimates TRACE.csv [--jobs 60]
        [--start 0] [--compress 0.03] [--time-factor 1] [--duration-error 0]
        [--topology two-rack] [--policies fifo,lyapunov,sluice] [--json OUT]

TRACE defaults to ``$SLUICE_WORKLOADS/tiresias_60_job.csv``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from job_scheduler.core.estimator import Estimator
from job_scheduler.service.executors import Outcome, SimulatedExecutor, estimated_duration
from job_scheduler.service.policy_step import make_policy_step
from job_scheduler.service.scheduler import SchedulerService
from job_scheduler.service.store import JobStore
from job_scheduler.simulation.workloads import SHARED_WORKLOADS, load_tiresias
from sluice_common.jobspec import job_to_dict
from topologies import load_topology


class Clock:
    def __init__(self, t: float):
        self.t = t

    def __call__(self) -> float:
        return self.t


class MisjudgedExecutor(SimulatedExecutor):
    """The simulated executor, but each job really runs ``1 + e`` times the time its
    plan (and so the service, and the dry run) expects, ``e`` uniform in
    [-error, error], drawn per job id: the service keeps the predicted end; the job
    ends at the true one."""

    def __init__(self, duration_fn, time_factor: float, error: float, seed: int = 0):
        super().__init__(duration_fn, time_factor)
        self.error, self.seed = error, seed
        self._true: dict[int, float] = {}

    def launch(self, job, env=None) -> dict:
        e = random.Random(self.seed * 1_000_003 + job.id).uniform(-self.error, self.error)
        start = job.started_at
        self._true[job.id] = start + (job.expected_end - start) * (1.0 + e)
        return {}

    def suspend(self, job, now: float) -> dict:
        self._true.pop(job.id, None)
        return super().suspend(job, now)

    def poll(self, job, now: float):
        end = self._true.get(job.id)
        if end is None:
            return super().poll(job, now)
        if now >= end:
            del self._true[job.id]
            return Outcome("finished", end, 0, None)
        return None


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def replay(jobs, policy: str, topology, *, time_factor: float, compress: float,
           slot: float, error: float = 0.0, max_slots: int = 2_000_000) -> dict:
    est = Estimator()
    t0 = 1_000_000.0
    clock = Clock(t0)
    duration = estimated_duration(topology, est)
    executor = (MisjudgedExecutor(duration, time_factor, error) if error
                else SimulatedExecutor(duration, time_factor))
    with tempfile.TemporaryDirectory() as tmp:
        svc = SchedulerService(
            JobStore(Path(tmp) / "jobs.db"), topology,
            make_policy_step(policy, topology, est, slot=slot),
            {"simulated": executor}, "simulated", clock=clock)
        base = jobs[0].arrival
        arrivals = sorted(((j.arrival - base) * compress * time_factor, k, j)
                          for k, j in enumerate(jobs))
        submitted: dict[int, float] = {}        # job id -> submission time
        estimate: dict[int, float | None] = {}
        first: dict[int, float] = {}             # job id -> its first start
        nxt, slots, dry_s = 0, 0, 0.0
        while slots < max_slots:
            fresh = []
            while nxt < len(arrivals) and t0 + arrivals[nxt][0] <= clock.t:
                spec = job_to_dict(arrivals[nxt][2])
                spec["arrival"] = 0
                res = svc.submit(yaml.safe_dump({"jobs": [spec]}), f"trace-{arrivals[nxt][1]}")
                fresh += res.job_ids
                submitted[res.job_ids[0]] = clock.t
                nxt += 1
            if fresh:
                began = time.perf_counter()
                shown = {j["id"]: j for j in svc.waits.public_many(
                    [svc.store.get(i) for i in fresh])}
                dry_s += time.perf_counter() - began
                for i in fresh:
                    estimate[i] = shown[i]["estimated_start"]
            svc.tick()
            slots += 1
            for r in svc.store.jobs(["running"]):     # its first start (a resume is not)
                first.setdefault(r.id, r.started_at)
            if nxt == len(arrivals) and not svc.store.jobs(["queued"]):
                break
            clock.t += slot
        started = {r.id: first.get(r.id, r.started_at) for r in svc.store.jobs()}
    shares, errors, waited, missing, zero_ok = [], [], 0, 0, 0
    for i, sub in submitted.items():
        wait = started[i] - sub
        if estimate[i] is None:
            missing += 1
            continue
        err = abs(estimate[i] - started[i])
        if wait >= slot:
            waited += 1
            shares.append(err / wait)
            errors.append(err)
        elif err < slot:
            zero_ok += 1
    return {"policy": policy, "jobs": len(submitted), "waited": waited,
            "no_estimate": missing, "no_wait_predicted": zero_ok,
            "median_wait_s": statistics.median(
                [started[i] - s for i, s in submitted.items()]),
            "median_share": percentile(shares, 0.5), "p90_share": percentile(shares, 0.9),
            "median_abs_error_s": percentile(errors, 0.5), "slots": slots,
            "forecast_s": round(dry_s, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", default=str(SHARED_WORKLOADS / "tiresias_60_job.csv"))
    ap.add_argument("--jobs", type=int, default=60, help="jobs in the window")
    ap.add_argument("--start", type=int, default=0, help="first job of the window")
    ap.add_argument("--compress", type=float, default=0.03,
                    help="arrival gaps x this (< 1: more load, so jobs queue)")
    ap.add_argument("--time-factor", type=float, default=1.0,
                    help="the simulated executor's: a job runs C(n) x this seconds")
    ap.add_argument("--slot", type=float, default=1.0)
    ap.add_argument("--duration-error", type=float, default=0.0,
                    help="each job really runs (1+e) x its predicted time, e uniform in "
                    "[-E, E] (0: exactly as predicted)")
    ap.add_argument("--topology", default="two-rack")
    ap.add_argument("--policies", default="fifo,lyapunov,sluice")
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    try:
        jobs = load_tiresias(args.trace)[args.start:args.start + args.jobs]
    except (OSError, ValueError) as err:
        print(f"{args.trace}: {err}", file=sys.stderr)
        return 2
    if not jobs:
        print(f"{args.trace}: no job in the window --start {args.start} --jobs {args.jobs}",
              file=sys.stderr)
        return 2
    topology = load_topology(args.topology)
    print(f"{args.trace}: jobs {args.start}..{args.start + len(jobs) - 1} on "
          f"{args.topology} ({topology.total_gpus} GPUs), arrivals x {args.compress:g}, "
          f"time factor {args.time_factor:g}, slot {args.slot:g} s, duration error "
          f"+-{args.duration_error:g}")
    print(f"{'policy':<9} {'jobs':>4} {'waited':>6} {'no est':>6} {'med wait s':>10} "
          f"{'med |err|/wait':>14} {'p90 |err|/wait':>14} {'med |err| s':>11} {'wall s':>7}")
    out = []
    for policy in args.policies.split(","):
        began = time.perf_counter()
        r = replay(jobs, policy, topology, time_factor=args.time_factor,
                   compress=args.compress, slot=args.slot, error=args.duration_error)
        r["wall_s"] = round(time.perf_counter() - began, 2)
        out.append(r)

        def f(v, spec):
            return "-" if v is None else format(v, spec)
        print(f"{policy:<9} {r['jobs']:>4} {r['waited']:>6} {r['no_estimate']:>6} "
              f"{r['median_wait_s']:>10.1f} {f(r['median_share'], '>14.3f')} "
              f"{f(r['p90_share'], '>14.3f')} {f(r['median_abs_error_s'], '>11.1f')} "
              f"{r['wall_s']:>7.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
