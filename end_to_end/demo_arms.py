"""``sluice demo``: one workload drawn from the Philly trace's distributions
(``end_to_end.workload_draw``, seed named in the report), run on the two-rack-100g fabric
once per arm (``end_to_end.arms``: a Slurm today, b Slurm + sluice's priority, c sluice's
scheduler, d sluice's scheduler + priority), one controller and one fabric for all arms,
then ``comparison.json`` / ``comparison.md`` / ``comparison.png`` (``end_to_end.arms_report``).

Before the passes, the exchange model predicts every job's JCT in every arm from that
arm's dry run: the arm's own scheduling loop on a virtual clock with the exchange model
timing the jobs (``end_to_end.model_run``), so the predictions never see a measured time
and decide as the live pass's loop does. Each arm starts with a full pool of
pre-started PS processes, forked from one fork server per host that imported MXNet once
(``ps_runtime.zygote``): filled between arms, never during one, in about a second where
importing again would take ~25 s an arm; a host whose pool runs dry in an arm forks one
(milliseconds of CPU) rather than starting one cold (an MXNet import in the job's time).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

from end_to_end import arms_report
from end_to_end.arms import Arm
from end_to_end.run import (RunConfig, environment, one_pass, out_dir, run_estimator,
                            say_compute, warm_processes)
from end_to_end.workload_draw import DrawSpec, draw_workload, jobs_yaml

PORT_BASE, PORT_STEP = 20000, 3000        # each arm's jobs on ports of their own


def _say(text: str) -> None:
    print(f"sluice demo: {text}", file=sys.stderr, flush=True)


def arm_config(config: RunConfig, arm: Arm) -> RunConfig:
    """The run's config with the arm's scheduler (policy, placement, the rule it prices
    placements with: the controller's) and priority. The dry run, the predictions and
    the pass all build the arm's policy from this."""
    return dataclasses.replace(config, policy=arm.policy, placement=arm.placement,
                               price_priority=arm.price_rule(config.rank),
                               priority="on" if arm.priority else "off")


def workload(topology, config: RunConfig, seed: int, spec: DrawSpec = DrawSpec()):
    estimator = run_estimator(topology, config.compute, config.profile)
    return draw_workload(lambda job, n: estimator.run_time(job, n), topology.total_gpus,
                         seed, spec)


def predictions(topology, jobs, config: RunConfig, arms: list[Arm]):
    """Per arm: the dry run's planned starts and the exchange model's JCT per job, both
    from the arm's own loop on a virtual clock (``end_to_end.model_run``)."""
    from end_to_end.model_run import model_run

    planned, predicted = {}, {}
    for arm in arms:
        got = model_run(jobs, topology, arm_config(config, arm),
                        run_estimator(topology, config.compute, config.profile))
        planned[arm.key], predicted[arm.key] = got.records, got.jct
    return planned, predicted


def pool_sizes(hosts: list[str], planned: dict[str, list[dict]]) -> dict[str, int]:
    """Each host's pool: the most processes any arm's planned starts take there, plus a
    spare. The same for every arm: an arm's real run decides on measured bandwidth and
    times and may put a job where another arm's dry run did (a trial with each arm's
    own plan + 2 started 12 of 126 processes cold). Uncapped: a process the pool lacks
    is forked in the arm's own time (milliseconds; it was an MXNet import before the
    fork server). Only what an arm took is forked again before the next."""
    from collections import Counter

    from ps_runtime.warm import pool_sizes as sizes, processes_per_host

    demand: Counter = Counter()
    for records in planned.values():
        demand |= processes_per_host((r["ps_hosts"], r["worker_hosts"]) for r in records)
    return sizes(hosts, demand, spare=1, minimum=1, maximum=10 ** 6)


def demo(config: RunConfig, arms: list[Arm], seed: int, spec: DrawSpec = DrawSpec()) -> int:
    """Run ``arms`` on the drawn workload; 0 when every job of every arm finished."""
    from end_to_end.gpu_records import gpu_records
    from mininet_fabric.lock import FabricLock
    from topologies import load_topology
    from topologies.mininet_topo import check_emulatable

    asked = time.monotonic()
    topology = load_topology(config.topology)
    check_emulatable(topology)
    drawn = workload(topology, config, seed, spec)
    jobs = drawn.jobs
    say_compute(config, "demo")
    out = out_dir(config, "demo")
    out.mkdir(parents=True, exist_ok=True)
    (out / "workload.yaml").write_text(jobs_yaml(jobs, seed))
    _say(f"{len(jobs)} jobs drawn with seed {seed} from the Philly trace's distributions, "
         f"offered load {drawn.load:.2f} over {drawn.window_s:.0f} s ({out / 'workload.yaml'}); "
         f"arms {', '.join(a.key for a in arms)}")
    planned, predicted = predictions(topology, jobs, config, arms)
    hosts = [h.name for h in topology.hosts]
    results = {}
    with FabricLock(f"sluice demo {out}"):
        started = time.monotonic()      # the wall time leaves out only the wait for the lock
        with environment(topology, config.topology, out, config.rank) as (fabric, client), \
                warm_processes(topology, fabric, config.compute, refill=False, fork=True,
                               per_host=pool_sizes(hosts, planned)) as runner:
            for k, arm in enumerate(arms):
                filling = time.monotonic()
                runner.fill()                 # between arms: forks, no import runs in one
                runner.wait_ready()
                _say(f"arm {arm.key} ({k + 1}/{len(arms)}): {arm.title} "
                     f"[{time.monotonic() - started:.0f} s so far; pool filled in "
                     f"{time.monotonic() - filling:.1f} s]")
                where = out / f"arm-{arm.key}"
                results[arm.key] = one_pass(topology, jobs, fabric, client, where,
                                            arm_config(config, arm), arm.priority,
                                            PORT_BASE + PORT_STEP * k, runner)
                _write_arm_report(results[arm.key], where)
                s = results[arm.key]["summary"]
                _say(f"arm {arm.key} done: {s['finished']}/{s['jobs']} jobs, average JCT "
                     f"{s['avg_jct_s'] or float('nan'):.1f} s, makespan {s['makespan_s']:.1f} s "
                     f"[{time.monotonic() - started:.0f} s so far]")
                if results[arm.key]["interrupted"]:
                    _say(f"interrupted; partial report in {where}")
                    return 130
    lock_wait = started - asked
    wall = time.monotonic() - asked - lock_wait       # the command, set-up and teardown in
    cmp = arms_report.comparison(
        topology, arms, results, predicted, seed=seed, wall_time_s=wall,
        topology=topology.name, jobs=len(jobs), fabric_lock_wait_s=round(lock_wait, 1),
        workload={"source": "Philly trace distributions (end_to_end/data/philly_distributions.yaml)",
                  "draw": dataclasses.asdict(spec), "file": "workload.yaml",
                  **drawn.describe()},
        rank_rule=config.rank, **config.compute_info,
        gpu_records=gpu_records({f"arm-{k}": r for k, r in results.items()}))
    _write_comparison(cmp, out, len(jobs))
    return 0 if all(a["finished"] == a["jobs_total"] for a in cmp["arms"].values()) else 1


def _write_arm_report(result, where: Path) -> None:
    from end_to_end.report import write_report

    write_report(result, where)


def _write_comparison(cmp: dict, out: Path, n_jobs: int) -> None:
    (out / "comparison.json").write_text(json.dumps(cmp, indent=1))
    arms_report.write_plot(cmp, out / "comparison.png")
    text = (f"# sluice demo: {cmp['topology']}, {n_jobs} jobs drawn from the Philly trace's "
            f"distributions (seed {cmp['seed']}), {len(cmp['arms'])} arm(s)\n\n"
            + arms_report.markdown(cmp)
            + "\n\nPlot: comparison.png (each arm's average and p95 JCT and makespan; the "
              "exchange model's average, predicted before the passes)\n\n"
            + f"wall time {cmp['wall_time_s']:.0f} s"
            + (f" (after {cmp['fabric_lock_wait_s']:.0f} s waiting for the fabric lock)"
               if cmp["fabric_lock_wait_s"] >= 1 else "") + "\n")
    (out / "comparison.md").write_text(text)
    print(text)
    print(f"reports: {out}/arm-*/report.md, {out}/comparison.md, {out}/comparison.png, "
          f"{out}/comparison.json")
