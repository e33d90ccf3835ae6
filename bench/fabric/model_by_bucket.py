"""Where the exchange model misses, by job size: each stored heavy-tail run's jobs
predicted one by one (the model of ``mininet_tests.heavy_tail.predict``, the shipped
constants, from each seed's mix alone) against their measured JCT, start-up and time
split, per mode and size bucket, over every seed.

    .venv/bin/python -m bench.fabric.model_by_bucket DIR_OR_PER_SEED_JSON [...] [--modes off,off-fair] [--phases]

A reading of stored results: no fabric, a few seconds. A directory is an experiment's
``--out`` (its ``per_seed.json`` and ``summary.json``); a file is a stored
``*-per-seed.json`` beside its ``*-summary.json``. Prints, per mode and bucket, the mean
measured and predicted JCT and their difference, the measured start-up, the wait for the
link (``network_wait_s``) and retransmission timeouts, and each bucket's share of the
mode's total error (which jobs the mean's error comes from); with ``--phases``, that
error split into the start-up and the rest of the job, each predicted against measured,
beside the measured rest's parts, and per mode the error of the mean JCT with only the
model's start-up or only its rest (which phase the model misses). Then, per mode, the
measured and predicted mean JCT and the model's error as the experiment's summary
gives them (medians over seeds), and the model's bound on the default rule on the best
baseline against it, all from the current model: how a
model change reads on runs made before it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from mininet_fabric import baselines as bl
from mininet_tests.heavy_tail import host_tagging
from mininet_tests.heavy_tail.config import HeavyTailConfig
from mininet_tests.heavy_tail.fabric_setup import experiment_topology
from mininet_tests.heavy_tail.predict import model_jobs
from mininet_tests.heavy_tail.run import stored_mix
from mininet_tests.check_bounds import rule_mode, rule_of


BUCKET_ORDER = {"small": 0, "medium": 1, "large": 2}


def sources(path: str) -> tuple[list[dict], dict]:
    """(per-seed records, summary) of an experiment directory or a stored per-seed file."""
    p = Path(path)
    if p.is_dir():
        return (json.loads((p / "per_seed.json").read_text()),
                json.loads((p / "summary.json").read_text()))
    summary = p.with_name(p.name.replace("per-seed", "summary"))
    return json.loads(p.read_text()), json.loads(summary.read_text())


def predict(per_seed: list[dict], summary: dict) -> list[dict[str, Predicted]]:
    """Per seed, mode -> the current model's jobs (``heavy_tail.predict.model_jobs`` from
    the seed's mix alone: each job's JCT and start-up): computed once for every table.
    ``off-shallow`` has the depth the run had (its sweep's, where the summary names one),
    and ``pias`` the thresholds of the run's mix and load, as the experiment predicted
    them."""
    _, capacity = experiment_topology(summary.get("uplink_mbps"))
    workload = host_tagging.workload_of(HeavyTailConfig(mix=summary.get("mix", "heavy-tail"),
                                                        load=summary["load"]))
    out = []
    with _run_depth(summary):
        for seed in per_seed:
            mix = stored_mix(seed)
            out.append({mode: Predicted(*model_jobs(mix, capacity, mode, summary.get("rtt_s"),
                                                    workload, summary.get("host_cc")))
                        for mode in seed["modes"]})
    return out


@dataclass(frozen=True)
class Predicted:
    """One mode's model on one seed: job -> JCT, job -> start-up (arrival to its first
    batch after ``kv.init``'s, as the experiment measures it)."""
    jct: dict[str, float]
    startup: dict[str, float]


def _run_depth(summary: dict):
    """The short FIFO's depth as the run had it: its sweep's, where it had one."""
    if summary.get("shallow_depth_sweep"):
        return bl.swept_shallow(summary["load"], summary["host_cc"])
    return contextlib.nullcontext()


def by_bucket(per_seed: list[dict], summary: dict, modes: list[str] | None = None,
              predicted: list[dict] | None = None) -> dict:
    """mode -> bucket -> sums over every job of every seed (``n``, measured and predicted
    JCT, measured and predicted start-up, and the measured split of the rest: transfer,
    network wait, TCP timeouts, CPU wait). ``predicted``: :func:`predict`'s, if made."""
    predicted = predicted or predict(per_seed, summary)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for seed, jobs in zip(per_seed, predicted):
        for mode, m in seed["modes"].items():
            if modes and mode not in modes:
                continue
            for name, bucket in m["bucket_of"].items():
                split = m["time_split"][name]
                a = out.setdefault(mode, {}).setdefault(bucket, dict.fromkeys(
                    ("n", "measured", "predicted", "startup", "predicted_startup",
                     "network_wait", "tcp_rto", "cpu_wait", "transfer"), 0.0))
                a["n"] += 1
                a["measured"] += m["jct_s"][name]
                a["predicted"] += jobs[mode].jct[name]
                a["startup"] += split["startup_s"]
                a["predicted_startup"] += jobs[mode].startup[name]
                a["cpu_wait"] += split["cpu_wait_s"]
                a["transfer"] += split["transfer_s"]
                a["network_wait"] += split["network_wait_s"]
                a["tcp_rto"] += split["tcp_rto_s"]
    return out


def by_mode(per_seed: list[dict], summary: dict, modes: list[str] | None = None,
            predicted: list[dict] | None = None) -> dict:
    """mode -> medians over seeds of the measured and the (current) model's mean JCT, the
    model's error, and the model's change against the best baseline (paired per seed)."""
    best = summary.get("best_baseline", "off")
    rows: dict[str, dict[str, list[float]]] = {}
    for seed, jobs in zip(per_seed, predicted or predict(per_seed, summary)):
        # the mean as the experiment's summary rounds it (model_prediction)
        predicted = {mode: round(statistics.fmean(p.jct.values()), 3) for mode, p in jobs.items()}
        for mode, m in seed["modes"].items():
            if modes and mode not in modes:
                continue
            r = rows.setdefault(mode, {"measured": [], "predicted": [], "error": [], "vs_best": []})
            r["measured"].append(m["mean_jct_s"])
            r["predicted"].append(predicted[mode])
            r["error"].append(100 * (predicted[mode] / m["mean_jct_s"] - 1))
            if best in predicted:
                r["vs_best"].append(100 * (predicted[mode] / predicted[best] - 1))
    return {mode: {"mean_jct_s": statistics.median(r["measured"]),
                   "predicted_mean_jct_s": statistics.median(r["predicted"]),
                   "model_error_pct": round(statistics.median(r["error"]), 1),
                   "predicted_vs_best_baseline_pct": (round(statistics.median(r["vs_best"]), 1)
                                                      if r["vs_best"] else None)}
            for mode, r in rows.items()}


def mode_table(rows: dict, best: str, summary: dict | None = None) -> list[str]:
    """The per-mode table, and the model's figure for the run's default rule (its
    ``summary``'s) on ``best``."""
    lines = ["| mode | measured mean JCT (s) | predicted (s) | model error | model vs "
             f"{best} |", "|---|---:|---:|---:|---:|"]
    for mode, x in rows.items():
        vs = x["predicted_vs_best_baseline_pct"]
        lines.append(f"| {mode} | {x['mean_jct_s']:.2f} | {x['predicted_mean_jct_s']:.2f} | "
                     f"{x['model_error_pct']:+.1f} % | "
                     f"{'' if vs is None else f'{vs:+.1f} %'} |")
    combo = rule_mode(best, rule_of(summary))
    bound = rows.get(combo, {}).get("predicted_vs_best_baseline_pct")
    if bound is not None:    # what the model expects; the verdict is check_bounds' alone
        lines += ["", f"The model's figure for `{combo}` against {best}: {bound:+.1f} %"]
    return lines


def table(out: dict) -> list[str]:
    lines = ["| mode | bucket | jobs | measured (s) | predicted (s) | error | share of the "
             "mode's error | start-up (s) | wait for the link (s) | TCP timeouts (s) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for mode, buckets in out.items():
        total = sum(a["predicted"] - a["measured"] for a in buckets.values())
        for bucket, a in sorted(buckets.items(), key=lambda x: BUCKET_ORDER.get(x[0], 9)):
            n = a["n"]
            err = a["predicted"] - a["measured"]
            lines.append(f"| {mode} | {bucket} | {n:.0f} | {a['measured'] / n:.2f} | "
                         f"{a['predicted'] / n:.2f} | {100 * err / a['measured']:+.0f} % | "
                         f"{100 * err / total:.0f} % | {a['startup'] / n:.2f} | "
                         f"{a['network_wait'] / n:.2f} | {a['tcp_rto'] / n:.2f} |")
    return lines


def phase_table(out: dict) -> list[str]:
    """Per mode and bucket, the model's error split into the start-up (arrival to the first
    batch after ``kv.init``'s) and the rest of the job (its batches and the end), each
    predicted against measured, with the measured rest's parts: which phase the model
    misses, in which mode."""
    lines = ["| mode | bucket | jobs | start-up measured (s) | predicted | error | rest "
             "measured (s) | predicted | error | rest: transfer | wait for the link | "
             "TCP timeouts | CPU wait |", "|---|---|---:|" + "---:|" * 10]
    for mode, buckets in out.items():
        for bucket, a in sorted(buckets.items(), key=lambda x: BUCKET_ORDER.get(x[0], 9)):
            n = a["n"]
            rest, rest_pred = a["measured"] - a["startup"], a["predicted"] - a["predicted_startup"]
            lines.append(
                f"| {mode} | {bucket} | {n:.0f} | {a['startup'] / n:.2f} | "
                f"{a['predicted_startup'] / n:.2f} | {_pct(a['predicted_startup'], a['startup'])} | "
                f"{rest / n:.2f} | {rest_pred / n:.2f} | {_pct(rest_pred, rest)} | "
                f"{a['transfer'] / n:.2f} | {a['network_wait'] / n:.2f} | "
                f"{a['tcp_rto'] / n:.2f} | {a['cpu_wait'] / n:.2f} |")
    return lines


def phase_errors(per_seed: list[dict], predicted: list[dict],
                 modes: list[str] | None = None) -> dict[str, dict[str, float]]:
    """mode -> the model's error of the mean JCT (the median over seeds of the signed
    error; the checker takes the median of its absolute value) with one phase measured
    and the other the model's: ``startup_only_pct`` the
    model's start-ups with the measured rest (what its start-up alone misses),
    ``rest_only_pct`` the measured start-ups with the model's rest. Runs stored without
    a per-job time split are left out."""
    rows: dict[str, dict[str, list[float]]] = {}
    for seed, jobs in zip(per_seed, predicted):
        for mode, m in seed["modes"].items():
            split = m.get("time_split") or {}
            p = jobs[mode]
            if (modes and mode not in modes) or not all(n in split for n in p.jct):
                continue
            measured_start = {n: split[n]["startup_s"] for n in p.jct}
            start_only = statistics.fmean(p.startup[n] + m["jct_s"][n] - measured_start[n]
                                          for n in p.jct)
            rest_only = statistics.fmean(measured_start[n] + p.jct[n] - p.startup[n]
                                         for n in p.jct)
            r = rows.setdefault(mode, {"startup_only_pct": [], "rest_only_pct": []})
            r["startup_only_pct"].append(100 * (start_only / m["mean_jct_s"] - 1))
            r["rest_only_pct"].append(100 * (rest_only / m["mean_jct_s"] - 1))
    return {mode: {k: round(statistics.median(v), 1) for k, v in r.items()}
            for mode, r in rows.items()}


def phase_error_table(rows: dict) -> list[str]:
    lines = ["| mode | error, the model's start-up only | error, the model's rest only |",
             "|---|---:|---:|"]
    lines += [f"| {mode} | {x['startup_only_pct']:+.1f} % | {x['rest_only_pct']:+.1f} % |"
              for mode, x in rows.items()]
    return lines


def _pct(predicted: float, measured: float) -> str:
    return f"{100 * (predicted / measured - 1):+.0f} %" if measured > 0 else "n/a"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="experiment directories or stored *-per-seed.json")
    ap.add_argument("--modes", help="comma-separated modes (default: every mode stored)")
    ap.add_argument("--phases", action="store_true",
                    help="also the error split into start-up and the rest of the job")
    args = ap.parse_args(argv)
    modes = args.modes.split(",") if args.modes else None
    for path in args.paths:
        per_seed, summary = sources(path)
        print(f"\n{path} (load {summary.get('load')}, {len(per_seed)} seeds, host TCP "
              f"{summary.get('host_cc') or summary.get('host_tcp')})\n")
        predicted = predict(per_seed, summary)
        buckets = by_bucket(per_seed, summary, modes, predicted)
        print("\n".join(table(buckets)))
        if args.phases:
            print()
            print("\n".join(phase_table(buckets)))
            print()
            print("\n".join(phase_error_table(phase_errors(per_seed, predicted, modes))))
        print()
        print("\n".join(mode_table(by_mode(per_seed, summary, modes, predicted),
                                    summary.get("best_baseline", "off"), summary)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
