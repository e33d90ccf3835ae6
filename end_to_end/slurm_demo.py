"""``sluice demo --executor slurm``: the demo's jobs through the scheduler service and a
real local Slurm cluster on the same fabric.

    sluice demo --executor slurm [--out DIR]        # or: make demo-slurm

What it does, in order: validates like ``sluice demo``; takes the fabric lock; starts the
sluice controller, the fabric (two-rack-100g) and the Slurm cluster on it
(``end_to_end.slurm_env``: munged, slurmctld, one slurmd per Mininet host); starts
``sluice scheduler --executor slurm`` as its own process with the cluster's
``SLURM_CONF`` and the controller's URL; submits ``end_to_end/data/demo_jobs.yaml`` with
``sluice submit`` with the token of :data:`DEMO_USER` (``--users``: its jobs run and are
accounted as that Unix user, not root); waits until every job has ended; writes
``DIR/slurm.json``:

    {"jobs": {NAME: {"slurm_job_id": 7, "decided_hosts": ["h1", "h3"],
                     "ran_on": ["h1", "h3"], "state": "finished",
                     "user": "sluice-alice", "account": "physics", ...}},
     "bringup_s": 0.4, ...}

``user``/``account``: as Slurm's accounting recorded the job (``sacct``, slurmdbd).
``decided_hosts``: the hosts of the scheduler's decision (PS and workers); ``ran_on``: the
hosts the job's own PS and worker processes reported (each writes its hostname into
``RUN_DIR/ran_on/`` before it starts, ps_runtime.slurm_job). Everything (scheduler,
Slurm daemons and their jobs, controller, fabric) is stopped on the way out.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from end_to_end.controller_proc import stop_process, wait_healthy
from job_scheduler.service.executor_registry import SLURM
from ps_runtime.ports import free_port
from ps_runtime.slurm_plan import RAN_ON_DIR

TERMINAL = ("finished", "failed", "cancelled")
DEMO_USER = "sluice-alice"         # a Unix user `make slurm` creates: the demo's jobs are its


# ---- the report (pure, given the files) ------------------------------------------------------

def _unique(hosts: Iterable[str]) -> list[str]:
    return sorted(set(hosts))


def decided_hosts(job: dict[str, Any]) -> list[str]:
    placement = job.get("placement") or {}
    return _unique(list(placement.get("ps_hosts", [])) + list(placement.get("worker_hosts", [])))


def last_run_dir(run_root: Path, job_id: int) -> Path | None:
    """The run directory of the job's latest attempt (``job-<id>-attempt-<n>``)."""
    dirs = [p for p in Path(run_root).glob(f"job-{job_id}-attempt-*") if p.is_dir()]

    def attempt(p: Path) -> int:
        tail = p.name.rsplit("-", 1)[-1]
        return int(tail) if tail.isdigit() else -1

    return max(dirs, key=attempt) if dirs else None


def reported_processes(run_dir: Path | None) -> list[dict[str, Any]]:
    """What each PS/worker process wrote about itself: ``[{process, hostname, ip, ...}]``."""
    if run_dir is None:
        return []
    out = []
    for f in sorted((run_dir / RAN_ON_DIR).glob("*.json")):
        try:
            facts = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        out.append({"process": f.stem, **{k: facts.get(k) for k in
                                           ("hostname", "ip", "slurm_node", "role", "slurm_job_id")}})
    return out


