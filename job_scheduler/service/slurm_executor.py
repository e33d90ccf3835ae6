"""``--executor slurm``: every job the policy starts is ONE Slurm job on the decided hosts.

Submission: a heterogeneous ``sbatch`` job with one component per host of the decision
(``--nodelist=<host> --gres=gpu:<k>``, k = the workers the decision put there; the first
PS host's component first, since the batch script and the ps-lite scheduler run there).
Slurm 22.05 excludes each component's nodes from the other components, so one component
per distinct host is the only shape that works (measured: a node named in two components
is rejected with "Invalid node name specified"). The batch script runs
``python -m ps_runtime.slurm_job RUN_DIR/plan.json``: the PS launcher of ``sluice train``
with every process an ``srun --het-group`` step on its host (see that module). The job's
environment (sbatch's --export=ALL) carries the controller URL and the job's progress
token, never an admin token; nothing secret is written to the run directory.

Two-phase and restart-safe like :class:`~job_scheduler.service.executors.LocalExecutor`:
``plan`` returns the run directory, which also names the Slurm job
(``sluice-<store tag>-job-<id>-attempt-<n>``), recorded before anything is submitted; ``launch`` submits and returns the Slurm job id,
recorded right after. A service killed in between finds its job again by that name
(``squeue --name``) or by ``RUN_DIR/batch.started`` (written by the batch script with
Slurm's job id); only when neither exists after a grace period is the job re-queued
(never started twice). State comes from Slurm (``squeue -t all``, then ``scontrol show
job`` for the exit code and reason), never from srun's exit code; a job Slurm no longer
remembers (``MinJobAge``) is judged by the exit status the batch script wrote.
``--no-requeue``: Slurm does not requeue a job by itself; the service's ``--max-retries``
does (a new attempt, a new decision, on nodes that are up).

Every component carries the site's policy (``SlurmJobOptions.site``: account, QOS, time,
GPU type, ...; a job's ``slurm:`` block overrides it). A job Slurm keeps PENDING shows
Slurm's reason and, past ``pending_timeout``, is cancelled and re-queued; a Slurm error
for one job stays that job's (:meth:`SlurmExecutor._poll_error`).

Suspend: the checkpoint, then ``scancel`` (``slurm_suspend``); a resume is a new submission
from the checkpoint. ``--signal=B:USR1@N``: Slurm's warning is the same stop, re-queued.

Capacity (:meth:`SlurmExecutor.capacity`): before each decision the GPUs Slurm says are
allocated on each node, less those of sluice's own jobs Slurm is running, are taken
away, and a node that is down, drained, failed, not responding or unknown to Slurm has
no free GPU at all: jobs started outside sluice are seen, their GPUs never double-booked.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from job_scheduler.core.estimator import batches_for
from job_scheduler.service.executors import ADMIN_TOKEN_ENVS, Outcome
from job_scheduler.service.slurm_names import slurm_job_name
from job_scheduler.service.slurm_capacity import apply_capacity, resume_duplicate_drains
from job_scheduler.service.slurm_poll import PollRounds, accounted_end
from job_scheduler.service.slurm_ports import PortBook
from job_scheduler.service.slurm_topology import check_topology
from job_scheduler.service.run_files import (error_text as _error_text, mtime as _mtime,
                                             read_exit as _read_exit, read_json as _read_json)
from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.core.decisions import StartDecision
from job_scheduler.service.slurm_gpus import apply_gres_truth, read_truth
from job_scheduler.service import slurm_suspend
from job_scheduler.service.slurm_suspend import resumed_batches, suspended_at
from job_scheduler.service.slurm_identity import check_users, submit_as
from job_scheduler.service.store import JobRecord
from slurm_client import (Component, JobInfo, NodeInfo, ParseError, SiteOptions, SlurmClient,
                          SlurmError, SlurmUnavailable, Submission, job_outcome)
from ps_runtime.slurm_plan import ERROR_FILE, EXIT_FILE, STARTED_FILE, SlurmPlan
from sluice_common.errors import InputError
from sluice_common.jobspec import job_to_dict
from topologies import Topology

log = logging.getLogger("sluice.scheduler.slurm")

REPO_ROOT = Path(__file__).resolve().parents[2]
PENDING_NOTE = "pending in Slurm"    # a running job's reason while Slurm keeps it pending


# ---- pure pieces -----------------------------------------------------------------------

def components(decision_ps: Sequence[str], decision_workers: Sequence[str]
               ) -> list[Component]:
    """One heterogeneous-job component per distinct host: the first PS host first, then
    the other hosts in the order the decision names them; GPUs = the workers there."""
    order: list[str] = []
    for h in [*decision_ps[:1], *decision_workers, *decision_ps[1:]]:
        if h not in order:
            order.append(h)
    gpus = {h: 0 for h in order}
    for h in decision_workers:
        gpus[h] += 1
    return [Component(h, gpus[h], max(1, gpus[h])) for h in order]   # a CPU per worker step


@dataclass(frozen=True)
class SlurmJobOptions:
    """How the jobs' processes train (the job file says what; this says how)."""
    compute: str = "auto"                 # ps_runtime.compute: torch, emulated, auto
    batches: int | None = None            # per worker; None: dataset*epochs/(batch*workers)
    compute_s: float | None = None        # emulated: seconds per batch
    bytes_per_batch: int | None = None    # emulated: wire bytes per batch
    bw_scale: float = 1.0                 # emulated: the fabric's emulation.bw_scale
    profile: str | None = None
    partition: str | None = None
    timeout: float = 3600.0
    site: SiteOptions = SiteOptions()     # account, QOS, time, GPU type ... (site policy)
    pending_timeout: float = 600.0        # s a job may wait PENDING in Slurm (0: for ever)
    poll_interval: float = 0.0            # s between batched looks at Slurm (0: every slot)
    users: tuple[str, ...] = ()           # Unix users jobs run as (--users): checked at start
    fabric_addresses: Mapping[str, str] | None = None   # node -> data-fabric address
    signal_s: int | None = 120            # sbatch --signal=B:USR1@N (None: no warning)
    suspend_timeout: float = 300.0        # s for a suspended job's checkpoint

    def job_site(self, job: JobRecord) -> SiteOptions:
        """The site policy with this job's own ``slurm:`` settings in place."""
        site = self.site if self.site.partition or not self.partition else \
            dataclasses.replace(self.site, partition=self.partition)
        return site.overridden(dict(job.spec.slurm))


