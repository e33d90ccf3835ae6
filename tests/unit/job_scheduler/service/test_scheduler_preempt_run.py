"""``sluice scheduler --policy sluice --executor local`` for real:
``sluice train`` jobs (MXNet ps-lite, emulated compute) on a two-GPU host; the policy
suspends the long job for a short one (a checkpoint, its GPU freed), resumes it, and
resizes it onto both GPUs once they are idle (suspended and started again in one slot: a
migration); every job finishes, every suspend's cost is in the store. The policy sees
any executor through the service alone (progress, suspend, start); the Slurm executor's
side of each step (a checkpointed stop that releases the allocation, a resume elsewhere,
a migration onto the freed GPU and one more) runs on a real Slurm cluster in
tests/fabric/slurm/test_slurm_preempt.py.

The order is made by events, not by how fast the machine is. The policy prices the jobs'
model sizes (support.preempt.JOBS: long1 ~300 s on one GPU, ~180 s on two; long2 ~246
s), from their measured progress where a job logs batches. long1 trains 80 real batches.
long2 holds its GPU and trains nothing: its command waits until the test opens a gate
(or the service asks it to suspend: it then ends, and a suspend that finds a job ended
counts it finished), so its picture is its modelled progress, most of its work left
throughout. The test submits short1 once long1 has logged a batch: long1, with the
most predicted work left (long2's is less for as long as long1 has done under 18 % of
its batches), is suspended for short1; when short1 ends, long2's predicted end is too far off
to wait for, so long1 resumes on the one free GPU; once it has trained a batch there the
test opens long2's gate, long2 ends, and long1, most of its work left, is resized onto
both GPUs."""

from __future__ import annotations

import sys
import time

import pytest
import yaml

from job_scheduler.service.client import SchedulerClient
from job_scheduler.service.store import JobStore
from support.scheduler_process import ServiceProcess, wait_for
from support.preempt import JOBS, SHORT, _batches

pytestmark = pytest.mark.slow

TWO_GPUS = """name: two-gpu
switches: [{name: t1, role: tor}]
racks: [{name: r1, tor: t1}]
hosts: [{name: h1, rack: r1, gpus: 2, bw: 10000}]
"""
# {resume_from} is empty on a first start; long2 holds its GPU until {gate} exists or a
# suspend is asked (module docstring)
COMMAND = ("if test {{name}} = long2; then "
           "until test -e {gate} -o -e {{checkpoint_dir}}/SUSPEND; do sleep 0.1; done; else "
           + sys.executable + " -m sluice train {jobs} --job {{name}} --workers {{gpus}} "
           "--servers 1 --compute emulated --batches $(test {{name}} = long1 && echo 80 || echo 1) "
           "--out {{run_dir}}/ps --quiet --suspendable --base-port $SLUICE_BASE_PORT "
           "$(test -n {{resume_from}} && echo --resume {{resume_from}}); fi")


def test_sluice_policy_suspends_resumes_and_migrates_real_jobs(tmp_path):
    (tmp_path / "two.yaml").write_text(TWO_GPUS)
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(yaml.safe_dump({"jobs": JOBS["jobs"] + SHORT["jobs"]}))
    gate = tmp_path / "long2-may-end"
    svc = ServiceProcess(tmp_path, "--slot", "1", "--executor", "local", "--policy", "sluice",
                         "--topology", str(tmp_path / "two.yaml"),
                         "--local-command", COMMAND.format(jobs=jobs, gate=gate))
    svc.start()
    try:
        client = SchedulerClient(svc.url, timeout=10)
        started = time.monotonic()
        client.submit(yaml.safe_dump(JOBS), "jobs.yaml")

        def listed() -> dict[str, dict]:
            jobs = {j["name"]: j for j in client.jobs()}
            assert not {"failed", "cancelled"} & {j["state"] for j in jobs.values()}, jobs
            return jobs

        def long1_trained() -> bool:
            long1 = listed().get("long1")
            return bool(long1) and any(_batches(d) >= 1 for d in
                                       tmp_path.glob(f"sched.db.runs/job-{long1['id']}-*"))

        def long1_restarted() -> bool:
            kinds = [e["kind"] for e in client.job(listed()["long1"]["id"])["events"]]
            assert "finished" not in kinds, kinds        # ended without the resume
            return "restarted" in kinds

        wait_for(long1_trained, timeout=300, interval=0.2)
        client.submit(yaml.safe_dump(SHORT), "short.yaml")
        # resumed on one GPU and trained a batch there ('restarted': its restart's cost)
        wait_for(long1_restarted, timeout=300, interval=0.3)
        gate.touch()
        wait_for(lambda: len(now := listed()) == 3
                 and all(j["state"] == "finished" for j in now.values()),
                 timeout=300, interval=0.5)
        wall = time.monotonic() - started
    finally:
        svc.stop()
    store = JobStore(svc.db)
    events = {j.name: store.events(j.id) for j in store.jobs()}
    records = {j.name: j for j in store.jobs()}
    kinds = {n: [k for _, k, _ in ev] for n, ev in events.items()}
    print(f"wall {wall:.0f} s")
    for name, ev in events.items():
        for at, kind, detail in ev:
            print(f"{name:7} {kind:10} {detail}")
    suspends = [d for ev in events.values() for _, k, d in ev if k == "suspended"]
    assert suspends, kinds
    assert all("suspend_s=" in d for d in suspends)           # each suspend's cost
    assert any("migrated" in k for k in kinds.values()), kinds
    # the order the events make: suspended for short1, resumed on one GPU, then resized
    long1 = [k for k in kinds["long1"] if k in ("suspended", "resumed", "migrated")]
    assert long1 == ["suspended", "resumed", "suspended", "migrated"], kinds
    assert records["long1"].gpus == 2 and "suspended" not in kinds["long2"], kinds
    resumed = [r for r in records.values() if r.resume]
    assert resumed and all(r.resume.get("checkpoint") for r in resumed)
    assert all(r.state == "finished" for r in records.values())
