"""Heavy-tailed PS jobs on one shaped rack uplink: priority off vs each ranking rule.

    .venv/bin/python -m mininet_tests.experiment_priority --mix heavy-tail --load 0.7 \\
        --seeds 5 --out DIR
    .venv/bin/python -m mininet_tests.experiment_priority --mix same-start --seeds 3 --out DIR

Every job has its parameter server in rack 1 (h1/h2) and its worker in rack 2 (h3/h4):
every push leaves rack 2 through tor2's 50 Mbit/s uplink egress and every pull leaves
rack 1 through tor1's, both shaped at the ToR egress with the HTB priority tree. Workers
are emulated (``ps_runtime.emulated_worker``: a sleep of the job's compute time per batch,
then a real ps-lite push and pull of its bytes), so the 2-core machine runs 12 jobs
without torch. "Load" is the bottleneck link's offered load: offered bytes/s across the
uplink (per direction) divided by its capacity. With ``--compute profile`` (default) each
batch computes for the device profile's time of the model (:func:`profile_compute_s`:
AlexNet, batch 32, on the measured H100 profile, 4.2 ms: the profile's large-parameter,
little-compute model), so the jobs are communication-dominated, as large models on fast
GPUs are; ``--compute share`` draws a communication share of 30-70 % per job instead (the
previous round's mix). The job mix is :mod:`mininet_tests.heavy_tail` (seeded); ``same-start`` is
the sanity case: three equal communication-bound jobs arriving together.

For each seed the same jobs run once per mode, on one controller and fabric: ``off``
(no job registered: every flow in one FIFO class, TCP fair sharing), then the rules
``progress``, ``remaining``, ``attained`` switched at run time through the controller's
REST API. The mode order rotates with the seed. Results are paired per seed.

Writes ``DIR/summary.json`` (medians over seeds per mode: mean and p95 JCT, bottleneck
throughput under contention, makespan, slowdown by size bucket, the fluid model's mean
JCT), ``DIR/experiment.md`` and plots.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path

import yaml

from sluice_common.job_rank import DEFAULT_RULE, RANK_RULES
from job_scheduler.core.estimator import Estimator, nominal_bandwidth
from sluice_common.jobspec import JobSpec
from job_scheduler.core.decisions import StartDecision
from sluice_common.placement import Placement
from mininet_fabric import baselines as bl
from mininet_tests import check_bounds, fluid, time_split
from mininet_tests.exchange_model import key_times
from sluice_common.exchange import batch_exchange_s
from mininet_tests.heavy_tail import MixJob, heavy_tail_mix
from end_to_end.report import write_report
from end_to_end.run import environment
from end_to_end.runloop import RealTimeRun, RunOptions
from ps_runtime.plan import BLOCK
from topologies import load_topology

MODES = ("off",) + RANK_RULES


def all_modes() -> tuple[str, ...]:
    """--baselines all: every registered baseline (switch-egress queue discipline,
    mininet_fabric/baselines.py) as a mode too, and the default rule on each one but the
    deep FIFO ("<rule>+<baseline>"; the rule on ``off`` is the rule's own mode)."""
    others = [b for b in bl.names() if b != "off"]
    return ("off", *others, *RANK_RULES, *(f"{DEFAULT_RULE}+{b}" for b in others))
# The run's scheduling slot: a job arriving waits half of one on average before it
# starts (part of its JCT, and of the model's prediction)
SLOT_S = 0.25
QUEUE_SAMPLE_S = 1.0
PS_HOSTS, WORKER_HOSTS = ("h1", "h2"), ("h3", "h4")
PUSH_EGRESS, PULL_EGRESS = "tor2>spine1", "tor1>spine1"
BATCH_SIZE = 32
# Host TCP variants for the capacity investigation (--host-tcp): "kernel" leaves the
# kernel defaults; "starved-ok" lets a flow that priority starved resume quickly once it
# is released: linear (not exponential) RTO backoff while it has few packets in flight,
# and RTO never above 1 s.
HOST_TCP = {"kernel": {},
            "starved-ok": {"net.ipv4.tcp_thin_linear_timeouts": "1",
                           "net.ipv4.tcp_rto_max_ms": "1000"}}
KEYS = 8              # ps-lite keys per batch
# Keys in flight per batch (emulated_worker --pipeline-keys): 3 of 8 lets pulls overlap
# later pushes (1.5 key-times a key, mininet_tests.exchange_model); 0 pushes all, then
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
    them in flight (mininet_tests.exchange_model)."""
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
                     rtt_s: float | None) -> dict[str, float]:
    """The exchange model's mean JCT of ``mix`` under an experiment mode (rule and
    baseline): its start-up for the queue each job meets on arrival (calibrated, never
    this experiment's measurements), its batches and half a scheduling slot
    (fluid.simulate_batches); and the mean of its start-ups as the experiment measures
    them (arrival to the first batch after ``kv.init``'s, the slot included), so that
    the model's error splits into start-up and the rest."""
    jct, started = model_jobs(mix, capacity, mode, rtt_s)
    return {"predicted_mean_jct_s": round(fluid.mean(jct.values()), 3),
            "predicted_mean_startup_s": round(fluid.mean(started.values()), 3)}


def model_jobs(mix: list[MixJob], capacity: float, mode: str, rtt_s: float | None
               ) -> tuple[dict[str, float], dict[str, float]]:
    """:func:`model_prediction` per job: each job's predicted JCT and start-up."""
    rule, baseline = bl.split_mode(mode, RANK_RULES)
    jobs = [fluid.BatchJob(j.name, j.arrival, j.batches, j.bytes_per_batch, j.compute_s, KEYS,
                           PIPELINE_KEYS, cross_path(capacity)) for j in mix]
    started: dict[str, float] = {}
    jct = fluid.simulate_batches(jobs, rule or "off", capacity,
                                 buffer_bytes(baseline, capacity, rtt_s),
                                 overhead_s=SLOT_S / 2, started=started,
                                 urgent_bytes=bl.urgent_bytes(baseline))
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


def modes_for(baselines: str, only: str | None = None) -> tuple[str, ...]:
    """The experiment's modes: ``none`` -> off and the rules; ``all`` -> :func:`all_modes`.
    ``only`` (--modes, comma-separated) keeps those of them, ``off`` always (every
    figure is paired against it), in the usual order."""
    if baselines not in ("none", "all"):
        raise ValueError(f"baselines must be none or all, got {baselines!r}")
    modes = all_modes() if baselines == "all" else MODES
    if only is None:
        return modes
    wanted = {m.strip() for m in only.split(",") if m.strip()} | {"off"}
    unknown = sorted(wanted - set(modes))
    if unknown:
        raise ValueError(f"--modes: {', '.join(unknown)} not among this run's modes "
                         f"({', '.join(modes)}; --baselines all for the baselines)")
    return tuple(m for m in modes if m in wanted)


def machine_cc() -> str:
    with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
        return f.read().strip()


def resolve_cc(cc: str) -> str:
    """--cc: ``machine`` -> this machine's default (net.ipv4.tcp_congestion_control)."""
    return machine_cc() if cc == "machine" else cc


# Each run's ps-lite ports: a block of 100 per job (and 100 spare) after the last run's,
# cycling within this range; a long experiment (5 seeds x 8 modes x 16 jobs needs 68,000)
# reuses a block only many runs later, long after its sockets have closed
PORTS_FROM, PORTS_TO = 20000, 60000
# ...and each host's ephemeral ports (its outgoing connections) above it, so that no
# connection of one run holds a port a later run's ps-lite listens on (set in each host's
# own network namespace: the machine's range stays as it is)
EPHEMERAL_PORTS = (61000, 65535)


def host_sysctls(host_tcp: str) -> dict[str, str]:
    """The sysctls of every emulated host: the ``--host-tcp`` tuning and the ephemeral
    ports above the experiment's blocks."""
    low, high = EPHEMERAL_PORTS
    return HOST_TCP[host_tcp] | {"net.ipv4.ip_local_port_range": f"{low} {high}"}


def run_ports(run: int, jobs: int) -> int:
    """The port base of an experiment's ``run``-th run (0, 1, ...) of ``jobs`` jobs."""
    step = 100 * jobs + 100
    slots = (PORTS_TO - PORTS_FROM) // step
    if slots < 2:
        raise ValueError(f"{jobs} jobs need {step} ports a run: too many for "
                         f"{PORTS_FROM}..{PORTS_TO}")
    return PORTS_FROM + (run % slots) * step


def measure_rtt(fabric, src: str, dst: str, count: int = 10) -> float:
    """Mean round trip (s) of ``count`` pings from ``src`` to ``dst`` on the idle fabric."""
    out = fabric.cmd(src, f"ping -q -c {count} -i 0.2 -W 2 {fabric.ip(dst)}")
    import re
    m = re.search(r"= [\d.]+/([\d.]+)/", out)
    if not m:
        raise RuntimeError(f"no RTT from ping {src} -> {dst}: {out[-300:]}")
    return float(m.group(1)) / 1000


class MeasuredRun(RealTimeRun):
    """A run that also samples, every loop turn, its jobs' processes' run-queue delay
    (time_split.ProcessWaits) and, once a second while jobs run, the queue at the shaped
    egresses (``egress``: name -> (interface, rate in bytes/s))."""

    def __init__(self, *args, egress: dict[str, tuple[str, float]] | None = None,
                 tcp_pids: list[int] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.waits = time_split.ProcessWaits()
        self.tcp_pids = tcp_pids or []       # one process per host namespace
        self.rto_s: dict[str, float] = {}
        self._rto_at: float | None = None
        self.egress = egress or {}
        self.queue_delay_s: dict[str, list[float]] = {name: [] for name in self.egress}
        self._queue_at = -math.inf

    def _sample_waits(self, name: str, r) -> None:
        self.waits.sample(name, [p.popen.pid for p in r.psjob.processes
                                 if p.popen is not None and p.popen.poll() is None])

    def _sample_rto(self, running: dict) -> None:
        """Credit the time since the last look to every job with a socket in RTO recovery."""
        now = self.now()
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

    def _after_watch(self) -> None:
        running = getattr(self, "running", None) or {}
        for name, r in running.items():
            self._sample_waits(name, r)
        self._sample_rto(running)
        if running and self.now() - self._queue_at >= QUEUE_SAMPLE_S:
            self._queue_at = self.now()
            import subprocess
            for name, (intf, rate) in self.egress.items():
                out = subprocess.run(["tc", "-s", "qdisc", "show", "dev", intf, "root"],
                                     capture_output=True, text=True).stdout
                self.queue_delay_s[name].append(time_split.parse_root_backlog(out) / rate)

    def _finish(self, r):
        name = r.qjob.spec.name
        self._sample_waits(name, r)
        back = super()._finish(r)
        self.records[name]["cpu_wait_s"] = round(self.waits.wait_s(name), 4)
        self.records[name]["tcp_rto_s"] = round(self.rto_s.get(name, 0.0), 3)
        return back

    def queue_delay_ms(self) -> dict[str, float | None]:
        return {name: (round(1000 * statistics.mean(v), 2) if v else None)
                for name, v in self.queue_delay_s.items()}


def _datapath_wait_ns() -> int | None:
    """Run-queue delay so far of ovs-vswitchd's threads (ns); None when not found."""
    try:
        with open("/var/run/openvswitch/ovs-vswitchd.pid") as f:
            return time_split.read_wait_ns(int(f.read().strip()))
    except (OSError, ValueError):
        return None


def tcp_counters(fabric, hosts) -> dict[str, int]:
    """Summed TCP retransmission counters of the hosts' network namespaces."""
    total = {"retrans_segs": 0, "timeouts": 0}
    for h in hosts:
        c = time_split.read_tcp_counters(fabric.host(h).pid)
        for k in total:
            total[k] += c[k]
    return total


def placement_step(mix: list[MixJob]):
    index = {j.name: i for i, j in enumerate(mix)}

    def step(queued, state, now):
        """Start queued jobs in arrival order: PS on a rack-1 host, the worker on a
        rack-2 host with a free GPU; wait when none is free."""
        out = []
        for q in sorted(queued, key=lambda q: (q.spec.arrival, q.spec.name)):
            i = index[q.spec.name]
            order = WORKER_HOSTS[i % 2:] + WORKER_HOSTS[:i % 2]
            host = next((h for h in order if _free(state, h) - _taken(out, h) > 0), None)
            if host is None:
                break
            out.append(StartDecision(q.id, Placement(q.spec.name, (PS_HOSTS[i % 2],), (host,))))
        return out
    return step


def _free(state, host: str) -> int:
    return state.free[state.index[host]]


def _taken(decisions, host: str) -> int:
    return sum(d.worker_hosts.count(host) for d in decisions)


def specs_and_overrides(mix: list[MixJob]):
    specs = [JobSpec(name=j.name, model="resnet18", dataset_size=BATCH_SIZE * j.batches,
                     epochs=1, batch_size=BATCH_SIZE, max_gpus=1, arrival=j.arrival) for j in mix]
    overrides = {j.name: {"compute": "emulated", "compute_s": j.compute_s,
                          "bytes_per_batch": j.bytes_per_batch,
                          "bucket_mb": j.bytes_per_batch / KEYS / 2 ** 20 * 1.001,
                          "pipeline_keys": PIPELINE_KEYS}
                 for j in mix}
    return specs, overrides


# ---- measurements from one run ------------------------------------------------------------

def startup_s(job: dict) -> float | None:
    """Arrival to the first batch's start (process start-up and ps-lite rendezvous)."""
    its = job.get("iterations") or []
    if not its or "arrival" not in job:
        return None
    first = min(its, key=lambda it: it[0])
    return max(0.0, first[0] - first[3] - job["arrival"])


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
    # (process start and ps-lite rendezvous take seconds on this loaded 2-core machine).
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


# ---- the experiment -----------------------------------------------------------------------

def experiment_topology(uplink_mbps: float | None):
    """two-rack, every link scaled so the rack uplinks run at ``uplink_mbps`` (None: the
    built-in 50 Mbit/s), and the uplink's capacity in bytes/s per direction."""
    topology = load_topology("two-rack")
    uplink = next(l for l in topology.links if {l.a, l.b} == {"tor2", "spine1"})
    if uplink_mbps is not None:
        if uplink_mbps <= 0:
            raise ValueError(f"--uplink-mbps must be > 0, got {uplink_mbps}")
        topology = replace(topology, emulation_bw_scale=uplink_mbps / uplink.bw)
    return topology, uplink.bw * topology.emulation_bw_scale * 1e6 / 8


def topology_arg(topology, out: Path) -> str:
    """What the controller process loads: the built-in name, or the rescaled copy's file."""
    if topology.emulation_bw_scale == load_topology("two-rack").emulation_bw_scale:
        return "two-rack"
    path = out / "topology.yaml"
    path.write_text(yaml.safe_dump(topology.to_dict(), sort_keys=False))
    return str(path.resolve())


def run(args) -> int:
    out = Path(args.out or f"runs/experiment-{args.mix}-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    topology, capacity = experiment_topology(getattr(args, "uplink_mbps", None))
    seeds = list(range(1, args.seeds + 1)) if not args.seed_list else args.seed_list
    estimator = Estimator(nominal_bw_mbps=nominal_bandwidth(topology))
    lo_bytes = 10 * args.scale * args.bytes_lo
    edges = bucket_edges(lo_bytes)
    per_seed: list[dict] = []
    compute_s = profile_compute_s() if getattr(args, "compute", "share") == "profile" else None
    modes = modes_for(getattr(args, "baselines", "none"), getattr(args, "modes", None))
    args.cc = resolve_cc(getattr(args, "cc", "machine"))
    cc_before = machine_cc()
    started = time.monotonic()
    with environment(topology, topology_arg(topology, out), out, rank=DEFAULT_RULE,
                     host_sysctls=host_sysctls(args.host_tcp), tcp_congestion=args.cc) as (fabric, client), \
            _processes(topology, fabric, out, getattr(args, "start", "cold"),
                       per_host=(3 if args.mix == "same-start" else args.jobs) + 1) as runner:
        runs = 0                                  # runs so far: picks each run's ports
        args.rtt_s = measure_rtt(fabric, WORKER_HOSTS[0], PS_HOSTS[0])
        egress = {"push": (fabric.intf("tor2", "spine1"), capacity),
                  "pull": (fabric.intf("tor1", "spine1"), capacity)}
        print(f"experiment: modes {', '.join(modes)}; host TCP {args.cc}; idle RTT "
              f"{1000 * args.rtt_s:.2f} ms (shallow FIFO {bl.shallow_limit_packets(capacity * 8 / 1e6, args.rtt_s)} "
              f"packets)", file=sys.stderr, flush=True)
        for k, seed in enumerate(seeds):
            if args.mix == "same-start":
                mix = same_start_mix(capacity)
            else:
                mix = heavy_tail_mix(seed, args.load, capacity, jobs=args.jobs,
                                     scale=args.scale, bytes_lo=args.bytes_lo,
                                     compute_s=compute_s)
            specs, overrides = specs_and_overrides(mix)
            order = modes[k % len(modes):] + modes[:k % len(modes)]
            seed_out = {"seed": seed, "order": list(order),
                        "mix": [asdict(j) | {"alone_s": round(alone_s(j, capacity), 3)}
                                for j in mix], "modes": {}}
            # the model's prediction, made before the runs
            fjobs = fluid_jobs(mix, capacity)
            predicted = {m: model_prediction(mix, capacity, m, args.rtt_s) for m in modes}
            for mode in order:
                rule, baseline = bl.split_mode(mode, RANK_RULES)
                fabric.install_priority_tree(partial(bl.egress_tree, baseline, rtt_s=args.rtt_s))
                if runner is not None:
                    # every mode starts with a full, idle pool, and nothing refills it
                    # while the jobs run (no MXNet import competes with them for the CPU)
                    runner.fill()
                    runner.wait_ready(timeout=900)
                print(f"experiment: seed {seed} ({k + 1}/{len(seeds)}), mode {mode}, "
                      f"{time.monotonic() - started:.0f} s so far, load average "
                      f"{os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
                load_before = os.getloadavg()[0]
                if rule is not None:
                    client.set_rank(rule, wait=True)
                run_dir = out / f"seed{seed}-{mode}"
                options = RunOptions(priority=rule is not None, slot_s=SLOT_S,
                                     port_base=run_ports(runs, len(mix)),
                                     worker_overrides=overrides, job_timeout_s=args.job_timeout)
                runs += 1
                tcp_before = tcp_counters(fabric, PS_HOSTS + WORKER_HOSTS)
                ovs_before, ovs_t0 = _datapath_wait_ns(), time.monotonic()
                run = MeasuredRun(topology, specs, placement_step(mix), estimator, fabric,
                                  client, run_dir, options, policy_name="fixed",
                                  runner=runner, egress=egress,
                                  tcp_pids=[fabric.host(h).pid for h in PS_HOSTS + WORKER_HOSTS])
                result = run.run()
                tcp_after = tcp_counters(fabric, PS_HOSTS + WORKER_HOSTS)
                ovs_after, ovs_dt = _datapath_wait_ns(), time.monotonic() - ovs_t0
                write_report(result, run_dir)
                seed_out["modes"][mode] = measure(result, mix, capacity, edges)
                seed_out["modes"][mode].update(
                    loadavg=[round(load_before, 1), round(os.getloadavg()[0], 1)],
                    **predicted[mode],
                    queue_delay_ms=run.queue_delay_ms(),
                    tcp={k: tcp_after[k] - tcp_before[k] for k in tcp_after},
                    # the userspace datapath's threads' run-queue delay per second of run:
                    # CPU wait the jobs' packets see, which their own processes' misses
                    datapath_cpu_wait_per_s=(round((ovs_after - ovs_before) / 1e9 / ovs_dt, 3)
                                             if ovs_before is not None and ovs_after is not None
                                             else None))
                if result["interrupted"]:
                    raise KeyboardInterrupt
            startup = seed_out["modes"]["off"]["startup_s"]
            for mode in modes:
                pred = fluid.simulate(fjobs, bl.split_mode(mode, RANK_RULES)[0] or "off",
                                      capacity, dt=0.02, startup_s=startup, levels=8)
                seed_out["modes"][mode]["fluid_mean_jct_s"] = round(fluid.mean(pred.values()), 3)
            per_seed.append(seed_out)
            (out / "per_seed.json").write_text(json.dumps(per_seed, indent=1))
    wall = time.monotonic() - started
    if machine_cc() != cc_before:          # hosts set theirs per namespace; never the machine's
        raise RuntimeError(f"the machine's TCP congestion control changed from {cc_before} "
                           f"to {machine_cc()} during the run")
    summary = summarize(per_seed, args, wall, edges)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    text = markdown(summary, args)
    (out / "experiment.md").write_text(text)
    plot(summary, out)
    print(text)
    ok = all(m["finished"] == m["jobs"] for s in per_seed for m in s["modes"].values())
    return 0 if ok else 1


@contextmanager
def _processes(topology, fabric, out: Path, start: str, per_host: int):
    """warm: a pool of ``per_host`` PS processes per host that imported MXNet before the
    jobs arrive (ps_runtime.warm), so a job's start-up (~25 s cold on the loaded 2-core
    machine, longer than most jobs' transfers) does not hide the network. The pool holds
    a whole mode's processes (a job is 3: ps-lite scheduler and server on its PS host,
    a worker on another) and is refilled only between modes, so no MXNet import runs
    while jobs are measured; cold: None."""
    if start != "warm":
        yield None
        return
    from ps_runtime.runners import MininetRunner
    from ps_runtime.warm import WarmRunner

    runner = WarmRunner(MininetRunner(fabric), [h.name for h in topology.hosts],
                        per_host=per_host, preload=("mxnet",), refill=False)
    try:
        t0 = time.monotonic()
        ready = runner.wait_ready(timeout=900)
        print(f"experiment: {ready} PS processes pre-started in {time.monotonic() - t0:.0f} s",
              file=sys.stderr, flush=True)
        yield runner
    finally:
        runner.close()


def stored_mix(seed: dict) -> list[MixJob]:
    """A stored seed's mix (``per_seed.json``) as MixJobs (its ``alone_s`` left out)."""
    return [MixJob(**{k: v for k, v in j.items() if k != "alone_s"}) for j in seed["mix"]]


def resummarize(out: Path, args, merge: list[Path] = (), repredict: bool = False) -> dict:
    """Rebuild the measurements, the fluid predictions and the summary of a finished
    experiment directory from its per-run ``report.json`` files (no fabric).

    ``merge``: earlier experiment directories (same mix, load and fabric) whose seeds are
    added to ``out``'s, each re-measured from its own reports where they are kept (a
    seed stored without them keeps its measurements). ``repredict``: the model's
    ``predicted_mean_jct_s`` computed again with the current constants (from the mix
    alone, never from the measurements); the summary says so."""
    out = Path(out)
    old = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    args.uplink_mbps = old.get("uplink_mbps")
    _, capacity = experiment_topology(args.uplink_mbps)
    edges = bucket_edges(10 * args.scale * args.bytes_lo)
    sources = [(out, seed) for seed in json.loads((out / "per_seed.json").read_text())]
    for extra in merge:
        sources += [(Path(extra), seed) for seed in json.loads((Path(extra) / "per_seed.json").read_text())]
    seen = [seed["seed"] for _, seed in sources]
    if len(set(seen)) != len(seen):
        raise ValueError(f"a seed appears twice in {out} and {list(merge)}: {sorted(seen)}")
    per_seed = []
    for where, seed in sorted(sources, key=lambda x: x[1]["seed"]):
        mix = stored_mix(seed)
        for mode in seed["modes"]:
            report = where / f"seed{seed['seed']}-{mode}" / "report.json"
            if not report.exists():
                continue
            kept = {k: v for k, v in seed["modes"][mode].items()
                    if k in ("loadavg", "predicted_mean_jct_s", "predicted_mean_startup_s",
                             "queue_delay_ms", "tcp", "datapath_cpu_wait_per_s")}
            seed["modes"][mode] = measure(json.loads(report.read_text()), mix, capacity, edges) | kept
        if repredict:
            for mode in seed["modes"]:
                seed["modes"][mode].pop("predicted_startup_s", None)   # an older model's
                seed["modes"][mode].update(model_prediction(mix, capacity, mode,
                                                            old.get("rtt_s")))
        fjobs = fluid_jobs(mix, capacity)
        for mode in seed["modes"]:
            pred = fluid.simulate(fjobs, bl.split_mode(mode, RANK_RULES)[0] or "off", capacity,
                                  dt=0.02, startup_s=seed["modes"]["off"]["startup_s"])
            seed["modes"][mode]["fluid_mean_jct_s"] = round(fluid.mean(pred.values()), 3)
        per_seed.append(seed)
    (out / "per_seed.json").write_text(json.dumps(per_seed, indent=1))
    if "host_tcp" in old:          # how the runs were made, not how they are re-read
        args.host_tcp = old["host_tcp"]
    args.compute = old.get("compute", "share")
    args.start = old.get("start", "cold")
    args.cc, args.rtt_s = old.get("host_cc"), old.get("rtt_s")
    summary = summarize(per_seed, args, old.get("wall_time_s", 0.0), edges)
    if repredict or "predictions" in old:
        summary["predictions"] = (_model_provenance() if repredict else old["predictions"])
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "experiment.md").write_text(markdown(summary, args))
    plot(summary, out)
    return summary


def _model_provenance() -> str:
    from sluice_common.exchange import default_constants

    prov = default_constants().provenance
    refit = f", refitted from {prov['refit_from']}" if prov.get("refit_from") else ""
    return (f"predicted_mean_jct_s recomputed after the runs from each seed's mix with the "
            f"exchange model's constants calibrated {prov.get('date', '?')}{refit} (not "
            f"fitted to these runs)")


def _median(values, digits: int = 3):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), digits) if values else None


def _mean_split(ms: list[dict]) -> dict[str, dict[str, float]]:
    """Mean time split (s) of a small, a medium and a large job: per bucket, the mean over
    its jobs and seeds."""
    out: dict[str, dict[str, list[float]]] = {}
    for m in ms:
        for name, split in (m.get("time_split") or {}).items():
            bucket = m.get("bucket_of", {}).get(name)
            if bucket is None:
                continue
            for k, v in split.items():
                out.setdefault(bucket, {}).setdefault(k, []).append(v)
    return {b: {k: round(statistics.mean(v), 3) for k, v in parts.items()}
            for b, parts in sorted(out.items())}


def _mean_startup(m: dict) -> float:
    """A mode's mean start-up over its jobs (older records: JCT less network JCT)."""
    if m.get("mean_startup_s") is not None:
        return m["mean_startup_s"]
    return m["mean_jct_s"] - m["mean_network_jct_s"]


def _error_pct(predicted: float | None, measured: float) -> float | None:
    return None if predicted is None else 100 * (predicted / measured - 1)


def _range(pairs):
    values = [v for pair in pairs if pair for v in pair]
    return [min(values), max(values)] if values else None


def summarize(per_seed: list[dict], args, wall: float, edges) -> dict:
    modes = {}
    present = [m for m in all_modes() if m in per_seed[0]["modes"]]
    for mode in present:
        ms = [s["modes"][mode] for s in per_seed]
        offs = [s["modes"]["off"] for s in per_seed]
        buckets = sorted({b for m in ms for b in m["slowdown_by_bucket"]})
        modes[mode] = {
            "mean_jct_s": _median(m["mean_jct_s"] for m in ms),
            "per_seed": {str(s["seed"]): m["mean_jct_s"] for s, m in zip(per_seed, ms)},
            "p95_jct_s": _median(m["p95_jct_s"] for m in ms),
            "bottleneck_mbps": _median(m["bottleneck"]["mean"] for m in ms),
            "bottleneck_utilisation_pct": _median(digits=1, values=(
                m["bottleneck"].get("utilisation_pct") for m in ms)),
            "loadavg_range": _range(m.get("loadavg") for m in ms),
            "bottleneck_push_mbps": _median(m["bottleneck"]["push"] for m in ms),
            "bottleneck_pull_mbps": _median(m["bottleneck"]["pull"] for m in ms),
            "makespan_s": _median(m["makespan_s"] for m in ms),
            "mean_slowdown": _median(m["mean_slowdown"] for m in ms),
            "slowdown_by_bucket": {b: _median(m["slowdown_by_bucket"].get(b) for m in ms)
                                   for b in buckets},
            "network_slowdown_by_bucket": {
                b: _median(m.get("network_slowdown_by_bucket", {}).get(b) for m in ms)
                for b in buckets},
            "mean_network_jct_s": _median(m.get("mean_network_jct_s") for m in ms),
            "startup_s": _median(m["startup_s"] for m in ms),
            "fluid_mean_jct_s": _median(m["fluid_mean_jct_s"] for m in ms),
            "predicted_mean_jct_s": _median(m.get("predicted_mean_jct_s") for m in ms),
            # the model's error, median over seeds, on the whole JCT and split into the
            # start-up (arrival to the first batch after kv.init's) and the rest
            "model_error_pct": _median(digits=1, values=(
                _error_pct(m.get("predicted_mean_jct_s"), m["mean_jct_s"]) for m in ms)),
            "predicted_mean_startup_s": _median(m.get("predicted_mean_startup_s") for m in ms),
            "mean_startup_s": _median(_mean_startup(m) for m in ms),
            "model_startup_error_s": _median(values=(
                m["predicted_mean_startup_s"] - _mean_startup(m) for m in ms
                if m.get("predicted_mean_startup_s") is not None)),
            "model_rest_error_s": _median(values=(
                (m["predicted_mean_jct_s"] - m["predicted_mean_startup_s"])
                - (m["mean_jct_s"] - _mean_startup(m)) for m in ms
                if m.get("predicted_mean_startup_s") is not None)),
            "cpu_wait_share": _median(digits=4, values=(m.get("cpu_wait_share") for m in ms)),
            "queue_delay_ms": {d: _median(digits=2, values=(
                (m.get("queue_delay_ms") or {}).get(d) for m in ms)) for d in ("push", "pull")},
            "tcp_retrans_segs": _median(m.get("tcp", {}).get("retrans_segs") for m in ms),
            "tcp_timeouts": _median(m.get("tcp", {}).get("timeouts") for m in ms),
            "datapath_cpu_wait_per_s": _median(m.get("datapath_cpu_wait_per_s") for m in ms),
            "time_split_mean_s": _mean_split(ms),
            # paired per seed: the median of this mode's change against off in the same seed
            "mean_jct_change_pct": _median(digits=1, values=(100 * (m["mean_jct_s"] / o["mean_jct_s"] - 1)
                                                          for m, o in zip(ms, offs))),
            "p95_jct_change_pct": _median(digits=1, values=(100 * (m["p95_jct_s"] / o["p95_jct_s"] - 1)
                                                         for m, o in zip(ms, offs))),
            "fluid_mean_jct_change_pct": _median(digits=1, values=(
                100 * (m["fluid_mean_jct_s"] / o["fluid_mean_jct_s"] - 1) for m, o in zip(ms, offs))),
            "bottleneck_vs_off_pct": _median(digits=1, values=(
                100 * m["bottleneck"]["mean"] / o["bottleneck"]["mean"]
                for m, o in zip(ms, offs) if m["bottleneck"]["mean"] and o["bottleneck"]["mean"])),
        }
    baselines_run = [b for b in bl.names() if b in modes]
    best = min(baselines_run, key=lambda b: modes[b]["mean_jct_s"] or math.inf)
    combo = f"{DEFAULT_RULE}+{best}"
    if best == "off" and DEFAULT_RULE in modes:  # the rule on the deep FIFO is the rule's mode
        modes[combo] = modes[DEFAULT_RULE]
    for mode, x in modes.items():         # paired per seed against the best baseline
        runs = [(s["modes"][mode if mode in s["modes"] else DEFAULT_RULE], s["modes"][best])
                for s in per_seed]
        x["mean_jct_vs_best_baseline_pct"] = _median(digits=1, values=(
            100 * (m["mean_jct_s"] / b["mean_jct_s"] - 1) for m, b in runs))
        x["predicted_vs_best_baseline_pct"] = _median(digits=1, values=(
            100 * (m["predicted_mean_jct_s"] / b["predicted_mean_jct_s"] - 1) for m, b in runs
            if m.get("predicted_mean_jct_s") and b.get("predicted_mean_jct_s")))
    best_mode = min(modes, key=lambda m: modes[m]["mean_jct_s"] or math.inf)
    return {"default_rule": DEFAULT_RULE, "best_baseline": best,
            "default_rule_on_best_baseline": combo, "best_mode": best_mode,
            "bounds": bounds(per_seed),
            "host_cc": getattr(args, "cc", None), "rtt_s": getattr(args, "rtt_s", None),
            "shallow_limit_packets": (bl.shallow_limit_packets(
                args.uplink_mbps or 50.0, args.rtt_s) if getattr(args, "rtt_s", None) else None),
            "mix": args.mix, "load": args.load,
            "seeds": [s["seed"] for s in per_seed], "jobs_per_seed": len(per_seed[0]["mix"]),
            "scale": args.scale, "bytes_lo": args.bytes_lo, "host_tcp": args.host_tcp,
            "uplink_mbps": getattr(args, "uplink_mbps", None),
            "order": [s.get("order") for s in per_seed],
            "compute": getattr(args, "compute", "share"),
            "start": getattr(args, "start", "cold"),
            "compute_s": (round(profile_compute_s(), 4)
                          if getattr(args, "compute", "share") == "profile" else None),
            "load_definition": "offered bytes/s over the bottleneck uplink (per direction) "
                               "/ its capacity",
            "bucket_edges_bytes": list(edges), "wall_time_s": round(wall, 1), "modes": modes}


def bounds(per_seed: list[dict]) -> dict | None:
    """The committed checker's verdicts (:mod:`mininet_tests.check_bounds`, issue 47's
    bounds) on this run's per-seed figures; None where the run lacks the modes they need."""
    try:
        what, found = check_bounds.verdicts(per_seed)
    except ValueError:
        return None
    return {**what, "verdicts": [asdict(v) for v in found], "met": all(v.met for v in found)}


def markdown(summary: dict, args) -> str:
    m = summary["modes"]
    lines = [f"# Priority rules, {summary['mix']} mix, load {summary['load']}, seeds "
             f"{summary['seeds']} ({summary['jobs_per_seed']} jobs each), medians over seeds, "
             f"host TCP {summary['host_tcp']}", "",
             f"Load: {summary.get('load_definition', 'offered bottleneck load')}. Compute per "
             f"batch: {_compute_text(summary)}. PS processes: {summary.get('start', 'cold')} start.",
             "",
             "| mode | mean JCT (s) | vs off (paired) | fluid model mean JCT (s) | model vs off | "
             "p95 JCT (s) | p95 vs off | makespan (s) | mean slowdown | bottleneck Mbit/s "
             "(push/pull) | vs off |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for mode in m:
        x = m[mode]
        lines.append(f"| {mode} | {x['mean_jct_s']} | {x['mean_jct_change_pct']} % | "
                     f"{x['fluid_mean_jct_s']} | {x['fluid_mean_jct_change_pct']} % | "
                     f"{x['p95_jct_s']} | {x['p95_jct_change_pct']} % | {x['makespan_s']} | "
                     f"{x['mean_slowdown']} | {x['bottleneck_mbps']} ({x['bottleneck_push_mbps']}/"
                     f"{x['bottleneck_pull_mbps']}) | {x['bottleneck_vs_off_pct']} % |")
    buckets = sorted({b for x in m.values() for b in x["slowdown_by_bucket"]},
                     key=["small", "medium", "large"].index)
    lines += ["", "Mean slowdown (JCT / the job's ideal time alone) by size bucket "
              f"(bytes per direction; edges {summary['bucket_edges_bytes']}):", "",
              "| mode | " + " | ".join(buckets) + " |", "|---|" + "---|" * len(buckets)]
    for mode in m:
        lines.append(f"| {mode} | " + " | ".join(str(m[mode]["slowdown_by_bucket"].get(b))
                                                 for b in buckets) + " |")
    lines += ["", "Mean network slowdown ((JCT - the job's start-up) / ideal time alone) by "
              "size bucket, and mean JCT without start-up:", "",
              "| mode | " + " | ".join(buckets) + " | mean JCT - start-up (s) | median start-up (s) |",
              "|---|" + "---|" * (len(buckets) + 2)]
    for mode in m:
        nb = m[mode].get("network_slowdown_by_bucket", {})
        lines.append(f"| {mode} | " + " | ".join(str(nb.get(b)) for b in buckets)
                     + f" | {m[mode].get('mean_network_jct_s')} | {m[mode].get('startup_s')} |")
    lines += ["", "Predicted (the exchange model, sluice_common.exchange, before the runs) vs "
              "measured mean JCT, CPU wait "
              "(run-queue delay / JCT, mean over jobs), queueing delay at the shaped egresses, "
              "TCP retransmissions and timeouts (hosts, per run), vs the best baseline "
              f"({summary.get('best_baseline')}, paired):", "",
              "| mode | predicted (s) | measured (s) | CPU wait share | datapath CPU wait "
              "(s/s) | egress queue ms (push/pull) | TCP retrans / timeouts | vs best baseline |",
              "|---|---|---|---|---|---|---|---|"]
    for mode in m:
        x = m[mode]
        q = x.get("queue_delay_ms") or {}
        lines.append(f"| {mode} | {x.get('predicted_mean_jct_s')} | {x['mean_jct_s']} | "
                     f"{x.get('cpu_wait_share')} | {x.get('datapath_cpu_wait_per_s')} | "
                     f"{q.get('push')}/{q.get('pull')} | "
                     f"{x.get('tcp_retrans_segs')} / {x.get('tcp_timeouts')} | "
                     f"{x.get('mean_jct_vs_best_baseline_pct')} % |")
    lines += ["", "Where the model misses (median over seeds): its mean JCT's error, and "
              "that error split into the start-up (arrival to the first batch after kv.init's, "
              "the scheduling slot included) and the rest:", "",
              "| mode | model error | mean start-up predicted / measured (s) | start-up error (s) "
              "| rest error (s) |", "|---|---|---|---|---|"]
    for mode in m:
        x = m[mode]
        lines.append(f"| {mode} | {x.get('model_error_pct')} % | "
                     f"{x.get('predicted_mean_startup_s')} / {x.get('mean_startup_s')} | "
                     f"{x.get('model_startup_error_s')} | {x.get('model_rest_error_s')} |")
    parts = ("startup_s", "compute_s", "transfer_s", "cpu_wait_s", "tcp_rto_s", "network_wait_s",
             "jct_s")
    lines += ["", "Time split (s), mean job of each size bucket:", "",
              "| mode | bucket | " + " | ".join(parts) + " |", "|---|---|" + "---|" * len(parts)]
    for mode in m:
        for b, split in (m[mode].get("time_split_mean_s") or {}).items():
            lines.append(f"| {mode} | {b} | " + " | ".join(str(split.get(k)) for k in parts) + " |")
    lines += ["", f"default rule: {summary['default_rule']}; best baseline: "
              f"{summary.get('best_baseline')}; best mode: {summary.get('best_mode')}; host TCP "
              f"{summary.get('host_cc')}; idle RTT {summary.get('rtt_s')} s; wall time "
              f"{summary['wall_time_s']:.0f} s", ""]
    if summary.get("bounds"):
        lines += [_bounds_text(summary["bounds"]), ""]
    return "\n".join(lines)


def _bounds_text(b: dict) -> str:
    """The checker's verdicts, one line each."""
    lines = [f"Bounds (mininet_tests.check_bounds), {b['rule']} against {b['best_baseline']}:"]
    lines += [f"- {check_bounds.Verdict(**v).line()}" for v in b["verdicts"]]
    return "\n".join(lines)


def _compute_text(summary: dict) -> str:
    if summary.get("compute") == "profile":
        return (f"{PROFILE_MODEL} at batch {BATCH_SIZE} on the {PROFILE} profile, "
                f"{summary.get('compute_s')} s (communication-dominated)")
    return "a communication share of 30-70 % per job"


def plot(summary: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = summary["modes"]
    names = list(m)
    fig, axes = plt.subplots(1, 2, figsize=(10 + 0.8 * max(0, len(names) - 4), 3.8))
    x = range(len(names))
    axes[0].bar([i - 0.2 for i in x], [m[k]["mean_jct_change_pct"] or 0 for k in names], 0.4,
                label="measured", color="#3b75af")
    axes[0].bar([i + 0.2 for i in x], [m[k]["fluid_mean_jct_change_pct"] or 0 for k in names],
                0.4, label="fluid model", color="#bbbbbb")
    axes[0].axhline(0, color="black", linewidth=0.8)
    axes[0].set_xticks(list(x), names, rotation=30, fontsize=7)
    axes[0].set_ylabel("mean JCT vs off, % (paired, median)")
    axes[0].legend()
    buckets = sorted({b for v in m.values() for b in v["slowdown_by_bucket"]},
                     key=["small", "medium", "large"].index)
    w = 0.8 / len(names)
    for k, mode in enumerate(names):
        nb = m[mode].get("network_slowdown_by_bucket") or m[mode]["slowdown_by_bucket"]
        axes[1].bar([i + k * w - 0.4 + w / 2 for i in range(len(buckets))],
                    [nb.get(b) or 0 for b in buckets], w, label=mode)
    axes[1].set_xticks(list(range(len(buckets))), buckets)
    axes[1].set_ylabel("mean slowdown, start-up excluded")
    axes[1].legend(fontsize=8)
    fig.suptitle(f"{summary['mix']}, load {summary['load']}, seeds {summary['seeds']}")
    fig.tight_layout()
    fig.savefig(out / "heavy_tail.png", dpi=100)
    plt.close(fig)
