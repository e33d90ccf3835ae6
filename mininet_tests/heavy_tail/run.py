"""Running the heavy-tail experiment: for each seed its mix runs once per mode on one
controller and fabric (the mode order rotates with the seed), the model's prediction made
before the runs; then the summary, the report and the plot. ``resummarize`` reads a
finished run's reports again (no fabric)."""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

from end_to_end.report import write_report
from end_to_end.run import environment, warm_processes
from end_to_end.runloop import RealTimeRun
from end_to_end.run_options import RunOptions
from job_scheduler.core.estimator import Estimator, nominal_bandwidth
from mininet_fabric import baselines as bl
from mininet_tests.check_bounds import rule_of
from mininet_tests import fluid
from mininet_tests.heavy_tail import fabric_setup as fs
from mininet_tests.heavy_tail import host_tagging
from mininet_tests.heavy_tail.config import HeavyTailConfig, RunFacts
from mininet_tests.heavy_tail.measure import Sampler, bucket_edges, measure
from mininet_tests.heavy_tail.mix import MixJob, heavy_tail_mix
from mininet_tests.heavy_tail.predict import (PIAS_MODEL_RULE, SLOT_S, alone_s, fluid_jobs,
                                              model_prediction, model_provenance,
                                              profile_compute_s, same_start_mix)
from mininet_tests.heavy_tail.render import markdown, plot
from mininet_tests.heavy_tail.summary import modes_for, summarize
from sluice_common import rank_rules
from sluice_common.rank_rules import DEFAULT_RULE

HOSTS = fs.PS_HOSTS + fs.WORKER_HOSTS


@dataclass
class _Bench:
    """What every run of one experiment shares."""
    config: HeavyTailConfig
    topology: object
    capacity: float
    modes: tuple[str, ...]
    fabric: object
    client: object
    runner: object
    rtt_s: float
    out: Path
    started: float
    cc: str | None = None             # the hosts' congestion control (the model's FIFO fill)
    runs: int = 0                     # runs so far: picks each run's ports

    @property
    def egress(self) -> dict[str, tuple[str, float]]:
        return {"push": (self.fabric.intf("tor2", "spine1"), self.capacity),
                "pull": (self.fabric.intf("tor1", "spine1"), self.capacity)}


