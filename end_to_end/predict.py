"""The exchange model's JCT of every job of one pass (``sluice demo``), priority off or on
(``sluice_common.exchange``, the one exchange model). Pure: from placements and start
times, never from measured durations. The dry run (``end_to_end.model_run``, what
``sluice demo`` predicts with) times its jobs with this module's pieces
(:func:`startup_of`, :func:`shared_batch_s`, :func:`server_s`); :func:`predict_pass`
prices a pass whose starts and placements are given, the same model stepped on its own,
which the dry run's tests check it against.

Per job (a record of ``RealTimeRun.result()["jobs"]``: ``ps_hosts``, ``worker_hosts``,
``batches`` per worker, ``bytes_per_batch``, ``batch_compute_s``, ``keys``,
``pipeline_keys``, ``start``, ``arrival``): every worker exchanges ``bytes / P`` with each
of its ``P`` servers over ``topology.path``; a link carrying ``m`` of the job's
worker-server pairs gives each ``rate / m``; the job's batch alone is its slowest pair's
(:func:`sluice_common.exchange.batch_exchange_s`: dist_sync waits for every worker).
While jobs run together, :func:`sluice_common.exchange.share_links` shares every link
two of them cross: priority off in one FIFO class, on in the levels the controller's rule
gives (``remaining``, ``attained``: sluice_common.job_rank; ``progress``: fewest batches done
first). Each job starts training after its start-up (:func:`startup_of`: the runtime's
``startup_s``, ``kv.init``'s exchange of every key alone and, with priority on, the
controller's registration: the exchange model's start-up, ``sluice_common.exchange``) and
advances one batch per iteration; its JCT is its predicted finish minus its arrival. A
job the dry run suspended (``las``, ``sluice``) is idle between its runs and pays a
start-up at each.
"""

from __future__ import annotations

import math
from collections import Counter
from itertools import pairwise

from sluice_common import rank_rules
from sluice_common.job_rank import JobLoad
from sluice_common.models import BYTES_PER_PARAM
from sluice_common.exchange import (LinkJob, MTU_BYTES, ExchangeConstants, batch_exchange_s,
                                    default_constants, server_wait_s, share_links,
                                    transfer_s)
from topologies.priority_classes import LEVELS

BUFFER_PACKETS = 200          # the HTB tree's FIFO per class (mininet_fabric.priority)


def wire_bytes_of(estimator, spec, options) -> int:
    """What one batch pushes: the model's float32 gradients; the emulated worker moves
    them times the fabric's bw_scale, or what it was told."""
    if options.compute == "emulated" and options.bytes_per_batch is not None:
        return int(options.bytes_per_batch)
    nbytes = estimator.params(spec) * BYTES_PER_PARAM
    return max(1, int(nbytes * (options.bw_scale if options.compute == "emulated" else 1.0)))


def exchange_facts(estimator, spec, options, bytes_per_batch: int) -> dict:
    """What the model needs of a launched job, for its run record: the bytes one batch
    pushes (and pulls), its keys (the worker's buckets), keys in flight and the compute
    per batch (Cost_bat(b); emulated workers wait exactly that)."""
    from ps_runtime.emulated_worker import key_lengths

    keys = len(key_lengths(int(bytes_per_batch), int(options.bucket_mb * 2 ** 20)))
    return {"bytes_per_batch": int(bytes_per_batch), "keys": keys,
            "pipeline_keys": options.pipeline_keys,
            "batch_compute_s": round(estimator.cost_bat(spec) * options.compute_slowdown, 6)}


