"""Site policy on a real Slurm 22.05 cluster (the ``slurm_fabric`` fixture: the sluice
controller, the two-rack fabric, munged, slurmctld, one slurmd per Mininet host), set
the way an administrator sets it: slurm.conf lines and ``scontrol reconfigure``.

- A site that requires a time limit (``JobSubmitPlugins=require_timelimit``) and keeps
  partition limits (``EnforcePartLimits=ALL``, a partition with ``MaxTime=30``): without
  ``--slurm-time`` every job fails with Slurm's words; with it, jobs run with the site's
  account, time and partition, a job's ``slurm:`` block overrides them, and a job asking
  for a partition Slurm does not have or a time over the partition's limit fails with
  Slurm's message at submission while the others run on.
- A job Slurm keeps pending (its partition DOWN): ``sluice jobs`` shows Slurm's reason,
  and past ``--slurm-pending-timeout`` it is cancelled in Slurm and re-queued; once the
  partition is up it runs.
- The site's own history as the simulator's trace: jobs run with GPUs asked three ways,
  exported by ``sacct --json`` and ``sacct --parsable2``, are ``sluice simulate
  --trace-format sacct``'s jobs with their GPU counts; a CPU-only job, a job still
  waiting and one cancelled before it started are counted as left out.
- A typed-GPU node (h4: ``gpu:a100:4``): ``--slurm-gpu-type a100`` counts and requests
  only those GPUs.

The cluster runs slurmdbd on MariaDB with ``AccountingStorageEnforce=associations``
(mininet_fabric/slurm_accounting.py): an account or QOS the user has no association
with is refused by sbatch ("Invalid account or account/partition combination
specified", "Invalid qos specification"): that job fails with Slurm's words at
submission, the others run, and sacct records the finished ones with their account.
(Without slurmdbd an ``--account`` was recorded unchecked and ``--qos`` dropped.)
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from support.slurm_scheduler import Scheduler, run_dir, tiny

pytestmark = pytest.mark.fabric
SLURM_TOPOLOGY = "two-rack"          # 4 hosts x 4 GPUs, h1 h2 | h3 h4
SITE_LINES = ["JobSubmitPlugins=require_timelimit", "EnforcePartLimits=ALL",
              "PartitionName=short Nodes=ALL MaxTime=30 State=UP"]


def cli(env, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), env={**os.environ, **env.cluster.env},
                          capture_output=True, text=True, timeout=60)


def rewrite(path: Path, edit) -> None:
    """``path`` becomes ``edit(its text)`` in one step: a daemon reading it meanwhile (a
    slurmd still busy with the last reconfigure) never sees it empty."""
    new = path.with_name(path.name + ".new")
    new.write_text(edit(path.read_text()))
    os.replace(new, path)


def reconfigure(env, edit) -> None:
    """Rewrite slurm.conf with ``edit(text)``; slurmctld and every slurmd read it again."""
    rewrite(Path(env.cluster.env["SLURM_CONF"]), edit)
    r = cli(env, "scontrol", "reconfigure")
    assert r.returncode == 0, r.stderr
    env.cluster.wait_idle(env.cluster.hosts, 30)


def scontrol_job(env, slurm_id: int) -> dict[str, str]:
    text = cli(env, "scontrol", "show", "job", "-o", str(slurm_id)).stdout
    return dict(re.findall(r"(\w+)=(\S*)", text.splitlines()[0]))


@pytest.fixture
def site(slurm_fabric):
    reconfigure(slurm_fabric, lambda t: t + "\n".join(SITE_LINES) + "\n")
    yield slurm_fabric
    reconfigure(slurm_fabric, lambda t: "\n".join(
        line for line in t.splitlines() if line not in SITE_LINES) + "\n")


def test_a_site_requiring_a_time_limit(site, tmp_path):
    bare = Scheduler(site, tmp_path / "bare", batches=3)
    (tmp_path / "bare").mkdir()
    bare.start()
    try:
        bare.submit([tiny("notime", 1)])
        job = bare.wait(["notime"], states=("failed",), timeout=60)["notime"]
        assert "Time limit specification required" in job["reason"], job["reason"]
    finally:
        bare.stop()

    sched = Scheduler(site, tmp_path, batches=3)
    sched.args += ["--slurm-time", "10", "--slurm-account", "physics",
                   "--slurm-partition", "short"]
    sched.start()
    try:
        sched.submit([tiny("plain", 2), {**tiny("chem", 2), "slurm": {"account": "chem"}},
                      {**tiny("nopart", 1), "slurm": {"partition": "nosuch"}},
                      {**tiny("toolong", 1), "slurm": {"time": "2:00:00"}},
                      {**tiny("noacct", 1), "slurm": {"account": "nosuch"}},
                      {**tiny("noqos", 1), "slurm": {"qos": "nosuch"}}])
        failed = sched.wait(["nopart", "toolong", "noacct", "noqos"], states=("failed",),
                            timeout=90)
        assert "Invalid partition name specified" in failed["nopart"]["reason"]
        assert "Requested time limit is invalid" in failed["toolong"]["reason"]
        # slurmdbd enforces associations: an account (or QOS) the user may not use
        assert "Invalid account or account/partition combination specified" in \
            failed["noacct"]["reason"], failed["noacct"]["reason"]
        assert "Invalid qos specification" in failed["noqos"]["reason"], failed["noqos"]
        assert failed["noacct"]["external_id"] is None
        assert failed["nopart"]["external_id"] is None
        done = sched.wait(["plain", "chem"], timeout=180)
        for name, account in (("plain", "physics"), ("chem", "chem")):
            job = scontrol_job(site, int(done[name]["external_id"]))
            assert (job["Account"], job["TimeLimit"], job["Partition"]) == \
                (account, "00:10:00", "short"), job
        # sacct (slurmdbd) is the record of the finished jobs: account, user, exit code
        slurm_ids = [str(done[n]["external_id"]) for n in ("plain", "chem")]
        acct = accounted(site, slurm_ids)
        assert {(a["Account"], a["User"], a["State"], a["ExitCode"]) for a in acct.values()} \
            == {("physics", "root", "COMPLETED", "0:0"), ("chem", "root", "COMPLETED", "0:0")}
        assert sched.proc.poll() is None            # the service goes on
    finally:
        sched.stop()


def accounted(env, slurm_ids: list[str], timeout: float = 30) -> dict[str, dict[str, str]]:
    """sacct's records of these jobs (allocations), once slurmdbd has them all ended."""
    fields = ["JobID", "State", "ExitCode", "User", "Account"]
    deadline = time.monotonic() + timeout
    while True:
        out = cli(env, "sacct", "-n", "-P", "-X", "-a", "-j", ",".join(slurm_ids),
                  "-o", ",".join(fields)).stdout
        rows = {r[0]: dict(zip(fields, r)) for r in
                (line.split("|") for line in out.splitlines() if line.strip())}
        if all(i in rows and rows[i]["State"] not in ("RUNNING", "PENDING") for i in slurm_ids):
            return rows
        assert time.monotonic() < deadline, f"sacct has not recorded {slurm_ids}: {out}"
        time.sleep(0.5)


