"""What the heavy-tail experiment measures: each run's jobs (JCT, slowdown by size
bucket, start-up, time split), the bottleneck's throughput under contention, and, as the
run goes (:class:`Sampler`, the run loop's sampling hook), the jobs' processes' CPU wait,
their sockets' time in RTO recovery and the queue at the shaped egresses."""

from __future__ import annotations

import math
import statistics
import subprocess
from typing import Mapping

from end_to_end.result import iterations_of
from mininet_tests import time_split
from mininet_tests.heavy_tail.fabric_setup import PULL_EGRESS, PUSH_EGRESS
from mininet_tests.heavy_tail.mix import MixJob
from mininet_tests.heavy_tail.predict import alone_s, exchange_s
from ps_runtime.plan import BLOCK

QUEUE_SAMPLE_S = 1.0


class Sampler:
    """Every loop turn: the running jobs' processes' run-queue delay
    (time_split.ProcessWaits) and their sockets' time in RTO recovery; once a second while
    jobs run, the queue at the shaped egresses (``egress``: name -> (interface, rate in
    bytes/s)). ``tcp_pids``: one process per host namespace, whose /proc/PID/net/tcp
    lists that host's sockets."""

    def __init__(self, egress: dict[str, tuple[str, float]], tcp_pids: list[int]):
        self.waits = time_split.ProcessWaits()
        self.tcp_pids = tcp_pids
        self.rto_s: dict[str, float] = {}
        self._rto_at: float | None = None
        self.egress = egress
        self.queue_delay_s: dict[str, list[float]] = {name: [] for name in egress}
        self._queue_at = -math.inf

    def on_turn(self, now: float, running: Mapping) -> None:
        for name, r in running.items():
            self._sample_waits(name, r)
        self._sample_rto(now, running)
        if running and now - self._queue_at >= QUEUE_SAMPLE_S:
            self._queue_at = now
            for name, (intf, rate) in self.egress.items():
                out = subprocess.run(["tc", "-s", "qdisc", "show", "dev", intf, "root"],
                                     capture_output=True, text=True).stdout
                self.queue_delay_s[name].append(time_split.parse_root_backlog(out) / rate)

    def on_job_end(self, name: str, job) -> dict:
        self._sample_waits(name, job)
        return {"cpu_wait_s": round(self.waits.wait_s(name), 4),
                "tcp_rto_s": round(self.rto_s.get(name, 0.0), 3)}

    def queue_delay_ms(self) -> dict[str, float | None]:
        return {name: (round(1000 * statistics.mean(v), 2) if v else None)
                for name, v in self.queue_delay_s.items()}

    def _sample_waits(self, name: str, r) -> None:
        self.waits.sample(name, [p.popen.pid for p in r.psjob.processes
                                 if p.popen is not None and p.popen.poll() is None])

    def _sample_rto(self, now: float, running: Mapping) -> None:
        """Credit the time since the last look to every job with a socket in RTO recovery."""
        dt, self._rto_at = (0.0 if self._rto_at is None else now - self._rto_at), now
        if not running or not self.tcp_pids:
            return
        ports: set[int] = set()
        for pid in self.tcp_pids:
            try:
                with open(f"/proc/{pid}/net/tcp") as f:
                    ports |= time_split.ports_in_recovery(f.read())
            except OSError:
                continue
        for name, r in running.items():
            base = r.psjob.ports.base
            self.rto_s.setdefault(name, 0.0)
            if any(base <= p < base + BLOCK for p in ports):
                self.rto_s[name] += dt


def startup_s(job: dict) -> float | None:
    """Arrival to the first batch's start (process start-up and ps-lite rendezvous)."""
    its = iterations_of(job)
    if not its or "arrival" not in job:
        return None
    first = min(its, key=lambda it: it.t_s)
    return max(0.0, first.t_s - first.time_s - job["arrival"])