def link_job(topology, rec: dict, c: ExchangeConstants, cls: int | None = None) -> LinkJob:
    """One job's exchange on ``topology`` (emulated rates: bw x emulation_bw_scale)."""
    scale = topology.emulation_bw_scale
    ps, workers = list(rec["ps_hosts"]), list(rec["worker_hosts"])
    # each worker-server pair's links (none for a pair on one host: its path is the host)
    pairs = [[tuple(sorted(e)) for e in pairwise(topology.path(w, p))] for w in workers for p in ps]
    load = Counter(e for edges in pairs for e in edges)

    def rate(e) -> float:
        return topology.graph.edges[e]["bw"] * scale * 1e6 / 8

    nbytes = rec["bytes_per_batch"] / len(ps)
    keys, window = rec.get("keys") or 1, rec.get("pipeline_keys") or 0
    paths = [tuple(rate(e) / load[e] for e in edges) for edges in pairs]
    slowest = max(paths, key=lambda p: batch_exchange_s(nbytes, keys, p, window, c))
    links = {f"{a}-{b}": (rate((a, b)), n) for (a, b), n in load.items()}
    return LinkJob(rec["name"], nbytes, keys, slowest, links, rec.get("batch_compute_s") or 0.0,
                   window, cls)


def _classes(jobs: list[dict], done: dict[str, float], rule: str | None) -> dict[str, int | None]:
    """Each job's priority level under ``rule`` on its predicted progress: the controller's
    own job rules (sluice_common.job_rank) over the fabric's levels; ``progress`` ranks by
    batch number as the flow rule does; None (priority off): one class."""
    if rule is None:
        return {j["name"]: None for j in jobs}
    # progress ranks by batch number (each worker's), the job rules by the job's batches
    # done summed over its workers
    by_batch = rank_rules.rule(rule).by_batch
    loads = [JobLoad(j["name"], k, math.floor(done[j["name"]]) if by_batch
                     else done[j["name"]] * len(j["worker_hosts"]),
                     j["batches"] * len(j["worker_hosts"]), j["bytes_per_batch"],
                     registered_s=j.get("start") or 0.0)   # it registers as it starts
             for k, j in enumerate(jobs)]
    return rank_rules.job_levels(rule, loads, LEVELS)


def _segments(rec: dict) -> list[dict]:
    """The job's runs (the dry run's ``segments``: start, stop or None, placement,
    batches per worker); a record without them runs once, from its ``start`` to its end."""
    return rec.get("segments") or [{k: rec.get(k) for k in ("start", "ps_hosts",
                                                            "worker_hosts", "batches")}]


def startup_of(topology, rec: dict, startup_s: float, rule: str | None,
               c: ExchangeConstants) -> float:
    """Launch -> the job's first batch: ``startup_s`` (the runtime's hand-over and
    rendezvous), ``kv.init``'s push and first pull of every key alone over the job's
    slowest pair (window 0, no compute: ``sluice_common.exchange.batch_exchange_s``) and,
    with priority on (``rule``), ``startup_priority_s``: the job registered with the
    controller and its rules in place before it starts; a resumed run also reads its
    checkpoint (the record's ``load_s``, ``end_to_end.model_run``)."""
    job = link_job(topology, rec, c)
    return (startup_s + batch_exchange_s(job.bytes_per_batch, job.keys, job.path, 0, c)
            + (c.startup_priority_s if rule is not None else 0.0) + rec.get("load_s", 0.0))


def server_s(topology, rec: dict, per_worker_s: float, c: ExchangeConstants) -> float:
    """The server's time per batch past its workers' bytes on the wire
    (:func:`sluice_common.exchange.server_wait_s`) over the job's slowest pair alone."""
    if not per_worker_s:
        return 0.0
    job = link_job(topology, rec, c)
    # one host (a path of no links): the workers' pushes are there at once, as the
    # estimator takes them (Estimator.server_s)
    wire = transfer_s(job.bytes_per_batch, job.keys, job.path, job.window, c) if job.path else 0.0
    return server_wait_s(len(rec["worker_hosts"]), per_worker_s, wire)


def _running(jobs: list[dict], finish: dict, t: float, startup: dict) -> list[dict]:
    """The jobs training at ``t``, each as its record with the placement and batches of
    the run it is in: past that run's start-up (``startup``: (job, run) -> seconds),
    before its stop."""
    out = []
    for j in jobs:
        if j["name"] in finish:
            continue
        for k, seg in enumerate(_segments(j)):
            stop = seg.get("stop")
            ready = seg["start"] + startup[j["name"], k]
            if ready <= t + 1e-9 and (stop is None or t < stop - 1e-9):
                out.append({**j, **seg, "segment": k})
                break
    return out


