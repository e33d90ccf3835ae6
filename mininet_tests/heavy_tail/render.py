"""The heavy-tail experiment's report: ``experiment.md`` (tables per mode, size bucket and
time split, the checker's verdicts) and ``heavy_tail.png``."""

from __future__ import annotations

from pathlib import Path

from mininet_tests import check_bounds
from mininet_tests.heavy_tail.predict import BATCH_SIZE, PROFILE, PROFILE_MODEL


def markdown(summary: dict) -> str:
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
    lines = [f"Bounds (mininet_tests.check_bounds), {b['rule']} against "
             f"{b['best_baseline'] or 'the hardest baseline (cannot judge)'}:"]
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