def bottleneck_mbps(result: dict, capacity_mbps: float | None = None) -> dict[str, float | None]:
    """Mean Mbit/s out of the two ToR uplink egresses (push, pull) over the samples taken
    while at least two jobs were running (contention), and that mean as a share of the
    link's ``capacity_mbps`` (utilisation in busy periods)."""
    spans = [(j["start"], j["finish"]) for j in result["jobs"] if "start" in j and "finish" in j]
    push, pull = [], []
    for s in result["links"]:
        tx = s.get("tx_mbps") or {}
        busy = sum(1 for a, b in spans if a <= s["t"] - 1 and s["t"] <= b)
        if busy >= 2 and PUSH_EGRESS in tx and PULL_EGRESS in tx:
            push.append(tx[PUSH_EGRESS])
            pull.append(tx[PULL_EGRESS])
    if not push:
        return {"push": None, "pull": None, "mean": None, "samples": 0, "utilisation_pct": None}
    p, q = statistics.mean(push), statistics.mean(pull)
    util = round(100 * (p + q) / 2 / capacity_mbps, 1) if capacity_mbps else None
    return {"push": round(p, 2), "pull": round(q, 2), "mean": round((p + q) / 2, 2),
            "samples": len(push), "utilisation_pct": util}


def p95(values: list[float]) -> float:
    values = sorted(values)
    if not values:
        return math.nan
    k = (len(values) - 1) * 0.95
    lo, hi = math.floor(k), math.ceil(k)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def bucket_edges(mix_lo_bytes: float) -> tuple[float, float]:
    """Small < 10x the smallest possible job <= medium < 100x <= large (bytes/direction)."""
    return (10 * mix_lo_bytes, 100 * mix_lo_bytes)


def bucket_of(job: MixJob, edges) -> str:
    size = job.batches * job.bytes_per_batch
    return ("small", "medium", "large")[sum(1 for e in edges if size >= e)]


def measure(result: dict, mix: list[MixJob], capacity: float, edges) -> dict:
    by_name = {j.name: j for j in mix}
    jobs = [j for j in result["jobs"] if j.get("status") == "finished"]
    jct = {j["name"]: j["turnaround"] for j in jobs}
    slow = {n: t / alone_s(by_name[n], capacity) for n, t in jct.items()}
    # The part a network rule can change: arrival to the last batch, minus start-up
    # (process start and ps-lite rendezvous take seconds on a loaded host with two cores).
    start = {j["name"]: startup_s(j) or 0.0 for j in jobs}
    net_slow = {n: max(0.0, t - start[n]) / alone_s(by_name[n], capacity) for n, t in jct.items()}
    buckets: dict[str, list[float]] = {}
    net_buckets: dict[str, list[float]] = {}
    for n, s in slow.items():
        buckets.setdefault(bucket_of(by_name[n], edges), []).append(s)
        net_buckets.setdefault(bucket_of(by_name[n], edges), []).append(net_slow[n])
    starts = list(start.values())
    splits = {j["name"]: time_split.split(
        j["turnaround"], start[j["name"]], by_name[j["name"]].batches,
        by_name[j["name"]].compute_s, exchange_s(by_name[j["name"]].bytes_per_batch, capacity),
        j.get("cpu_wait_s", 0.0), j.get("tcp_rto_s", 0.0)) for j in jobs}
    return {"finished": len(jobs), "jobs": len(mix),
            "cpu_wait_share": time_split.cpu_wait_share(list(splits.values())),
            "cpu_wait_measured": all("cpu_wait_s" in j for j in jobs),
            "time_split": splits,
            "bucket_of": {n: bucket_of(by_name[n], edges) for n in splits},
            "mean_jct_s": round(statistics.mean(jct.values()), 3) if jct else None,
            "p95_jct_s": round(p95(list(jct.values())), 3) if jct else None,
            "makespan_s": result["summary"]["makespan_s"],
            "mean_slowdown": round(statistics.mean(slow.values()), 3) if slow else None,
            "slowdown_by_bucket": {b: round(statistics.mean(v), 3) for b, v in sorted(buckets.items())},
            "network_slowdown_by_bucket": {b: round(statistics.mean(v), 3)
                                           for b, v in sorted(net_buckets.items())},
            "mean_network_jct_s": round(statistics.mean(max(0.0, t - start[n])
                                                        for n, t in jct.items()), 3) if jct else None,
            "bucket_sizes": {b: len(v) for b, v in sorted(buckets.items())},
            "bottleneck": bottleneck_mbps(result, capacity * 8 / 1e6),
            "startup_s": round(statistics.median(starts), 3) if starts else 0.0,
            "mean_startup_s": round(statistics.mean(starts), 3) if starts else 0.0,
            "jct_s": jct}