def slurm_report(jobs: list[dict[str, Any]], run_root: Path, t0: float = 0.0,
                 accounted: dict[int, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """``slurm.json``: per job its Slurm job id, decided hosts, the hosts its processes
    reported, its state (and reason); ``gpu_records`` (``end_to_end.gpu_records``: the
    GPUs its worker steps recorded, times from ``t0``, the submission); ``extra``
    (bring-up time...) at the top level; ``accounted``: sacct's record per Slurm job id
    (the user and account Slurm charged)."""
    from end_to_end.gpu_records import slurm_gpu_records

    report: dict[str, Any] = {"jobs": {}, "gpu_records": slurm_gpu_records(
        jobs, {j["id"]: last_run_dir(run_root, j["id"]) for j in jobs}, t0)}
    for job in sorted(jobs, key=lambda j: j["id"]):
        processes = reported_processes(last_run_dir(run_root, job["id"]))
        acct = (accounted or {}).get(_int_or_none(job.get("external_id")))
        report["jobs"][job["name"]] = {
            # the scheduler's executor-neutral external id is the Slurm job id here
            "slurm_job_id": _int_or_none(job.get("external_id")),
            "decided_hosts": decided_hosts(job),
            "ran_on": _unique(p["hostname"] for p in processes if p.get("hostname")),
            "state": job["state"],
            "reason": job.get("reason"),
            "gpus": job.get("gpus"),
            "attempts": job.get("attempts"),
            "user": acct.user if acct else None,          # as Slurm recorded it (sacct)
            "account": acct.account if acct else None,
            "processes": processes,
        }
    report.update(extra)
    return report


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def report_markdown(report: dict[str, Any]) -> str:
    lines = ["| job | Slurm job | state | decided hosts | ran on | match |", "|---|---|---|---|---|---|"]
    for name, j in report["jobs"].items():
        match = "yes" if j["ran_on"] and j["ran_on"] == j["decided_hosts"] else "NO"
        lines.append(f"| {name} | {j['slurm_job_id']} | {j['state']} | {', '.join(j['decided_hosts'])} "
                     f"| {', '.join(j['ran_on'])} | {match} |")
    return "\n".join(lines)


# ---- before anything starts: the jobs' user reaches the output directory ---------------------

def can_enter(directory: Path, uid: int, gids: set[int]) -> bool:
    """Whether the user ``uid`` (groups ``gids``) may enter ``directory`` by its mode
    bits (the owner's bits for its owner, the group's for a member, else the others')."""
    st = directory.stat()
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in gids:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def blocked_directories(path: Path, uid: int, gids: set[int], opened: Iterable[Path] = ()
                        ) -> list[Path]:
    """The existing directories from ``/`` down to ``path`` that the user cannot enter,
    leaving out those the cluster's bring-up opens for it (``opened``, with every
    directory above each: mininet_fabric.traverse). Directories still to be made are
    made by root with mode 0755: enterable."""
    from mininet_fabric.traverse import closed_ancestors

    path = Path(path).absolute()
    chain = [p for p in [*reversed(path.parents), path] if p.is_dir()]
    made_open = {d for p in opened for d in closed_ancestors(p)}
    return [d for d in chain if d.resolve() not in made_open and not can_enter(d, uid, gids)]


def check_out_reachable(out: Path, user: str | None = None) -> None:
    """An option error on ``out`` naming each directory above ``out`` that the jobs'
    user (:data:`DEMO_USER`) cannot enter: its jobs write under ``out`` (the scheduler's
    run directories), and the scheduler would refuse to start (its ``users`` check)."""
    import grp
    import pwd

    from end_to_end.slurm_env import opened_for_users
    from mininet_fabric.lock import FabricError
    from sluice_common.errors import option_error

    user = user or DEMO_USER
    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        raise FabricError(f"no Unix user {user!r}, whom the demo's jobs run as: run "
                          "`make slurm` (it creates the cluster's users)")
    gids = {pw.pw_gid, *(g.gr_gid for g in grp.getgrall() if user in g.gr_mem)}
    blocked = blocked_directories(out, pw.pw_uid, gids, opened_for_users())
    if blocked:
        modes = ", ".join(f"{d} (mode {stat.S_IMODE(d.stat().st_mode):04o})" for d in blocked)
        raise option_error("out", f"user {user} cannot enter {modes}: the demo's jobs run "
                           f"as {user} and write under {out}, so every directory above it "
                           f"needs o+x: run `chmod o+x {' '.join(map(str, blocked))}` or "
                           "choose an output directory it can reach")


# ---- the run ---------------------------------------------------------------------------------

def _say(text: str) -> None:
    print(f"sluice demo: {text}", file=sys.stderr, flush=True)


def run_slurm_demo(config) -> int:
    from end_to_end.run import out_dir, validate
    from end_to_end.slurm_env import slurm_environment
    from job_scheduler.service.client import SchedulerClient
    from mininet_fabric.lock import FabricError, FabricLock
    from mininet_fabric.slurm_cluster import missing_binaries

    jobs, topology = validate(config)
    out = out_dir(config, "demo-slurm")
    check_out_reachable(out)
    if missing := missing_binaries():
        raise FabricError(f"Slurm is not installed (missing {', '.join(missing)}): run `make slurm`")
    out.mkdir(parents=True, exist_ok=True)
    db = out / "scheduler.db"
    run_root = Path(str(db) + ".slurm-runs")
    # A previous demo in the same directory: its store and run directories would mix in
    # (job ids start at 1 again).
    for stale in (db, Path(str(db) + ".lock"), out / "slurm.json", out / "slurm.md"):
        stale.unlink(missing_ok=True)
    for stale_dir in (run_root, out / "slurm-logs"):
        shutil.rmtree(stale_dir, ignore_errors=True)
    asked = time.monotonic()
    with FabricLock(f"sluice demo --executor slurm {out}"):
        started = time.monotonic()
        with slurm_environment(topology, out) as env:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            token = secrets.token_urlsafe(18)
            senv = {**os.environ, **env.cluster.env, "SLUICE_SCHEDULER_TOKEN": token,
                    "SLUICE_SCHEDULER_URL": url, "SLUICE_CONTROLLER_TOKEN": env.admin_token}
            users, user_token = _users_file(out)
            cmd = [sys.executable, "-m", "sluice", "scheduler", "--topology", config.topology,
                   "--policy", config.policy, "--listen", f"127.0.0.1:{port}", "--db", str(db),
                   "--slot", str(config.slot), "--executor", SLURM,
                   "--slurm-compute", config.compute, "--controller", env.controller_api,
                   "--slurm-poll-interval", "1", "--users", str(users)]
            if config.batches:
                cmd += ["--slurm-batches", str(config.batches)]
            if config.profile:
                cmd += ["--profile", str(config.profile)]
            _say(f"starting the scheduler service ({url}, --executor slurm)")
            log = open(out / "scheduler.log", "w")
            sched = subprocess.Popen(cmd, env=senv, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                client = SchedulerClient(url, token)
                wait_healthy(client, sched, out / "scheduler.log", 60.0, "the scheduler")
                submitted = time.time()
                sub = subprocess.run([sys.executable, "-m", "sluice", "submit", str(config.jobs),
                                      "--server", url], capture_output=True, text=True,
                                     env={**senv, "SLUICE_SCHEDULER_TOKEN": user_token},
                                     timeout=60)
                if sub.returncode != 0:
                    raise RuntimeError(f"sluice submit failed ({sub.returncode}): {sub.stderr.strip()}")
                _say(f"submitted {len(jobs)} jobs: {sub.stdout.strip()[:200]}")
                final, interrupted = _wait_jobs(client, sched, len(jobs), config.job_timeout)
                accounted = _accounted(env, final)
            finally:
                stop_process(sched, timeout=15)
                log.close()
            bringup = env.cluster.bringup_s
            timings = dict(env.timings)
        wall = time.monotonic() - started
    report = slurm_report(final, run_root, submitted, accounted, bringup_s=round(bringup, 2),
                          topology=topology.name,
                          compute=config.compute, wall_time_s=round(wall, 1),
                          fabric_lock_wait_s=round(started - asked, 1), **timings)
    (out / "slurm.json").write_text(json.dumps(report, indent=1))
    md = (f"# sluice demo --executor slurm: {topology.name}, {len(jobs)} jobs, policy "
          f"{config.policy}, {config.compute} compute\n\nSlurm bring-up {bringup:.1f} s, wall time "
          f"{wall:.0f} s\n\n{report_markdown(report)}\n")
    (out / "slurm.md").write_text(md)
    print(md)
    print(f"report: {out}/slurm.json")
    if interrupted:
        return 130
    ok = all(j["state"] == "finished" and j["ran_on"] == j["decided_hosts"]
             for j in report["jobs"].values())
    return 0 if ok and len(report["jobs"]) == len(jobs) else 1


def _users_file(out: Path) -> tuple[Path, str]:
    """``--users``: the demo's jobs are :data:`DEMO_USER`'s (a user ``make slurm`` makes)."""
    token = secrets.token_urlsafe(18)
    users = out / "users.yaml"
    users.write_text(f"users:\n  - {{name: {DEMO_USER}, token: {token}}}\n")
    users.chmod(0o600)
    return users, token


def _accounted(env, jobs: list[dict[str, Any]], timeout: float = 30.0) -> dict[int, Any]:
    """sacct's record of each job's Slurm job (its leader), once slurmdbd has them all."""
    from slurm_client import SlurmClient, SlurmError

    ids = {_int_or_none(j.get("external_id")) for j in jobs} - {None}
    client = SlurmClient(env.cluster.env)
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = {p.job_id: p for p in client.accounted(ids) if p.job_id == p.leader}
        except SlurmError as err:
            _say(f"sacct: {err}")
            found = {}
        if set(found) >= ids or time.monotonic() > deadline:
            return found
        time.sleep(1.0)


def _wait_jobs(client, proc: subprocess.Popen, count: int, timeout: float
               ) -> tuple[list[dict[str, Any]], bool]:
    deadline = time.monotonic() + timeout
    last = ""
    jobs: list[dict[str, Any]] = []
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the scheduler exited with {proc.returncode} mid-run")
            jobs = client.jobs()
            states = {}
            for j in jobs:
                states[j["state"]] = states.get(j["state"], 0) + 1
            line = ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
            if line != last:
                _say(line)
                last = line
            if len(jobs) >= count and all(j["state"] in TERMINAL for j in jobs):
                return jobs, False
            if time.monotonic() > deadline:
                _say(f"jobs not done after {timeout:.0f} s; reporting what ran")
                return jobs, False
            time.sleep(1.0)
    except KeyboardInterrupt:
        return jobs, True