def _recorded_id(job: JobRecord) -> int | None:
    """The Slurm job id in the job's record (the store's executor-neutral external id)."""
    return None if job.external_id is None else int(job.external_id)


# ---- the executor ----------------------------------------------------------------------

class SlurmExecutor:
    kind = "slurm"

    def __init__(self, client: SlurmClient, topology: Topology, run_root: str | Path,
                 options: SlurmJobOptions = SlurmJobOptions(), *, python: str = sys.executable,
                 launch_grace: float = 15.0, resume_duplicate_drains: bool = True,
                 tag: str = "", lost_grace: float = 30.0, error_grace: float = 300.0):
        self.client = client
        self.topology = topology
        self.run_root = Path(run_root)
        self.options = options
        self.python = python
        self.launch_grace = launch_grace
        self.resume_duplicate_drains = resume_duplicate_drains
        self.tag = tag
        self._pending: dict[int, StartDecision] = {}
        self._ids: dict[int, int] = {}            # sluice job id -> Slurm id (adopted)
        self._seen: dict[int, list[JobInfo]] = {}   # Slurm id -> its parts, last poll
        self._gres: dict = {}        # sluice job id -> (Slurm job id, the GPUs Slurm gave it)
        self._warned_unavailable = 0.0
        self._unknown_since: dict[int, float] = {}   # sluice job id -> first seen unknown
        self.lost_grace = lost_grace
        self.error_grace = error_grace
        self._erring_since: dict[int, float] = {}    # sluice job id -> first Slurm error
        self.ports = PortBook()
        self._pending_since: dict[int, float] = {}   # sluice job id -> first seen PENDING
        self._notes: dict[int, str | None] = {}      # sluice job id -> reason to show
        self.last_capacity: dict[str, str] = {}
        self.rounds = PollRounds(client, options.poll_interval)
        self._nodes_seen: tuple[list[NodeInfo], dict] | None = None   # capacity's last read

    # ---- start-up ----------------------------------------------------------------------
    def check(self) -> list[NodeInfo]:
        """At service start: Slurm's release is one sluice reads (UnsupportedSlurm),
        Slurm answers, and knows every host of the topology at its address.
        SlurmUnavailable / InputError (exit 2) otherwise."""
        self.client.version()
        self.client.ping()
        nodes = self.client.nodes()
        problems = check_topology(self.topology, nodes, self.options.fabric_addresses)
        if problems:
            raise InputError(self.topology.source, "; ".join(problems), field="hosts")
        self.run_root.mkdir(parents=True, exist_ok=True)
        check_users(self.options.users, REPO_ROOT, Path(self.python), self.run_root)
        return nodes

    # ---- start -------------------------------------------------------------------------
    def plan(self, job: JobRecord, decision: StartDecision, now: float) -> dict:
        attempt = job.attempts + 1
        suspends = (job.resume or {}).get("suspends", 0)   # a resume: a directory of its own
        run_dir = self.run_root / (f"job-{job.id}-attempt-{attempt}"
                                   + (f"-resume-{suspends}" if suspends else ""))
        k = 1
        while run_dir.exists():    # a start Slurm lost does not count as an attempt
            k += 1
            run_dir = self.run_root / f"job-{job.id}-attempt-{attempt}.{k}"
        self._pending[job.id] = decision
        return {"executor": self.kind, "started_at": now, "run_dir": str(run_dir)}

    def port_block(self, job: JobRecord) -> int:
        """The PS port block the job's launch will use (reserved now; the launch, right
        after, reserves the same), for the controller's registration."""
        decision = self._pending[job.id]
        return self.ports.reserve(job.id, job.name,
                                  {*decision.ps_hosts, *decision.worker_hosts})

    def held_port_block(self, job: JobRecord) -> int | None:
        """The block a running job holds (learned from its plan.json after a restart)."""
        return self.ports.block_of(job.id)

    def launch(self, job: JobRecord, extra_env: Mapping[str, str] | None = None) -> dict:
        import yaml

        decision = self._pending.pop(job.id)
        run_dir = Path(job.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        hosts = self.topology.host_by_name
        parts = components(decision.ps_hosts, decision.worker_hosts)
        o = self.options
        plan = SlurmPlan(
            run_dir=str(run_dir), job=job.name,
            job_yaml=yaml.safe_dump({"jobs": [job_to_dict(job.spec)]}),
            servers=tuple((h, hosts[h].ip) for h in decision.ps_hosts),
            workers=tuple((h, hosts[h].ip) for h in decision.worker_hosts),
            groups={c.node: k for k, c in enumerate(parts)},
            batches=resumed_batches(job, len(decision.worker_hosts))
            or batches_for(job.spec, len(decision.worker_hosts), o.batches),
            resume_from=(job.resume or {}).get("checkpoint"),
            compute=o.compute, compute_s=o.compute_s, bytes_per_batch=o.bytes_per_batch,
            bw_scale=o.bw_scale, profile=o.profile, timeout=o.timeout,
            decided_hosts=tuple(sorted({*decision.ps_hosts, *decision.worker_hosts})),
            # a port block no other running job holds on these hosts (ps_runtime.plan)
            base_port=self.ports.reserve(job.id, job.name,
                                         {*decision.ps_hosts, *decision.worker_hosts}))
        plan_path = plan.write(run_dir)
        script = run_dir / "job.sh"
        script.write_text("#!/bin/sh\n# sluice job %d (%s), attempt %d: one component per host\n"
                          "cd %s\nexec %s -m ps_runtime.slurm_job %s\n"
                          % (job.id, job.name, job.attempts, shlex.quote(str(REPO_ROOT)),
                             shlex.quote(self.python), shlex.quote(str(plan_path))))
        script.chmod(0o755)
        env = dict(SLUICE_JOB_ID=str(job.id), SLUICE_JOB_NAME=job.name,
                   SLUICE_RUN_DIR=str(run_dir),
                   PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                            os.environ.get("PYTHONPATH")])),
                   **(extra_env or {}))
        # runs, and is accounted, as the user who submitted it (None: the service's)
        flags, who = submit_as(job.user, run_dir) if job.user else ((), {})
        env.update(who)
        sub = Submission(name=slurm_job_name(job, tag=self.tag), components=tuple(parts),
                         script=str(script), output=str(run_dir / "slurm-%j.out"),
                         site=o.job_site(job),
                         extra=(*flags, *((f"--signal=B:USR1@{o.signal_s}",) if o.signal_s
                                          else ())))
        # an sbatch rejection raises SlurmCommandError with Slurm's words: the service
        # marks the job failed with them ("launch failed: ...")
        slurm_id = self.client.submit(sub, env=env, unset=ADMIN_TOKEN_ENVS)
        self._ids[job.id] = slurm_id
        log.info("job %d (%s): Slurm job %d on %s", job.id, job.name, slurm_id,
                 ", ".join(f"{c.node}:{c.gpus}" for c in parts))
        return {"external_id": str(slurm_id)}

    # ---- poll --------------------------------------------------------------------------
    def _slurm_id(self, job: JobRecord) -> int | None:
        if job.external_id is not None:
            return int(job.external_id)
        if job.id in self._ids:
            return self._ids[job.id]
        if (started := self._started_id(job)) is not None:
            self._ids[job.id] = started
            return started
        # The service died between sbatch and recording the id: find it by name.
        name = slurm_job_name(job, tag=self.tag)
        found = sorted({p.leader for p in self.client.jobs(name=name)})
        if found:
            if len(found) > 1:
                log.error("job %d: %d Slurm jobs named %s: %s; following the first, "
                          "cancelling the others", job.id, len(found), name, found)
                for extra in found[1:]:
                    self.client.cancel(extra)
            self._ids[job.id] = found[0]
            log.warning("job %d: adopted Slurm job %d by its name %s", job.id, found[0], name)
            return found[0]
        return None

    def poll(self, job: JobRecord, now: float) -> Outcome | None:
        if self.rounds.active and not self.rounds.fresh:
            return None                 # between polls: taken as still running, no command
        try:
            outcome = self._poll(job, now)
            self._erring_since.pop(job.id, None)
            return outcome
        except SlurmUnavailable as err:
            if now - self._warned_unavailable > 30:
                log.warning("Slurm unreachable (%s): job %d taken as still running", err, job.id)
                self._warned_unavailable = now
            return None
        except (SlurmError, ParseError) as err:
            return self._poll_error(job, now, err)

    def _poll_error(self, job: JobRecord, now: float, err: Exception) -> Outcome | None:
        """A Slurm command failing for this one job (an answer Slurm gave, or output
        sluice cannot read) stays this job's: it is taken as still running, and after
        ``error_grace`` seconds of nothing but errors it is cancelled in Slurm and
        failed with the error. The slot's other jobs and decisions go on."""
        first = self._erring_since.setdefault(job.id, now)
        log.warning("job %d (%s): Slurm error %s (for %.0f s; taken as still running)",
                    job.id, job.name, err, now - first)
        if now - first < self.error_grace:
            return None
        self._erring_since.pop(job.id, None)
        slurm_id = _recorded_id(job) or self._ids.get(job.id)
        if slurm_id is not None:
            self._cancel(slurm_id)
        return Outcome("failed", now, None, f"Slurm errors for {now - first:.0f} s: {err}")

    def _poll(self, job: JobRecord, now: float) -> Outcome | None:
        run_dir = Path(job.run_dir or "/nonexistent")
        slurm_id = self._slurm_id(job)
        if slurm_id is None:
            if job.started_at is not None and now - job.started_at < self.launch_grace:
                return None     # sbatch may still be on its way
            return Outcome("failed", now, None, "never submitted to Slurm (service stopped "
                           "while submitting)", never_started=True)
        parts = self.rounds.parts(slurm_id)
        if parts is None:                 # not in this poll's batch (or no batching)
            parts = [p for p in self.client.jobs([slurm_id]) if p.leader == slurm_id]
        self._seen[slurm_id] = parts
        code = _read_exit(run_dir)
        if code == 0 and (stopped := suspended_at(run_dir)) is not None:
            self._cancel(slurm_id)  # Slurm's USR1: checkpointed, release it, resume later
            return Outcome("suspended", _mtime(run_dir / EXIT_FILE, now), 0,
                           "suspended by Slurm's signal", resume=stopped)
        if code == 0:
            # The batch script saw every worker do its last batch. (Slurm may disagree
            # only after a slurmctld restart that re-ran the job: "Duplicate jobid".)
            if parts and job_outcome(parts)[0] in ("active", "failing"):
                if any(p.state == "PENDING" for p in parts):
                    self._cancel(slurm_id)     # a re-run of a job that already ended
                return None                # let Slurm finish its own bookkeeping first
            self._unknown_since.pop(job.id, None)
            return Outcome("finished", _mtime(run_dir / EXIT_FILE, now), 0, None)
        if not parts and (ended := self._accounted_end(job, slurm_id, code, now)):
            return ended
        if not parts:
            # Slurm does not know the job: purged after MinJobAge, or lost by a slurmctld
            # killed before it saved the job (its srun steps then fail: "Unable to confirm
            # allocation ... Invalid job id"). Its processes may still run (slurmd kills
            # orphans when it re-registers): give the batch script time to say how it
            # ended; then the job goes back to the queue (Slurm's loss, not the job's).
            first = self._unknown_since.setdefault(job.id, now)
            if code is None and now - first < self.lost_grace:
                return None
            self._unknown_since.pop(job.id, None)
            ended = "" if code is None else f"; {_error_text(run_dir, code)}"
            return Outcome("failed", now, code, f"Slurm job {slurm_id} was lost by Slurm "
                           f"(unknown to slurmctld){ended}: re-queued", never_started=True)
        self._unknown_since.pop(job.id, None)
        verdict, words = job_outcome(parts)
        if verdict == "active":
            return self._pending_check(job, slurm_id, parts, now)
        if verdict == "failing":          # a part failed, others still winding down
            self._cancel(slurm_id)
            return None
        detail = self._details(slurm_id)
        if verdict == "completed" and code is None:
            if not (run_dir / STARTED_FILE).exists():
                return Outcome("failed", now, None, f"Slurm job {slurm_id} COMPLETED but "
                               "its batch script never ran")
            return None                    # the batch script is writing its result
        reason = f"Slurm job {slurm_id} {detail or words}"
        if code not in (None, 0) or (run_dir / ERROR_FILE).exists():
            reason += f"; {_error_text(run_dir, code)}"
        return Outcome("failed", now, code, reason)

    def prepare_poll(self, running: Sequence[JobRecord], now: float) -> None:
        """Before a slot's polls (the service calls it): when a poll is due, ONE squeue
        for every running job, ONE sacct for those it lacks (:mod:`.slurm_poll`)."""
        ids = set()
        for job in running:
            if job.executor == self.kind:
                known = _recorded_id(job) or self._ids.get(job.id) or self._started_id(job)
                if known is not None:
                    ids.add(known)
        self.rounds.begin(ids, now)

    def _started_id(self, job: JobRecord) -> int | None:
        started = _read_json(Path(job.run_dir or "/nonexistent") / STARTED_FILE)
        text = str((started or {}).get("slurm_job_id") or "")
        return int(text) if text.isdigit() else None

    def _accounted_end(self, job: JobRecord, slurm_id: int, code: int | None,
                       now: float) -> Outcome | None:
        """A job slurmctld forgot, judged by sacct (:func:`accounted_end`)."""
        acct = self.rounds.accounted(slurm_id)
        if acct is None and self.rounds.accounting:
            try:
                acct = [p for p in self.client.accounted([slurm_id]) if p.leader == slurm_id]
            except SlurmError as err:
                log.info("sacct for Slurm job %d: %s", slurm_id, err)
                acct = []
        ended = accounted_end(acct or [], slurm_id, code, Path(job.run_dir or "/"), now)
        if ended is not None:
            self._unknown_since.pop(job.id, None)
        return ended

    def _pending_check(self, job: JobRecord, slurm_id: int, parts: Sequence[JobInfo],
                       now: float) -> Outcome | None:
        """A job Slurm keeps PENDING shows Slurm's reason (``sluice jobs``: "pending in
        Slurm (Resources)"); after ``pending_timeout`` it is cancelled in Slurm and goes
        back to sluice's queue (not an attempt: the job never ran), the reason kept."""
        pending = [p for p in parts if p.state == "PENDING"]
        if not pending:
            self._pending_since.pop(job.id, None)
            self._notes[job.id] = None
            return None
        first = self._pending_since.setdefault(job.id, now)
        why = ", ".join(sorted({p.reason for p in pending
                                if p.reason and p.reason != "None"})) or "no reason given"
        timeout = self.options.pending_timeout
        if not timeout or now - first < timeout:
            self._notes[job.id] = f"{PENDING_NOTE} ({why})"
            return None
        self._pending_since.pop(job.id, None)
        self._cancel(slurm_id)
        text = (f"{PENDING_NOTE} for {now - first:.0f} s ({why}): Slurm job {slurm_id} "
                "cancelled, the job re-queued")
        self._notes[job.id] = text
        return Outcome("failed", now, None, text, never_started=True)

    def _details(self, slurm_id: int) -> str:
        try:
            parts = self.client.job(slurm_id)
        except SlurmError:
            return ""
        return job_outcome(parts)[1] if parts else ""

    def _cancel(self, slurm_id: int) -> None:
        try:
            self.client.cancel(slurm_id)
        except SlurmError as err:
            log.warning("scancel %d: %s", slurm_id, err)

    def learned(self, job: JobRecord) -> dict:
        """What the last poll learned for the job's record: the Slurm job id
        ``_slurm_id`` found (batch.started, or by name) for a job whose record has none
        (the service was killed between sbatch and recording it); Slurm's pending reason
        (and none once the job runs)."""
        out = {}
        if job.external_id is None and job.id in self._ids:
            out["external_id"] = str(self._ids[job.id])
        note = self._notes.pop(job.id, None)
        if note != job.reason and (note or (job.reason or "").startswith(PENDING_NOTE)):
            out["reason"] = note
        # Slurm's GPU indices of the job's *current* Slurm job: old ones over a resumed
        # job's record (new Slurm job, other GPUs) made every later slot fail
        slurm_id, truth = self._gres.get(job.id, (None, None))
        if truth is not None and slurm_id == (_recorded_id(job) or self._ids.get(job.id)) \
                and (job.placement or {}).get("gpu_ids") != truth.as_dict():
            out["placement"] = {**job.placement, "gpu_ids": truth.as_dict()}
        return out

    def stop(self, job: JobRecord) -> None:
        slurm_id = self._slurm_id(job)
        if slurm_id is not None:
            self.client.cancel(slurm_id)

    def suspend(self, job: JobRecord, now: float) -> dict:
        # the checkpoint, then the allocation
        return slurm_suspend.suspend(job, self.options.suspend_timeout,
                                     lambda: self._release_allocation(job))

    def _release_allocation(self, job: JobRecord) -> None:
        slurm_id = self._slurm_id(job)
        if slurm_id is not None:
            self._cancel(slurm_id)
        self.ports.release(job.id)
    progress = staticmethod(slurm_suspend.progress)    # its workers' batches / its last

    # ---- capacity ----------------------------------------------------------------------
    def own_running(self, running: Sequence[JobRecord]) -> dict[str, int]:
        """GPUs per node of sluice's jobs that Slurm was running at their last poll."""
        out: dict[str, int] = {}
        for job in running:
            if job.executor != self.kind:
                continue
            parts = self._seen.get(_recorded_id(job) or self._ids.get(job.id, -1), [])
            if any(p.state in ("RUNNING", "COMPLETING", "SUSPENDED") for p in parts):
                for host, k in job.gpus_by_host().items():
                    out[host] = out.get(host, 0) + k
        return out

    def capacity(self, state: ClusterState, running: Sequence[JobRecord]) -> None:
        """Slurm is the truth: see :func:`apply_capacity`. Slurm unreachable: no free GPU
        (no decision without the truth)."""
        truth: dict = {}
        try:
            listed, truth = self._nodes_now()
            nodes = {n.name: n for n in listed}
        except (SlurmError, ValueError) as err:   # unreachable, refused or unreadable
            now = time.time()
            if now - self._warned_unavailable > 30:
                log.warning("Slurm's nodes unknown (%s): no job starts until it answers", err)
                self._warned_unavailable = now
            nodes = {}
        own = self.own_running(running)
        if nodes:       # which GPUs: Slurm's indices of every job (slurm_gpus)
            ours = {self._slurm_id(j): j for j in running if j.executor == self.kind}
            taken, grants = apply_gres_truth(state, truth, ours)
            self._gres = {j.id: (sid, grants[j.id]) for sid, j in ours.items() if j.id in grants}
            own = {h: own.get(h, 0) + taken.get(h, 0) for h in {*own, *taken}}
        site = self.options.site
        site = dataclasses.replace(site, partition=site.partition or self.options.partition)
        self.last_capacity = apply_capacity(state, nodes, own, site.gpu_type, site)
        self.ports.sync(running, self.kind)
        if self.resume_duplicate_drains:
            resume_duplicate_drains(self.client, nodes.values(), running)

    def _nodes_now(self) -> tuple[list[NodeInfo], dict]:
        """Slurm's nodes and GPU indices, read on a poll (every slot without batching)."""
        seen = self._nodes_seen
        if seen is None or not self.rounds.active or self.rounds.fresh:
            self._nodes_seen = None           # a read that fails is not kept
            seen = (self.client.nodes(), read_truth(self.client))
            self._nodes_seen = seen
        return seen
