"""The heavy-tail experiment's modes and its summary over seeds: per mode the medians over
seeds and the changes paired per seed, the best baseline, and the committed checker's
verdict (:mod:`mininet_tests.check_bounds`)."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict

from mininet_fabric import baselines as bl
from mininet_tests import check_bounds
from mininet_tests.heavy_tail.config import HeavyTailConfig, RunFacts
from mininet_tests.heavy_tail.predict import profile_compute_s
from mininet_tests.fluid import modes as rule_modes
from sluice_common.rank_rules import DEFAULT_RULE, names as rule_names


def all_modes(rule: str = DEFAULT_RULE) -> tuple[str, ...]:
    """``baselines="all"``: every registered baseline (switch-egress queue discipline,
    mininet_fabric/baselines.py) as a mode too, and the default rule (``rule``: the run's)
    on each one but the deep FIFO ("<rule>+<baseline>"; the rule on ``off`` is the rule's
    own mode), but not on a baseline that schedules by itself (``pias``: its hosts tag the
    packets)."""
    others = [b for b in bl.names() if b != "off"]
    return ("off", *others, *rule_names(),
            *(f"{rule}+{b}" for b in bl.queues() if b != "off"))


def modes_for(baselines: str, only: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The experiment's modes: ``none`` -> off and the rules; ``all`` -> :func:`all_modes`.
    ``only`` keeps those of them, ``off`` always (every figure is paired against it), in
    the usual order."""
    if baselines not in ("none", "all"):
        raise ValueError(f"baselines must be none or all, got {baselines!r}")
    modes = all_modes() if baselines == "all" else rule_modes()
    if not only:
        return modes
    wanted = set(only) | {"off"}
    unknown = sorted(wanted - set(modes))
    if unknown:
        raise ValueError(f"modes {', '.join(unknown)} not among this run's modes "
                         f"({', '.join(modes)}; the baselines' modes need baselines 'all')")
    return tuple(m for m in modes if m in wanted)


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



def mode_summary(per_seed: list[dict], mode: str) -> dict:
    """One mode's figures: medians over seeds, and its changes against ``off`` paired per
    seed (the median of the per-seed changes)."""
    ms = [s["modes"][mode] for s in per_seed]
    offs = [s["modes"]["off"] for s in per_seed]
    buckets = sorted({b for m in ms for b in m["slowdown_by_bucket"]})
    return {
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


def summarize(per_seed: list[dict], config: HeavyTailConfig, facts: RunFacts, edges,
              rule: str = DEFAULT_RULE) -> dict:
    """The run's summary; ``rule``: the default rule the run was made with (a stored run
    made before the default changed is summarised with its own)."""
    modes = {mode: mode_summary(per_seed, mode)
             for mode in all_modes(rule) if mode in per_seed[0]["modes"]}
    best, combo = _against_best(per_seed, modes, rule)
    best_mode = min(modes, key=lambda m: modes[m]["mean_jct_s"] or math.inf)
    return {"default_rule": rule, "best_baseline": best,
            "default_rule_on_best_baseline": combo, "best_mode": best_mode,
            "rule_queue": config.rule_queue, "registered_seeds": list(config.seeds),
            "bounds": bounds(per_seed, config.seeds, config.rule_queue, rule),
            "host_cc": facts.cc, "rtt_s": facts.rtt_s,
            "shallow_limit_packets": (bl.baseline("off-shallow").queue_packets(
                config.uplink_mbps or 50.0, facts.rtt_s) if facts.rtt_s else None),
            "shallow_depth_sweep": facts.shallow_sweep,
            "mix": config.mix, "load": config.load,
            "seeds": [s["seed"] for s in per_seed], "jobs_per_seed": len(per_seed[0]["mix"]),
            "scale": config.scale, "bytes_lo": config.bytes_lo, "host_tcp": config.host_tcp,
            "uplink_mbps": config.uplink_mbps,
            "order": [s.get("order") for s in per_seed],
            "compute": config.compute, "start": config.start,
            "compute_s": (round(profile_compute_s(), 4) if config.compute == "profile" else None),
            "load_definition": "offered bytes/s over the bottleneck uplink (per direction) "
                               "/ its capacity",
            "bucket_edges_bytes": list(edges), "wall_time_s": round(facts.wall_s, 1),
            "modes": modes}


def _against_best(per_seed: list[dict], modes: dict, rule: str = DEFAULT_RULE
                  ) -> tuple[str, str]:
    """The best baseline run (lowest mean JCT) and the default rule on it; every mode's
    mean JCT and prediction against that baseline, paired per seed (added to ``modes``)."""
    baselines_run = [b for b in bl.names() if b in modes]
    best = min(baselines_run, key=lambda b: modes[b]["mean_jct_s"] or math.inf)
    # the rule runs on queues only: when pias (host tagging) is best, on the best queue
    best_queue = min((b for b in baselines_run if b in bl.queues()),
                     key=lambda b: modes[b]["mean_jct_s"] or math.inf)
    combo = f"{rule}+{best_queue}"
    if best_queue == "off" and rule in modes:  # the rule on the deep FIFO is the rule's mode
        modes[combo] = modes[rule]
    for mode, x in modes.items():         # paired per seed against the best baseline
        runs = [(s["modes"][mode if mode in s["modes"] else rule], s["modes"][best])
                for s in per_seed]
        x["mean_jct_vs_best_baseline_pct"] = _median(digits=1, values=(
            100 * (m["mean_jct_s"] / b["mean_jct_s"] - 1) for m, b in runs))
        x["predicted_vs_best_baseline_pct"] = _median(digits=1, values=(
            100 * (m["predicted_mean_jct_s"] / b["predicted_mean_jct_s"] - 1) for m, b in runs
            if m.get("predicted_mean_jct_s") and b.get("predicted_mean_jct_s")))
    return best, combo


def bounds(per_seed: list[dict], registered_seeds, rule_queue: str,
           rule: str = DEFAULT_RULE) -> dict | None:
    """The committed checker's verdicts (:mod:`mininet_tests.check_bounds`, the project's
    bounds) on this run's per-seed figures, the rule on the queue the run's configuration
    named; None where the run lacks the modes they need."""
    try:
        what, found = check_bounds.verdicts(per_seed, rule=rule, queue=rule_queue,
                                            registered_seeds=registered_seeds)
    except ValueError:
        return None
    return {**what, "verdicts": [asdict(v) for v in found], "met": all(v.met for v in found)}