def shared_batch_s(topology, active: list[dict], done: dict[str, float], rule: str | None,
                   c: ExchangeConstants, cache: dict | None = None) -> dict[str, float]:
    """Job name -> seconds per batch while the jobs ``active`` train together (each its
    record with the placement of the run it is in, that run's number as ``segment``;
    ``done``: its batches done, for the priority levels under ``rule``): the exchange
    model's shared links (:func:`sluice_common.exchange.share_links`); ``cache`` keeps
    them by the set of jobs, runs and levels."""
    cls = _classes(active, done, rule)
    key = tuple(sorted((j["name"], j["segment"],
                        -1 if cls[j["name"]] is None else cls[j["name"]]) for j in active))
    got = None if cache is None else cache.get(key)
    if got is None:
        got = share_links([link_job(topology, j, c, cls[j["name"]]) for j in active],
                          BUFFER_PACKETS * MTU_BYTES, c)
        if cache is not None:
            cache[key] = got
    return got


def predict_pass(topology, records: list[dict], rule: str | None, startup_s: float,
                 c: ExchangeConstants | None = None, dt: float = 0.25,
                 close_s: float = 0.0, server_per_worker_s: float = 0.0) -> dict[str, float]:
    """Job name -> predicted JCT for the jobs of one pass that were started (``rule``
    None: priority off; ``startup_s``: the runtime's part of each start-up,
    :func:`startup_of`; ``close_s``: its last batch's end until its processes have
    exited; ``server_per_worker_s``: what each of a batch's workers adds to it at the
    server, ``ps_runtime.calibration``). A job the dry run suspended (its ``segments``)
    trains in each of its runs after that run's start-up and keeps its progress, as a
    share of its work, across them; one whose runs end before its work is left out."""
    c = c or default_constants()
    need = ("ps_hosts", "worker_hosts", "batches", "bytes_per_batch", "start", "arrival")
    jobs = [r for r in records if all(r.get(k) is not None for k in need)]
    if not jobs:
        return {}
    share = {j["name"]: 0.0 for j in jobs}        # of the job's work, done
    finish: dict[str, float] = {}
    startup = {(j["name"], k): startup_of(topology, {**j, **seg}, startup_s, rule, c)
               for j in jobs for k, seg in enumerate(_segments(j))}
    server = {(j["name"], k): server_s(topology, {**j, **seg}, server_per_worker_s, c)
              for j in jobs for k, seg in enumerate(_segments(j))}
    edges = sorted({e for j in jobs for k, seg in enumerate(_segments(j))
                    for e in (seg["start"] + startup[j["name"], k], seg.get("stop"))
                    if e is not None})
    t = edges[0]
    cache: dict[tuple, dict[str, float]] = {}
    while len(finish) < len(jobs):
        active = _running(jobs, finish, t, startup)
        later = [e for e in edges if e > t + 1e-9]
        if not active:
            if not later:
                break                 # the rest never run again: no prediction for them
            t = later[0]
            continue
        done = {j["name"]: share[j["name"]] * j["batches"] for j in active}
        shared = shared_batch_s(topology, active, done, rule, c, cache)
        it = {j["name"]: shared[j["name"]] + server[j["name"], j["segment"]]
              for j in active}
        step = min([dt] + [max((1.0 - share[j["name"]]) * j["batches"] * it[j["name"]], 1e-6)
                           for j in active] + [e - t for e in later])
        for j in active:
            share[j["name"]] += step / (it[j["name"]] * j["batches"])
        t += step
        for j in active:
            if share[j["name"]] >= 1 - 1e-9:
                finish[j["name"]] = t
    return {j["name"]: round(finish[j["name"]] + close_s - j["arrival"], 3) for j in jobs
            if j["name"] in finish}