def run(config: HeavyTailConfig) -> int:
    out = config.out or Path(f"runs/experiment-{config.mix}-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    cc = fs.resolve_cc(config.cc)
    # off-shallow has the depth the sweep chose at this load and congestion control
    with bl.swept_shallow(config.load, cc) as swept:
        return _run(config, out, cc, swept)


def _run(config: HeavyTailConfig, out: Path, cc: str, swept) -> int:
    topology, capacity = fs.experiment_topology(config.uplink_mbps)
    modes = modes_for(config.baselines, config.only_modes)
    cc_before = fs.machine_cc()
    per_host = (3 if config.mix == "same-start" else config.jobs) + 1
    started = time.monotonic()
    per_seed: list[dict] = []
    # a host-tagging baseline (pias) needs switches that keep the hosts' DSCP; the other
    # modes' hosts tag nothing (DSCP 0), so for them trust changes nothing
    trust = ("--trust-host-dscp",) if host_tagging.needs_host_trust(modes) else ()
    with environment(topology, fs.topology_arg(topology, out), out, rank=DEFAULT_RULE,
                     controller_args=trust, host_sysctls=fs.host_sysctls(config.host_tcp),
                     tcp_congestion=cc) as (fabric, client), \
            _pool(topology, fabric, config.start, per_host) as runner:
        rtt_s = fs.measure_rtt(fabric, fs.WORKER_HOSTS[0], fs.PS_HOSTS[0])
        bench = _Bench(config, topology, capacity, modes, fabric, client, runner, rtt_s,
                       out, started, cc=cc)
        print(f"experiment: modes {', '.join(modes)}; host TCP {cc}; idle RTT "
              f"{1000 * rtt_s:.2f} ms (shallow FIFO "
              f"{bl.baseline('off-shallow').queue_packets(capacity * 8 / 1e6, rtt_s)} packets, "
              f"{'the sweep in ' + swept.sweep if swept else 'no sweep at this load and cc'})",
              file=sys.stderr, flush=True)
        for k, seed in enumerate(config.seeds):
            per_seed.append(_run_seed(bench, k, seed))
            (out / "per_seed.json").write_text(json.dumps(per_seed, indent=1))
    facts = RunFacts(cc=cc, rtt_s=rtt_s, wall_s=time.monotonic() - started,
                     shallow_sweep=swept.sweep if swept else None)
    if fs.machine_cc() != cc_before:     # hosts set theirs per namespace; never the machine's
        raise RuntimeError(f"the machine's TCP congestion control changed from {cc_before} "
                           f"to {fs.machine_cc()} during the run")
    summary = summarize(per_seed, config, facts, bucket_edges(config.lo_bytes))
    print(_write(out, summary))
    ok = all(m["finished"] == m["jobs"] for s in per_seed for m in s["modes"].values())
    return 0 if ok else 1


def _pool(topology, fabric, start: str, per_host: int):
    """warm: ``per_host`` PS processes per host that imported MXNet before the jobs arrive,
    so a job's start-up (~25 s cold on a loaded host with two cores, longer than most jobs'
    transfers) does not hide the network. The pool holds a whole mode's processes (a job
    is 3: ps-lite scheduler and server on its PS host, a worker on another) and is refilled
    only between modes, so no MXNet import runs while jobs are measured; cold: None."""
    if start != "warm":
        return nullcontext(None)
    return warm_processes(topology, fabric, "emulated", refill=False, per_host=per_host,
                          timeout_s=900)


def _mix(config: HeavyTailConfig, seed: int, capacity: float) -> list[MixJob]:
    if config.mix == "same-start":
        return same_start_mix(capacity)
    compute_s = profile_compute_s() if config.compute == "profile" else None
    return heavy_tail_mix(seed, config.load, capacity, jobs=config.jobs, scale=config.scale,
                          bytes_lo=config.bytes_lo, compute_s=compute_s)


def _run_seed(bench: _Bench, k: int, seed: int) -> dict:
    """Every mode on one seed's mix, the model's prediction made before the runs."""
    mix = _mix(bench.config, seed, bench.capacity)
    modes = bench.modes
    order = modes[k % len(modes):] + modes[:k % len(modes)]
    seed_out = {"seed": seed, "order": list(order),
                "mix": [asdict(j) | {"alone_s": round(alone_s(j, bench.capacity), 3)}
                        for j in mix], "modes": {}}
    workload = host_tagging.workload_of(bench.config)
    predicted = {m: model_prediction(mix, bench.capacity, m, bench.rtt_s, workload, bench.cc)
                 for m in modes}
    for mode in order:
        print(f"experiment: seed {seed} ({k + 1}/{len(bench.config.seeds)}), mode {mode}, "
              f"{time.monotonic() - bench.started:.0f} s so far, load average "
              f"{os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
        seed_out["modes"][mode] = _run_mode(bench, mix, f"seed{seed}-{mode}", mode)
        seed_out["modes"][mode].update(predicted[mode])
    _add_fluid(seed_out, mix, bench.capacity, levels=8, workload=workload)
    return seed_out


def _run_mode(bench: _Bench, mix: list[MixJob], name: str, mode: str) -> dict:
    """One run of ``mix`` under ``mode`` (rule and baseline), measured."""
    rule, baseline = bl.split_mode(mode, rank_rules.names())
    fabric, runner = bench.fabric, bench.runner
    fabric.install_priority_tree(partial(bl.egress_tree, baseline, rtt_s=bench.rtt_s))
    if runner is not None:
        # every mode starts with a full, idle pool, and nothing refills it while the jobs
        # run (no MXNet import competes with them for the CPU)
        runner.fill()
        runner.wait_ready(timeout=900)
    load_before = os.getloadavg()[0]
    if rule is not None:
        bench.client.set_rank(rule, wait=True)
    specs, overrides = fs.specs_and_overrides(mix)
    options = RunOptions(priority=rule is not None, slot_s=SLOT_S,
                         port_base=fs.run_ports(bench.runs, len(mix)),
                         worker_overrides=overrides, job_timeout_s=bench.config.job_timeout_s)
    bench.runs += 1
    tcp_before = fs.tcp_counters(fabric, HOSTS)
    ovs_before, ovs_t0 = fs.datapath_wait_ns(), time.monotonic()
    sampler = Sampler(bench.egress, [fabric.host(h).pid for h in HOSTS])
    host_rules = bl.host_rules(baseline, host_tagging.workload(bench.config)) \
        if bl.baseline(baseline).host_rules is not None else None
    with host_tagging.tagging(fabric, HOSTS, host_rules):
        result = RealTimeRun(bench.topology, specs, fs.placement_step(mix),
                             Estimator(nominal_bw_mbps=nominal_bandwidth(bench.topology)),
                             fabric, bench.client, bench.out / name, options,
                             policy_name="fixed", runner=runner, sampler=sampler).run()
    tcp_after = fs.tcp_counters(fabric, HOSTS)
    ovs_after, ovs_dt = fs.datapath_wait_ns(), time.monotonic() - ovs_t0
    write_report(result, bench.out / name)
    measured = measure(result, mix, bench.capacity, bucket_edges(bench.config.lo_bytes))
    measured.update(
        loadavg=[round(load_before, 1), round(os.getloadavg()[0], 1)],
        queue_delay_ms=sampler.queue_delay_ms(),
        tcp={k: tcp_after[k] - tcp_before[k] for k in tcp_after},
        # the userspace datapath's threads' run-queue delay per second of run: CPU wait
        # the jobs' packets see, which their own processes' misses
        datapath_cpu_wait_per_s=(round((ovs_after - ovs_before) / 1e9 / ovs_dt, 3)
                                 if ovs_before is not None and ovs_after is not None else None))
    if result["interrupted"]:
        raise KeyboardInterrupt
    return measured


def _add_fluid(seed_out: dict, mix: list[MixJob], capacity: float, levels: int | None = None,
               workload: bl.Workload | None = None):
    """The fluid model's mean JCT of every mode run on this seed, with off's start-up
    (pias: the attained rule with PIAS's thresholds, as the exchange model has it)."""
    fjobs = fluid_jobs(mix, capacity)
    startup = seed_out["modes"]["off"]["startup_s"]
    extra = {} if levels is None else {"levels": levels}
    for mode, figures in seed_out["modes"].items():
        rule, baseline = bl.split_mode(mode, rank_rules.names())
        if bl.baseline(baseline).host_rules is not None and workload is not None:
            rule, extra["attained_thresholds"] = PIAS_MODEL_RULE, bl.pias_thresholds(workload)
        pred = fluid.simulate(fjobs, rule or "off", capacity, dt=0.02, startup_s=startup,
                              **extra)
        extra.pop("attained_thresholds", None)
        figures["fluid_mean_jct_s"] = round(fluid.mean(pred.values()), 3)


def _write(out: Path, summary: dict) -> str:
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    text = markdown(summary)
    (out / "experiment.md").write_text(text)
    plot(summary, out)
    return text


def stored_mix(seed: dict) -> list[MixJob]:
    """A stored seed's mix (``per_seed.json``) as MixJobs (its ``alone_s`` left out)."""
    return [MixJob(**{k: v for k, v in j.items() if k != "alone_s"}) for j in seed["mix"]]


KEPT = ("loadavg", "predicted_mean_jct_s", "predicted_mean_startup_s", "queue_delay_ms", "tcp",
        "datapath_cpu_wait_per_s")


def resummarize(out: Path, config: HeavyTailConfig, merge: list[Path] = (),
                repredict: bool = False) -> dict:
    """Rebuild the measurements, the fluid predictions and the summary of a finished
    experiment directory from its per-run ``report.json`` files (no fabric).

    ``merge``: earlier experiment directories (same mix, load and fabric) whose seeds are
    added to ``out``'s, each re-measured from its own reports where they are kept (a
    seed stored without them keeps its measurements). ``repredict``: the model's
    ``predicted_mean_jct_s`` computed again with the current constants (from the mix
    alone, never from the measurements); the summary says so. A run whose ``off-shallow``
    had a swept depth is re-read with that depth."""
    out = Path(out)
    old = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    if not old.get("shallow_depth_sweep"):
        return _resummarize(out, config, merge, repredict, old)
    with bl.swept_shallow(old["load"], old["host_cc"]):
        return _resummarize(out, config, merge, repredict, old)


def _resummarize(out: Path, config: HeavyTailConfig, merge, repredict: bool, old: dict) -> dict:
    # how the runs were made, not how they are re-read
    config = replace(config, uplink_mbps=old.get("uplink_mbps"),
                     host_tcp=old.get("host_tcp", config.host_tcp),
                     compute=old.get("compute", "share"), start=old.get("start", "cold"))
    _, capacity = fs.experiment_topology(config.uplink_mbps)
    edges = bucket_edges(config.lo_bytes)
    sources = [(out, seed) for seed in json.loads((out / "per_seed.json").read_text())]
    for extra in merge:
        sources += [(Path(extra), s) for s in json.loads((Path(extra) / "per_seed.json").read_text())]
    seen = [seed["seed"] for _, seed in sources]
    if len(set(seen)) != len(seen):
        raise ValueError(f"a seed appears twice in {out} and {list(merge)}: {sorted(seen)}")
    # what the run registered, when its summary recorded it; merged seeds are all registered
    registered = old.get("registered_seeds") if not merge else None
    config = replace(config, seeds=tuple(registered or sorted(seen)),
                     rule_queue=old.get("rule_queue", config.rule_queue))
    per_seed = []
    for where, seed in sorted(sources, key=lambda x: x[1]["seed"]):
        mix = stored_mix(seed)
        for mode in seed["modes"]:
            report = where / f"seed{seed['seed']}-{mode}" / "report.json"
            if report.exists():
                kept = {k: v for k, v in seed["modes"][mode].items() if k in KEPT}
                seed["modes"][mode] = measure(json.loads(report.read_text()), mix, capacity,
                                              edges) | kept
            if repredict:
                seed["modes"][mode].pop("predicted_startup_s", None)   # an older model's
                seed["modes"][mode].update(model_prediction(
                    mix, capacity, mode, old.get("rtt_s"), host_tagging.workload_of(config),
                    old.get("host_cc")))
        _add_fluid(seed, mix, capacity, workload=host_tagging.workload_of(config))
        per_seed.append(seed)
    (out / "per_seed.json").write_text(json.dumps(per_seed, indent=1))
    facts = RunFacts(cc=old.get("host_cc"), rtt_s=old.get("rtt_s"),
                     wall_s=old.get("wall_time_s", 0.0),
                     shallow_sweep=old.get("shallow_depth_sweep"))
    summary = summarize(per_seed, config, facts, edges, rule_of(old))
    if repredict or "predictions" in old:
        summary["predictions"] = model_provenance() if repredict else old["predictions"]
    _write(out, summary)
    return summary
