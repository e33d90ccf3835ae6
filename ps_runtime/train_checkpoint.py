"""``sluice train ... --suspend-at K --out DIR`` and ``sluice train ... --resume DIR``.

``--suspendable`` (the scheduler service's jobs): the job checkpoints into
``DIR/checkpoint`` and stops when asked, by the request file ``DIR/checkpoint/SUSPEND``
or by SIGUSR1 (what Slurm's ``--signal=USR1@N`` sends before a preemption or the time
limit); it exits 0 with the checkpoint's manifest saying where it stopped.

The checkpoint of a suspended ``sluice train`` lives in ``DIR/checkpoint`` (the job's run
directory); ``--resume DIR`` (the run directory or the checkpoint itself) continues it
to the job's last batch on any number of workers, logging to ``DIR/resumed`` unless
``--out`` says otherwise. Both print the final ``weights_checksum`` (torch compute) and
the batch the job stopped after.

The flags of both command lines live here: ``sluice train``'s (:func:`add_train_arguments`,
turned into :class:`CheckpointOptions` by ``ps_runtime/cli.py``) and the workers'
(:func:`add_worker_arguments`, turned into a :class:`~ps_runtime.checkpoint.WorkerCheckpoint`
by :func:`worker_checkpoint_of`); nothing below them sees a namespace.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from ps_runtime.checkpoint import WorkerCheckpoint, read_manifest
from sluice_common.errors import InputError

CHECKPOINT_SUBDIR = "checkpoint"


@dataclass(frozen=True)
class CheckpointOptions:
    """What ``sluice train`` was asked to do with checkpoints."""
    suspend_at: int | None = None     # stop after this batch
    suspendable: bool = False         # checkpoint and stop when asked
    resume: str | None = None         # continue the job suspended here


def add_train_arguments(parser) -> None:
    parser.add_argument("--suspend-at", type=int, default=None, metavar="K",
                        help="stop every process of the job after batch K, leaving the "
                             "checkpoint in OUT/checkpoint")
    parser.add_argument("--suspendable", action="store_true",
                        help="checkpoint into OUT/checkpoint and stop when asked (the file "
                             "OUT/checkpoint/SUSPEND, or SIGUSR1)")
    parser.add_argument("--resume", default=None, metavar="DIR",
                        help="continue the job suspended in DIR (its --out) from its next batch")


def add_worker_arguments(ap) -> None:
    """A worker process's checkpoint flags (``ps_runtime.worker``, ``ps_runtime.emulated_worker``)."""
    ap.add_argument("--checkpoint-dir", default=None,
                    help="suspendable: vote every batch; stop when any worker sees "
                         "DIR/SUSPEND or --suspend-at, leaving the checkpoint in DIR")
    ap.add_argument("--suspend-at", type=int, default=None,
                    help="stop after this batch (needs --checkpoint-dir)")
    ap.add_argument("--resume", default=None, metavar="DIR",
                    help="continue from the checkpoint in DIR (from its next batch)")


def worker_checkpoint_of(args: argparse.Namespace) -> WorkerCheckpoint:
    """A worker's namespace (its identity and :func:`add_worker_arguments`' flags) as its
    :class:`~ps_runtime.checkpoint.WorkerCheckpoint`, built once by its ``main``."""
    return WorkerCheckpoint(job=args.job, worker_index=args.worker_index, batches=args.batches,
                            model=args.model or "", checkpoint_dir=args.checkpoint_dir,
                            suspend_at=args.suspend_at, resume=args.resume)


def checkpoint_dir_of(path: str | Path) -> Path:
    """The checkpoint of a run directory (or the checkpoint directory itself)."""
    p = Path(path)
    return p if (p / "manifest.json").exists() else p / CHECKPOINT_SUBDIR


def checkpoint_options(options: CheckpointOptions, spec, batches: int, compute: str,
                       asked_batches: int | None = None):
    """-> (batches per worker, out_dir -> WorkerOptions fields). ``batches``: the job's
    own count; ``asked_batches``: the user's ``--batches`` (None: not given). InputError
    (exit 2) for a bad --suspend-at / --resume, before anything starts."""
    resume = None
    if options.resume:
        ckpt = checkpoint_dir_of(options.resume)
        try:
            m = read_manifest(ckpt)
        except ValueError as err:
            raise InputError(str(ckpt), str(err).split(": ", 1)[-1], field="--resume")
        if m.job != spec.name:
            raise InputError(str(ckpt), f"is a checkpoint of job '{m.job}', not '{spec.name}'",
                             field="--resume")
        if m.compute != compute:
            raise InputError(str(ckpt), f"was saved with {m.compute} compute, this run uses "
                             f"{compute} (pass --compute {m.compute})", field="--resume")
        if asked_batches is not None and asked_batches != m.batches:
            raise InputError("argument", f"the checkpoint's job has {m.batches} batches per "
                             f"worker, got {asked_batches}", field="--batches")
        batches, resume = m.batches, ckpt
    if options.suspend_at is not None:
        first = (m.batch + 1) if resume else 1
        if not first <= options.suspend_at < batches:
            raise InputError("argument", f"must be a batch in {first}..{batches - 1} (the job "
                             f"runs batches {first}..{batches})", field="--suspend-at")

    def fields(out: Path) -> dict:
        f = {}
        if options.suspend_at is not None or options.suspendable:
            f["checkpoint_dir"] = str(out / CHECKPOINT_SUBDIR)
        if options.suspend_at is not None:
            f["suspend_at"] = options.suspend_at
        if resume is not None:
            f["resume_from"] = str(resume)
        return f

    return batches, fields


def report_end(job, result) -> None:
    """The final checksum (worker 0's, torch) and where the job stopped."""
    worker0 = next((p for p in job.workers if p.rank == 0), None)
    if worker0 is not None:
        for line in worker0.tail(50):
            if line.startswith("weights_checksum "):
                print(line)
    suspended = job.suspended_batch()
    last = max((recs[-1].batch for recs in result.batches.values() if recs), default=0)
    if suspended:
        print(f"suspended after batch {suspended} of {job.batches}; checkpoint in "
              f"{job.options.checkpoint_dir} (continue with --resume {job.out_dir})")
    else:
        print(f"finished at batch {last} of {job.batches}")


def suspend_on_usr1(job) -> None:
    """SIGUSR1 asks a suspendable job to stop after the batch in progress with a
    checkpoint (the same request the scheduler service writes)."""
    import signal

    from ps_runtime.checkpoint import request_suspend

    if job.options.checkpoint_dir:
        signal.signal(signal.SIGUSR1,
                      lambda s, f: request_suspend(job.options.checkpoint_dir))
