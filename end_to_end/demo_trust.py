"""The simulator beside a ``sluice demo`` run: each arm's average JCT as the
discrete-event simulator gives it on the run's own workload, against the one measured.

A run is its ``--out`` directory (``comparison.json`` and ``workload.yaml``, what
``end_to_end.demo_arms`` writes) or its ``comparison.json`` alone. The run's jobs are its
workload file beside the comparison; for a stored ``seedS-runK-comparison.json`` the
``seedS-workload.yaml`` beside it (bench/results/demo: drawn by the code the runs ran);
else they are drawn again from the seed and the draw the comparison records
(``end_to_end.workload_draw``, deterministic), which is the run's workload only while
the draw and the estimator it sizes jobs with are the run's (seed 49's stored runs
predate the start-up in the estimator: drawn again now, every job's dataset is 5-37 %
larger). Which one was used is printed with the table; the job names must be the ones
the arms measured.

Each arm is simulated as the demo's dry run builds its simulator
(``end_to_end.run.simulator``: the arm's policy, placement and pricing rule by
``end_to_end.demo_arms.arm_config``, the run's estimator with the exchange model priced
on the emulated fabric, ``ExchangePricing.for_topology(emulated=True)``, i.e. ``sluice
simulate --exchange emulated``, the start-up of the run's compute, the demo's slot), with
the rack uplinks shared as ``sluice simulate`` shares them, each uplink's rate split among
the jobs sending at once, as the exchange model splits a link (``share="senders"``: a PS job
sends one way at a time, so on a full-duplex uplink two jobs meet only while they send
the same way), and, in an arm with the controller's priority, strict priority by the
run's rule (``--priority RULE``). ``compare_run(run, share="flows")`` simulates the arms
as ``sluice whatif`` and ``sluice simulate`` do instead, each uplink's level split equally
among its flows: the simulator at the point its table is used.

Whatever cannot be read or rebuilt makes that run's arms ``cannot judge``
(``end_to_end.trust_verdict``), never an error: a missing or unreadable file, a missing
arm, an arm in which not every job finished, a workload that cannot be drawn again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from end_to_end.trust_verdict import Comparison

BOUND_PCT = 10.0
ARMS = "abcd"


@dataclass(frozen=True)
class DemoRun:
    label: str
    comparison: dict | None
    jobs: list | None                 # the run's JobSpecs
    reason: str | None = None         # why none of its arms can be judged
    workload: str = "none"            # where its jobs came from

    def describe(self) -> str:
        return f"{self.label}: workload {self.workload}"


def _label(path: Path) -> str:
    if path.is_dir():
        return path.name
    stem = path.name.removesuffix(".json")
    return stem.removesuffix("-comparison") if stem != "comparison" else path.parent.name


def load_run(path: str | Path) -> DemoRun:
    """A demo run from its directory or its comparison JSON; what cannot be read is the
    run's ``reason`` (never raised)."""
    path = Path(path)
    label = _label(path)
    cmp_path = path / "comparison.json" if path.is_dir() else path
    try:
        cmp = json.loads(cmp_path.read_text())
    except (OSError, ValueError) as err:
        return DemoRun(label, None, None, f"{cmp_path}: cannot be read ({err})")
    if not isinstance(cmp, dict) or not isinstance(cmp.get("arms"), dict):
        return DemoRun(label, None, None, f"{cmp_path}: not a demo comparison (no 'arms' object)")
    try:
        jobs, source = _workload(cmp, cmp_path)
    except (OSError, ValueError, KeyError, TypeError) as err:
        return DemoRun(label, cmp, None, f"no workload: {err}")
    measured = {n for a in cmp["arms"].values() if isinstance(a, dict)
                for n in (a.get("jobs") or {})}
    names = {j.name for j in jobs}
    if measured != names:
        return DemoRun(label, cmp, None, f"the workload's jobs {sorted(names)} are not the "
                                         f"ones the arms measured {sorted(measured)}", source)
    return DemoRun(label, cmp, jobs, workload=source)


def profile_of(cmp: dict) -> str | None:
    """The profile the run priced with: its recorded file, or the package's file of that
    name where the recorded path is not on this machine. ValueError when neither is."""
    given = cmp.get("profile")
    if given is None:
        return None
    if Path(given).is_file():
        return str(given)
    import sluice_common

    here = Path(sluice_common.__file__).resolve().parent / "data" / Path(given).name
    if here.is_file():
        return str(here)
    raise ValueError(f"the run's profile {given!r} is not on this machine")


