"""The heavy-tail experiment's model: each job's ideal time alone, the exchange model's
prediction of every mode (computed before the runs, from the mix alone: never from the
measurements) and the fluid model's jobs."""

from __future__ import annotations

from dataclasses import replace

from job_scheduler.core.estimator import Estimator
from mininet_fabric import baselines as bl
from mininet_tests import fluid
from mininet_tests.heavy_tail.mix import MixJob
from sluice_common.exchange import batch_exchange_s, default_constants, key_times
from sluice_common.exchange_waits import standing_fill
from sluice_common import rank_rules

# PIAS is modelled as least-attained-service with its own thresholds (see mode_prediction)
PIAS_MODEL_RULE = "attained"
from sluice_common.jobspec import JobSpec

# The run's scheduling slot: a job arriving waits half of one on average before it
# starts (part of its JCT, and of the model's prediction)
SLOT_S = 0.25


BATCH_SIZE = 32


KEYS = 8              # ps-lite keys per batch


# Keys in flight per batch (emulated_worker --pipeline-keys): 3 of 8 lets pulls overlap
# later pushes (1.5 key-times a key, sluice_common.exchange); 0 pushes all, then
# pulls all (2 key-times: one direction busy at a time).
PIPELINE_KEYS = 3


# --compute profile: whose compute per batch (AlexNet: 61M parameters, 4.2 ms a batch)
PROFILE, PROFILE_MODEL = "h100", "alexnet"


def profile_compute_s(profile: str = PROFILE, model: str = PROFILE_MODEL,
                      batch_size: int = BATCH_SIZE) -> float:
    """Seconds one batch computes on the profiled device (the estimator's Cost_bat(b))."""
    spec = JobSpec(name="probe", model=model, dataset_size=batch_size, epochs=1,
                   batch_size=batch_size, max_gpus=1)
    return Estimator(profile=profile).cost_bat(spec)


def same_start_mix(capacity: float, batches: int = 40, bytes_per_batch: int = 1_000_000,
                   comm_fraction: float = 0.95) -> list[MixJob]:
    """Three equal communication-bound jobs arriving together."""
    compute = exchange_s(bytes_per_batch, capacity) * (1 - comm_fraction) / comm_fraction
    return [MixJob(f"eq{i}", 0.0, batches, bytes_per_batch, comm_fraction, round(compute, 4))
            for i in range(3)]


def exchange_s(nbytes: float, capacity: float, pipeline_keys: int = PIPELINE_KEYS) -> float:
    """One batch's push + pull alone at the link rate: KEYS keys, ``pipeline_keys`` of
    them in flight (sluice_common.exchange)."""
    return nbytes / capacity * key_times(KEYS, pipeline_keys) / KEYS


def alone_s(job: MixJob, capacity: float) -> float:
    """The job's JCT alone on an idle fabric, start-up excluded (fluid ideal)."""
    return job.batches * (job.compute_s + exchange_s(job.bytes_per_batch, capacity))


def cross_path(capacity: float) -> tuple[float, ...]:
    """The link rates (bytes/s) from a rack-2 worker to its rack-1 PS: host link, the two
    uplinks, host link (host links run at twice the uplink)."""
    return (2 * capacity, capacity, capacity, 2 * capacity)


def model_exchange_s(nbytes: float, capacity: float, pipeline_keys: int = PIPELINE_KEYS) -> float:
    """One batch's push + pull alone across the racks (sluice_common.exchange, calibrated)."""
    return batch_exchange_s(nbytes, KEYS, cross_path(capacity), pipeline_keys)


def buffer_bytes(baseline: str, capacity: float, rtt_s: float | None) -> float:
    """Bytes a message may wait behind at the egress, per class, under ``baseline``."""
    return bl.queue_bytes(baseline, capacity * 8 / 1e6, rtt_s)


def model_prediction(mix: list[MixJob], capacity: float, mode: str,
                     rtt_s: float | None, workload: bl.Workload | None = None,
                     host_cc: str | None = None) -> dict[str, float]:
    """The exchange model's mean JCT of ``mix`` under an experiment mode (rule and
    baseline): its start-up for the queue each job meets on arrival (calibrated, never
    this experiment's measurements), its batches and half a scheduling slot
    (fluid.simulate_batches); and the mean of its start-ups as the experiment measures
    them (arrival to the first batch after ``kv.init``'s, the slot included), so that
    the model's error splits into start-up and the rest. ``workload``: the size
    distribution and load a host-tagging baseline (pias) derives its thresholds from;
    ``host_cc``: the hosts' congestion control, which sets how full the senders keep a
    FIFO (``sluice_common.exchange_waits.standing_fill``; None: the machine's)."""
    jct, started = model_jobs(mix, capacity, mode, rtt_s, workload, host_cc)
    return {"predicted_mean_jct_s": round(fluid.mean(jct.values()), 3),
            "predicted_mean_startup_s": round(fluid.mean(started.values()), 3)}


def model_jobs(mix: list[MixJob], capacity: float, mode: str, rtt_s: float | None,
               workload: bl.Workload | None = None, host_cc: str | None = None
               ) -> tuple[dict[str, float], dict[str, float]]:
    """:func:`model_prediction` per job: each job's predicted JCT and start-up. ``pias``
    is modelled as the attained-service rule with PIAS's thresholds on each job's bytes
    per direction (each of its connections carries one direction, and the push and the
    pull connections move the same bytes), on the baseline's FIFO leaves."""
    rule, baseline = bl.split_mode(mode, rank_rules.names())
    thresholds = None
    if bl.baseline(baseline).host_rules is not None:
        if workload is None:
            raise ValueError(f"mode {mode!r} tags at the hosts: its prediction needs the workload")
        rule, thresholds = PIAS_MODEL_RULE, bl.pias_thresholds(workload)
    jobs = [fluid.BatchJob(j.name, j.arrival, j.batches, j.bytes_per_batch, j.compute_s, KEYS,
                           PIPELINE_KEYS, cross_path(capacity)) for j in mix]
    started: dict[str, float] = {}
    c = default_constants()
    c = replace(c, queue_fill=standing_fill(host_cc, c.queue_fill))
    jct = fluid.simulate_batches(jobs, rule or "off", capacity,
                                 buffer_bytes(baseline, capacity, rtt_s), constants=c,
                                 overhead_s=SLOT_S / 2, started=started,
                                 urgent_bytes=bl.urgent_bytes(baseline),
                                 attained_thresholds=thresholds)
    return jct, started


def fluid_jobs(mix: list[MixJob], capacity: float) -> list[fluid.FluidJob]:
    """Fluid jobs whose cap is what each uses alone: its bytes both ways over its
    iteration alone (compute + the exchange model's batch alone)."""
    out = []
    for j in mix:
        it = j.compute_s + model_exchange_s(j.bytes_per_batch, capacity)
        out.append(fluid.FluidJob(j.name, j.arrival, j.batches, j.bytes_per_batch,
                                  2 * j.bytes_per_batch / (it * capacity)))
    return out


def model_provenance() -> str:
    from sluice_common.exchange import default_constants

    prov = default_constants().provenance
    refit = f", refitted from {prov['refit_from']}" if prov.get("refit_from") else ""
    return (f"predicted_mean_jct_s recomputed after the runs from each seed's mix with the "
            f"exchange model's constants calibrated {prov.get('date', '?')}{refit} (not "
            f"fitted to these runs)")