def wait_no_jobs(env, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        active = cli(env, "squeue", "-h", "-o", "%i %T %N %j").stdout.strip()
        if not active:
            return
        assert time.monotonic() < deadline, f"Slurm jobs still active: {active}"
        time.sleep(0.5)


def test_a_job_slurm_keeps_pending_is_requeued_with_slurms_reason(slurm_fabric, tmp_path):
    env = slurm_fabric
    r = cli(env, "scontrol", "create", "PartitionName=held", "Nodes=ALL", "State=DOWN")
    assert r.returncode == 0, r.stderr
    sched = Scheduler(env, tmp_path, batches=3)
    sched.args += ["--slurm-partition", "held", "--slurm-pending-timeout", "6"]
    sched.start()
    try:
        job_id = sched.submit([tiny("held", 2)])["held"]
        deadline = time.monotonic() + 60
        # Slurm's own pending reason, as the job's wait reason (code `slurm`)
        while not _slurm_says(sched.job(job_id).get("reason"), "PartitionDown"):
            assert time.monotonic() < deadline, sched.job(job_id)
            time.sleep(0.3)
        first = int(sched.job(job_id)["external_id"])
        while not any(e["kind"] == "requeued" for e in sched.job(job_id)["events"]):
            assert time.monotonic() < deadline, sched.job(job_id)
            time.sleep(0.3)
        job = sched.job(job_id)
        detail = [e["detail"] for e in job["events"] if e["kind"] == "requeued"][0]
        assert detail.startswith("pending in Slurm for ") and "(PartitionDown)" in detail
        assert f"Slurm job {first} cancelled" in detail
        assert scontrol_job(env, first)["JobState"] == "CANCELLED"
        assert job["attempts"] <= 1                 # waiting in Slurm is not an attempt
        r = cli(env, "scontrol", "update", "PartitionName=held", "State=UP")
        assert r.returncode == 0, r.stderr
        done = sched.wait(["held"], timeout=120)["held"]
        assert int(done["external_id"]) != first
    finally:
        sched.stop()
        cli(env, "scontrol", "delete", "PartitionName=held")


def _slurm_says(reason, why: str) -> bool:
    return (isinstance(reason, dict) and reason.get("code") == "slurm"
            and f"Slurm's reason: {why}" in reason.get("message", ""))


@pytest.fixture
def shared_dir():
    """A directory every user can enter (pytest's own tmp tree is root's, 0700): the
    store and run directories of a scheduler whose jobs run as other users."""
    path = Path(tempfile.mkdtemp(prefix="sluice-users-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_two_users_jobs_run_and_are_accounted_as_each(slurm_fabric, shared_dir):
    env = slurm_fabric
    tokens = {u: secrets.token_urlsafe(24) for u in ("sluice-alice", "sluice-bob")}
    users = shared_dir / "users.yaml"
    users.write_text(yaml.safe_dump({"users": [{"name": u, "token": t}
                                               for u, t in tokens.items()]}))
    users.chmod(0o600)
    sched = Scheduler(env, shared_dir, batches=3)
    sched.args += ["--users", str(users)]
    sched.start()
    try:
        for user, job in (("sluice-alice", "alice"), ("sluice-bob", "bob"), (None, "admin")):
            sched.environ["SLUICE_SCHEDULER_TOKEN"] = tokens.get(user, "")
            sched.submit([tiny(job, 1)])
        done = sched.wait(["alice", "bob", "admin"], timeout=180)
        assert {n: done[n]["user"] for n in done} == \
            {"alice": "sluice-alice", "bob": "sluice-bob", "admin": None}
        acct = accounted(env, [str(done[n]["external_id"]) for n in ("alice", "bob", "admin")])
        by_job = {n: acct[str(done[n]["external_id"])] for n in ("alice", "bob", "admin")}
        assert {n: (a["User"], a["Account"], a["State"]) for n, a in by_job.items()} == {
            "alice": ("sluice-alice", "physics", "COMPLETED"),
            "bob": ("sluice-bob", "chem", "COMPLETED"),
            "admin": ("root", "sluice", "COMPLETED")}
        assert run_dir(sched, done["alice"]).stat().st_uid == pwd.getpwnam("sluice-alice").pw_uid
        listing = subprocess.run([sys.executable, "-m", "sluice", "jobs", "--server", sched.url],
                                 capture_output=True, text=True, timeout=60).stdout
        assert re.search(r"alice\s+finished.*sluice-alice", listing), listing
    finally:
        sched.stop()


def test_a_purged_job_with_no_exit_file_is_not_run_twice(slurm_fabric, tmp_path):
    """The service is down while its job ends and Slurm purges it (MinJobAge=2 here),
    and the job's exit file is lost: sacct says how it ended; it is not run again."""
    env = slurm_fabric
    reconfigure(env, lambda t: t.replace("MinJobAge=300", "MinJobAge=2"))
    sched = Scheduler(env, tmp_path, batches=8, compute_s=0.3)
    try:
        sched.start()
        sched.submit([tiny("purged", 1)])
        job = sched.wait(["purged"], states=("running",), timeout=90,
                         ready=lambda j: j["external_id"] is not None)["purged"]
        sched.kill9()
        slurm_id = str(job["external_id"])
        deadline = time.monotonic() + 90
        while cli(env, "squeue", "-h", "-t", "all", "-j", slurm_id).stdout.strip():
            assert time.monotonic() < deadline, "Slurm did not purge the job"
            time.sleep(0.5)
        (run_dir(sched, job) / "exit_status").unlink()
        sched.start()
        done = sched.wait(["purged"], states=("finished",), timeout=60)["purged"]
        assert "sacct" in done["reason"] and done["attempts"] == 1, done
        time.sleep(3)                                # a re-run would have been sbatched
        runs = cli(env, "sacct", "-n", "-X", "-P", "-a", "-D", "-S", "now-1hour", "-o",
                   "JobID,JobName").stdout.splitlines()
        name = dict(line.split("|", 1) for line in runs)[slurm_id]
        prefix = name.rsplit("-attempt-", 1)[0] + "-attempt-"     # this sluice job's
        assert [r for r in runs if r.split("|", 1)[1].startswith(prefix)] == \
            [f"{slurm_id}|{name}"], runs
    finally:
        sched.stop()
        reconfigure(env, lambda t: t.replace("MinJobAge=2", "MinJobAge=300"))


def test_only_the_configured_partitions_nodes_are_capacity(slurm_fabric, tmp_path):
    """A partition of rack 2's nodes: the scheduler places the job there (h1 and h2 are
    not capacity), read from sinfo --json's partitions."""
    env = slurm_fabric
    r = cli(env, "scontrol", "create", "PartitionName=rack2", "Nodes=h3,h4", "State=UP")
    assert r.returncode == 0, r.stderr
    sched = Scheduler(env, tmp_path, batches=3)
    sched.args += ["--slurm-partition", "rack2"]
    try:
        sched.start()
        sched.submit([tiny("r2", 2)])
        job = sched.wait(["r2"], timeout=120)["r2"]
        hosts = {*job["placement"]["worker_hosts"], *job["placement"]["ps_hosts"]}
        assert hosts <= {"h3", "h4"}, job["placement"]
        assert scontrol_job(env, job["external_id"])["Partition"] == "rack2"
    finally:
        sched.stop()
        cli(env, "scontrol", "delete", "PartitionName=rack2")


# name -> (sbatch's GPU request, the GPUs it allocates): each way a site's users ask
SACCT_GPU_JOBS = {"trace-two": (["--gpus=2"], 2), "trace-one": (["--gres=gpu:1"], 1),
                  "trace-four": (["--nodes=1", "--gpus-per-node=4"], 4)}


def sbatch(env, *argv: str) -> str:
    r = cli(env, "sbatch", "--parsable", "-o", "/dev/null", "--chdir", "/tmp", *argv)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().split(";")[0]


def test_the_sites_sacct_history_is_a_trace_for_the_simulator(slurm_fabric, tmp_path):
    """Jobs run on the cluster (GPUs asked three ways, one CPU-only), one waits (begins
    in an hour), one is cancelled before it starts; slurmdbd's record, exported by
    ``sacct --json`` and by ``sacct --parsable2``, is the workload of ``sluice simulate
    --trace-format sacct``: the jobs that ran with GPUs, each with its GPUs, and the
    others counted by why they were left out."""
    from job_scheduler.simulation.sacct_trace import PARSABLE_FORMAT

    env = slurm_fabric
    version = cli(env, "sacct", "--version").stdout.strip()
    assert re.search(r"\b22\.05\.", version), version    # --json: 22.05's data parser
    wait_no_jobs(env)
    gpus = {sbatch(env, "-J", name, *ask, "--wrap", "sleep 3"): n
            for name, (ask, n) in SACCT_GPU_JOBS.items()}
    cpu = sbatch(env, "-J", "trace-cpu", "--wrap", "sleep 2")
    later = sbatch(env, "-J", "trace-later", "--gpus=1", "--begin=now+1hour", "--wrap", "true")
    held = sbatch(env, "-J", "trace-held", "--hold", "--gpus=1", "--wrap", "true")
    assert cli(env, "scancel", held).returncode == 0
    ids = [*gpus, cpu, later, held]
    try:
        acct = accounted(env, [*gpus, cpu], timeout=90)
        assert {a["State"] for a in acct.values()} == {"COMPLETED"}, acct
        deadline = time.monotonic() + 30               # slurmdbd has the other two as well
        while True:
            states = dict(line.split("|", 1) for line in cli(
                env, "sacct", "-n", "-P", "-X", "-a", "-j", ",".join(ids), "-o",
                "JobID,State").stdout.splitlines() if line.strip())
            if states.get(later) == "PENDING" and states.get(held, "").startswith("CANCELLED"):
                break
            assert time.monotonic() < deadline, states
            time.sleep(0.5)
        as_json = cli(env, "sacct", "--json", "-a", "-j", ",".join(ids))
        as_text = cli(env, "sacct", "--parsable2", "-a", "-j", ",".join(ids),
                      f"--format={PARSABLE_FORMAT}")
    finally:
        cli(env, "scancel", later)
    assert as_json.returncode == 0 and as_text.returncode == 0, as_json.stderr + as_text.stderr
    exports = {"sacct.json": as_json.stdout, "sacct.txt": as_text.stdout}
    runs = {}
    for name, text in exports.items():
        (tmp_path / name).write_text(text)
        r = subprocess.run([sys.executable, "-m", "sluice", "simulate", "--workload",
                            str(tmp_path / name), "--trace-format", "sacct",
                            "--policies", "fifo", "--json"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"{name}: {r.stderr}\n{text[:3000]}"
        runs[name] = out = json.loads(r.stdout)
        done = out["policies"]["fifo"]["job_results"]
        assert sorted((j["name"], j["gpus"]) for j in done) == \
            sorted((f"sacct-{i}", n) for i, n in gpus.items()), (name, done)
        assert out["trace"]["kept"] == len(SACCT_GPU_JOBS)
        assert out["trace"]["left_out"] == {"never_started": 2, "no_gpus": 1}, (name, out)
        assert out["assumptions"] == {"default (Philly rule: GPU-time)": len(SACCT_GPU_JOBS)}
    assert runs["sacct.txt"]["trace"]["steps_skipped"] >= len(SACCT_GPU_JOBS)   # .batch lines
    # and what sluice would have bought this cluster: the four arms on its own history
    r = subprocess.run([sys.executable, "-m", "sluice", "whatif", "--trace",
                        str(tmp_path / "sacct.json"), "--trace-format", "sacct", "--topology",
                        "two-rack", "--load", "recorded", "--json", "--workers", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    whatif = json.loads(r.stdout)
    assert whatif["jobs"] == len(SACCT_GPU_JOBS) and set(whatif["arms"]) == set("abcd")
    assert whatif["trace_export"]["left_out"] == {"never_started": 2, "no_gpus": 1}
    assert all(a["avg_jct_s"] > 0 for a in whatif["arms"].values()), whatif["arms"]
    # both exports are one history: the same jobs, arrivals and durations
    from job_scheduler.simulation.workloads import load_workload
    a, b = (load_workload(tmp_path / n, trace_format="sacct") for n in exports)
    assert [(j.name, j.trace_gpus, j.arrival, j.trace_duration) for j in a] == \
        [(j.name, j.trace_gpus, j.arrival, j.trace_duration) for j in b]
    assert all(2.0 <= j.trace_duration <= 10.0 for j in a), a         # sleep 3


def make_h4_a100(env) -> None:
    """h4's four GPUs become ``gpu:a100:4`` (slurm.conf and gres.conf); GRES types are
    read at start, so slurmctld and h4's slurmd restart (slurmctld keeps its state)."""
    wait_no_jobs(env)
    conf = Path(env.cluster.env["SLURM_CONF"])
    rewrite(conf, lambda t: re.sub(r"^(NodeName=h4 .*)Gres=gpu:(\d+)", r"\1Gres=gpu:a100:\2",
                                   t, flags=re.M))
    rewrite(conf.with_name("gres.conf"), lambda t: re.sub(
        r"^(NodeName=h4 Name=gpu) ", r"\1 Type=a100 ", t, flags=re.M))
    env.cluster.wait_idle(env.cluster.hosts, 60)
    env.cluster.kill_slurmd("h4")
    # a graceful stop first (a kill -9 just after a job ended can leave the job's
    # allocation in the saved state, its node 'mixed' for minutes)
    assert cli(env, "scontrol", "shutdown", "slurmctld").returncode == 0
    deadline = time.monotonic() + 30
    while cli(env, "scontrol", "ping").returncode == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    env.cluster.kill_slurmctld()                 # its helpers, if any are left
    # no job is active (wait_no_jobs above), so nothing is lost by a cold start; a warm
    # one (-R) brought back a finished job's allocation in CI once, h1 'mixed' past 60 s
    env.cluster.start_slurmctld(clear_state=True)
    env.cluster.start_slurmd("h4")
    env.cluster.wait_idle(env.cluster.hosts, 60)


def test_a_typed_gpu_node(slurm_fabric, tmp_path):
    make_h4_a100(slurm_fabric)
    nodes = cli(slurm_fabric, "sinfo", "-N", "-h", "-o", "%N %G").stdout
    assert re.search(r"^h4 gpu:a100:4", nodes, re.M), nodes
    sched = Scheduler(slurm_fabric, tmp_path, batches=3)
    sched.args += ["--slurm-gpu-type", "a100"]
    sched.start()
    try:
        sched.submit([tiny("typed", 3)])
        job = sched.wait(["typed"], timeout=180)["typed"]
        assert set(job["placement"]["worker_hosts"]) == {"h4"}, job["placement"]
        detail = scontrol_job(slurm_fabric, int(job["external_id"]))
        parts = cli(slurm_fabric, "scontrol", "show", "job", "-o",
                    job["external_id"]).stdout
        assert "gres:gpu:a100:3" in parts, parts
        assert detail["JobState"] == "COMPLETED"
        assert (run_dir(sched, job) / "plan.json").exists()
    finally:
        sched.stop()
