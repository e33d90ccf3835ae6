"""Each simulated job's outcome, as ``sluice simulate --json`` reports it per policy."""

from __future__ import annotations

import math
from typing import Sequence


def _seconds(t: float):
    return None if math.isnan(t) else round(float(t), 3)


def job_records(topology, jobs: Sequence, placements: Sequence, gpus: Sequence[int],
                first_start: Sequence[float], finish: Sequence[float]) -> list[dict]:
    """One record per job, in the order of ``jobs``: its name, the GPUs and placement
    (GPUs per host, PS hosts, racks) of its last run (a preempted job may have run
    elsewhere before), its arrival, first start, end and JCT (end - arrival) in seconds;
    None for what a job never reached."""
    rack_of = {h.name: h.rack for h in topology.hosts}
    out = []
    for j, job in enumerate(jobs):
        p = placements[j]
        hosts = set(p.worker_hosts) | set(p.ps_hosts) if p is not None else set()
        out.append({
            "name": job.name, "gpus": gpus[j],
            "placement": None if p is None else {
                "gpus_by_host": dict(sorted(p.gpus_by_host().items())),
                "ps_hosts": list(p.ps_hosts),
                "racks": sorted({rack_of[h] for h in hosts})},
            "arrival": _seconds(job.arrival), "start": _seconds(first_start[j]),
            "end": _seconds(finish[j]), "jct": _seconds(finish[j] - job.arrival)})
    return out


def host_spans(topology, placements: Sequence) -> tuple[int, int]:
    """``(jobs whose last placement spans more than one host, PS and worker hosts
    together; those of them whose hosts are in more than one rack)``: what a report of
    the placements' spread reads of :func:`job_records`, counted without building them."""
    rack_of = {h.name: h.rack for h in topology.hosts}
    multi = cross = 0
    for p in placements:
        if p is None:
            continue
        hosts = set(p.worker_hosts) | set(p.ps_hosts)
        if len(hosts) > 1:
            multi += 1
            cross += len({rack_of[h] for h in hosts}) > 1
    return multi, cross