def _config(cmp: dict, jobs_file: str):
    from end_to_end.run import RunConfig

    compute = cmp.get("compute")
    if not isinstance(compute, str):
        raise ValueError("the comparison records no compute")
    rank = cmp.get("rank_rule")
    if not isinstance(rank, str):
        raise ValueError("the comparison records no rank_rule")
    topology = cmp.get("topology")
    if not isinstance(topology, str):
        raise ValueError("the comparison records no topology")
    return RunConfig(jobs=jobs_file, topology=topology, compute=compute, rank=rank,
                     profile=profile_of(cmp))


def stored_workload(cmp_path: Path) -> Path | None:
    """The workload file of a run's comparison: ``workload.yaml`` beside
    ``comparison.json`` (a run's directory), ``seedS-workload.yaml`` beside a stored
    ``seedS-runK-comparison.json``; None when there is none."""
    import re

    if cmp_path.name == "comparison.json":
        beside = cmp_path.parent / "workload.yaml"
    else:
        m = re.fullmatch(r"(seed\d+)-run\d+-comparison\.json", cmp_path.name)
        if not m:
            return None
        beside = cmp_path.parent / f"{m.group(1)}-workload.yaml"
    return beside if beside.is_file() else None


def _workload(cmp: dict, cmp_path: Path) -> tuple[list, str]:
    """The run's jobs and where they came from: its workload file, else drawn again."""
    from sluice_common.jobspec import load_jobs
    from topologies import load_topology

    stored = stored_workload(cmp_path)
    if stored is not None:
        return load_jobs(stored), str(stored)
    from end_to_end.demo_arms import workload
    from end_to_end.workload_draw import DrawSpec

    seed = cmp.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"no workload file and no seed to draw it from (seed {seed!r})")
    draw = dict(cmp["workload"]["draw"])
    draw["duration_s"] = tuple(draw["duration_s"])
    config = _config(cmp, "workload.yaml")
    jobs = workload(load_topology(config.topology), config, seed, DrawSpec(**draw)).jobs
    return jobs, (f"drawn again from seed {seed} by this code (no workload file beside "
                  f"{cmp_path.name})")


def simulated_avg_jct(run: DemoRun, arm, share: str = "senders") -> float:
    """The arm's average JCT (s) in the simulator on the run's workload, its uplinks split
    by ``share`` (module doc)."""
    from end_to_end.demo_arms import arm_config
    from end_to_end.run import simulator
    from topologies import load_topology

    config = arm_config(_config(run.comparison, "workload.yaml"), arm)
    sim = simulator(run.jobs, load_topology(config.topology), config, bandwidth="shared",
                    priority=config.rank if arm.priority else None, share=share)
    return sim.run().avg_jct


def measured_avg_jct(cmp: dict, key: str) -> tuple[float | None, str | None]:
    """The arm's measured average JCT, or why it cannot be compared."""
    arm = cmp["arms"].get(key)
    if not isinstance(arm, dict):
        return None, f"arm {key} is not in the run"
    finished, total = arm.get("finished"), arm.get("jobs_total")
    if finished != total or total is None:
        return arm.get("avg_jct_s"), (f"{finished} of {total} jobs finished (the measured "
                                      "average leaves the rest out)")
    return arm.get("avg_jct_s"), None


def _same_arm(recorded: dict, arm, rank: str) -> str | None:
    """Why the arm the run recorded is not the one simulated (None: it is)."""
    placement = arm.placement or "the policy's own"
    for field, want in (("policy", arm.policy), ("placement", placement),
                        ("priority", arm.priority), ("price_priority", arm.price_rule(rank))):
        if field in recorded and recorded[field] != want:
            return (f"the run's arm ran {field} {recorded[field]!r}; the arm is now "
                    f"{want!r}")
    return None


def compare_run(run: DemoRun, share: str = "senders") -> list[Comparison]:
    """One row per arm a-d of the run, its uplinks split by ``share`` (module doc)."""
    from end_to_end.arms import ARMS as DEFINED

    rows = []
    for key in ARMS:
        arm = DEFINED[key]
        if run.reason:
            rows.append(Comparison(run.label, key, None, None, BOUND_PCT, run.reason))
            continue
        cmp = run.comparison
        measured, why = measured_avg_jct(cmp, key)
        why = why or _same_arm(cmp["arms"][key], arm, cmp.get("rank_rule"))
        row = Comparison(run.label, key, measured, None, BOUND_PCT, why)
        if why is None:
            try:
                row = replace(row, simulated=simulated_avg_jct(run, arm, share))
            except (ValueError, KeyError, TypeError, RuntimeError) as err:
                row = replace(row, reason=f"the simulator could not run it ({err})")
        rows.append(row)
    return rows
