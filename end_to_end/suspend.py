"""Suspend and resume of real PS jobs in ``sluice run``: what carrying out a ``Suspend``
of the slot plan takes (end_to_end.runloop asks, this keeps the books).

A suspended job stops at a batch boundary with a checkpoint (``ps_runtime.checkpoint``);
it resumes from it, on the same worker count or another (then its remaining samples
are spread over the new workers: ``resized_last_batch``). The report lists every
suspension (why, after which batch, suspend and resume seconds, hosts before and after,
GPU counts) and a resumed job's record covers its whole run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from end_to_end.result import JobRunRecord
from ps_runtime import checkpoint
from ps_runtime.checkpoint import resized_last_batch


class Suspensions:
    def __init__(self):
        # being suspended now: name -> (why: the policy's name | time-slice | migrate, when)
        self.asked: dict[str, tuple[str, float]] = {}
        self.checkpoint_of: dict[str, Path] = {}
        self.past: dict[str, dict] = {}               # name -> first start, iterations so far
        self.entries: list[dict] = []                 # one per suspension, for the report
        self.resume_asked: dict[str, float] = {}      # name -> when its resume was launched
        self.last_gpus: dict[str, int] = {}
        self.grows = self.shrinks = 0

    def ask(self, r, why: str, now: float) -> None:
        self.asked[r.qjob.spec.name] = (why, now)
        r.psjob.request_suspend()

    def last_batch(self, name: str, n: int) -> int | None:
        """The last batch each of a resumed job's n workers trains (None: not a resume)."""
        ckpt = self.checkpoint_of.get(name)
        if ckpt is None:
            return None
        m = checkpoint.read_manifest(ckpt)
        return m.batches if m.workers == n else resized_last_batch(m.batch, m.batches, m.workers, n)

    def launched(self, name: str, gpus: int, hosts: set, now: float, say) -> None:
        prev, self.last_gpus[name] = self.last_gpus.get(name), gpus
        if name not in self.checkpoint_of:
            return
        self.resume_asked[name] = now
        entry = next(p for p in reversed(self.entries) if p["job"] == name)
        entry["gpus"], entry["resume_gpus"] = prev, gpus
        entry["to_hosts"] = sorted(hosts)
        self.grows += gpus > prev
        self.shrinks += gpus < prev
        m = checkpoint.read_manifest(self.checkpoint_of[name])
        say(f"resume {name} after batch {m.batch} from {self.checkpoint_of[name]}"
            + (f": {'grow' if gpus > prev else 'shrink'} to {gpus} GPU(s), had {prev}"
               if gpus != prev else ""))

    def stopped(self, r, batch: int, now: float, controller_before: dict | None) -> dict:
        """Job r's processes exited after ``batch`` with a checkpoint: keep it and its
        logs apart from the resumed job's, and the history of its run
        (``controller_before``: what its record said the controller held)."""
        name = r.qjob.spec.name
        why, asked_at = self.asked.pop(name, None) or ("unknown", now)
        past = self.past.setdefault(name, {"first_start": r.started, "iterations": []})
        past["iterations"] += r.iterations
        ckpt = Path(r.psjob.options.checkpoint_dir)
        segment = len([p for p in self.entries if p["job"] == name]) + 1
        kept = ckpt.with_name(f"checkpoint-{segment}")
        ckpt.rename(kept)
        for proc in r.psjob.processes:
            if proc.log_path.exists():
                proc.log_path.rename(proc.log_path.with_name(f"{proc.log_path.stem}.segment{segment}.log"))
        self.checkpoint_of[name] = kept
        entry = {"job": name, "why": why, "t": round(asked_at, 3), "batch": batch,
                 "batches": r.batches, "suspend_s": round(now - asked_at, 3),
                 "from_hosts": sorted(set(r.decision.worker_hosts) | set(r.decision.ps_hosts)),
                 # what the controller held for the old placement before it dropped it
                 "controller_before": controller_before}
        self.entries.append(entry)
        return entry

    def first_batches(self, name: str, r, say) -> None:
        """A resumed job's workers have all finished their first batch."""
        asked = self.resume_asked.pop(name, None)
        if asked is None:
            return
        entry = next(p for p in reversed(self.entries) if p["job"] == name)
        entry["resume_s"] = round(max(r.first_batch.values()) - asked, 3)
        entry["interruption_s"] = round(entry["suspend_s"] + entry["resume_s"], 3)
        say(f"resumed {name}: first batch {entry['resume_s']:.2f} s after launch; "
            f"interruption {entry['interruption_s']:.2f} s")

    def finished(self, r) -> None:
        """Before the record of a finished job is written: its whole run's iterations."""
        self.asked.pop(r.qjob.spec.name, None)      # it finished before it could stop
        past = self.past.get(r.qjob.spec.name)
        if past:
            r.iterations[:0] = past["iterations"]

    def history(self, name: str, record: JobRunRecord) -> JobRunRecord:
        """A resumed job's record: its first start (not the resume), its whole run."""
        past = self.past.get(name)
        if past:
            record = replace(record, start=round(past["first_start"], 3),
                             wait=round(past["first_start"] - record.arrival, 3),
                             run_s=round(record.finish - past["first_start"], 3))
        return replace(record, preemptions=len([p for p in self.entries if p["job"] == name]))

    def summary(self) -> dict:
        whys = [p["why"] for p in self.entries]
        return {"preemptions": sum(w not in ("migrate", "time-slice") for w in whys),
                "migrations": whys.count("migrate"), "time_slices": whys.count("time-slice"),
                "grows": self.grows, "shrinks": self.shrinks}
