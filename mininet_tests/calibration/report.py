"""What ``sluice calibrate exchange`` says about its fit: the table of points with the
model's time and residual, the contention and start-up figures, the figure lines and the
``--json`` output, and the provenance written beside the constants."""

from __future__ import annotations

import json
import os
import platform
import statistics
from pathlib import Path

from mininet_tests.calibration.runs import BULK_JOBS, SHARED, UPLINK_MBPS, path_rates


def figure(name: str, value: float, unit: str = "", note: str = "") -> dict:
    """Print ``FIGURE name: value unit note`` and return it as a dict (the benchmarks'
    figure lines, so a calibration's output reads like theirs)."""
    print(f"FIGURE {name}: {value:.4g}{' ' + unit if unit else ''}{' ' + note if note else ''}",
          flush=True)
    return {"name": name, "value": value, "unit": unit, "note": note}


def write_json(dest: str | None, data) -> None:
    """The JSON output: nothing when ``dest`` is None, stdout for "-", else the file."""
    if dest is None:
        return
    text = json.dumps(data, indent=1)
    if dest == "-":
        print(text, flush=True)
    else:
        Path(dest).write_text(text + "\n")


def report_fit(m: dict, c, pred: list[float], qf: float, many, start, measured_shared: float):
    """Print the fit point by point and its contention and start-up figures; the
    figure lines and each point's relative residual (rows get their ``model_s``)."""
    from mininet_tests.heavy_tail.fabric_setup import experiment_topology
    from sluice_common.exchange import batch_exchange_s

    rows, shared = m["rows"], m["shared"]
    print("| point | path | bytes | keys | window | measured ms | model ms | residual ms | "
          "residual % | CPU wait s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r, p in zip(rows, pred):
        res = r["measured_s"] - p
        r["model_s"] = round(p, 5)
        print(f"| {r['point']} | {r['path_name']} | {r['bytes']} | {r['keys']} | {r['window']} | "
              f"{1000 * r['measured_s']:.1f} | {1000 * p:.1f} | {1000 * res:+.1f} | "
              f"{100 * res / r['measured_s']:+.1f} | {r['cpu_wait_s']} |")
    nbytes, keys, window = SHARED
    alone = batch_exchange_s(nbytes, keys, path_rates(experiment_topology(UPLINK_MBPS)[0],
                                                      "h1", "h3"), window, c)
    print(f"\ncontention: two cross-rack jobs ({nbytes} B, {keys} keys) at once, one FIFO class: "
          f"measured {1000 * measured_shared:.1f} ms per batch (model alone {1000 * alone:.1f} ms), "
          f"CPU wait {[v['cpu_wait_s'] for v in shared.values()]} s -> queue_fill {qf:.3f}")
    if start:
        bulk = [v["iteration_s"] for n, v in m["driver"].items() if n.startswith("cal-bulk")]
        print(f"{BULK_JOBS} cross-rack jobs at once (run loop): median iteration "
              f"{1000 * statistics.median(bulk):.1f} ms -> queue_fill_per_sender {many:.3f}")
        print(f"start-up: alone {start['startup_s']:.3f} s beyond one batch (samples "
              f"{start['startup_alone_samples']}); {len(start['startup_probe_extra'])} probes "
              f"among {BULK_JOBS} bulk jobs: {start['startup_probe_extra']} s more, model "
              f"wait {1000 * start['startup_wait_s']:.1f} ms a round -> startup_rounds "
              f"{start['startup_rounds']:.2f}; priority on, alone: "
              f"{start['startup_priority_samples']} s more -> startup_priority_s "
              f"{start['startup_priority_s']:.3f}")
    else:
        print("start-up: not measured in this input (no run-loop points); those constants unchanged")
    figures = [figure(f"exchange {k}", getattr(c, k))
               for k in ("overhead_s", "per_key_s", "hop_s", "efficiency", "local_Bps",
                         "startup_s", "startup_rounds", "startup_priority_s",
                         "queue_fill_per_sender", "loss_timeouts", "fair_round_bytes",
                         "priority_cost")]
    figures.append(figure("exchange queue_fill", c.queue_fill))
    rel = [abs(r["measured_s"] - r["model_s"]) / r["measured_s"] for r in rows]
    figures.append(figure("fit median |residual|", 100 * statistics.median(rel), "%"))
    figures.append(figure("fit worst |residual|", 100 * max(rel), "%"))
    print(f"load average before {m['load_before']}, after {m['load_after']}; "
          f"{m['wall_s']:.0f} s", flush=True)
    return figures, rel


SOURCE_ROOT = Path(__file__).resolve().parents[2]
"""The checkout (or the site-packages folder) the calibration's code runs from."""


def source_commit(root: Path = SOURCE_ROOT) -> str:
    """The commit the calibration runs at (``+dirty`` with uncommitted changes: the
    constants carry the date and commit of their calibration); installed from a package
    (``root`` is no git checkout of its own), the package's version instead."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True,
                              cwd=root, check=True).stdout.strip()
    try:
        # a repository that merely holds site-packages is not the code's checkout
        if Path(git("rev-parse", "--show-toplevel")).resolve() == root.resolve():
            head = git("rev-parse", "HEAD")
            dirty = git("status", "--porcelain", "--untracked-files=no")
            return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"sluice {version('sluice')} (installed, no git checkout)"
    except PackageNotFoundError:
        return "unknown (no git checkout, no installed package)"


def provenance_of(m: dict, start, rel: list[float], measured_shared: float,
                  refit_from: str | None, queues: dict | None = None) -> dict:
    """Where the constants come from: command, machine, fabric, load, residuals."""
    from mininet_fabric.priority import LEAF_QUEUE_PACKETS
    from mininet_tests.heavy_tail.fabric_setup import machine_cc

    provenance = {"command": "sluice calibrate exchange --write",
                  "date": m["started"], "commit": source_commit(), "machine": f"{platform.node()} ({os.cpu_count()} cores)",
                  "fabric": f"two-rack, uplinks {UPLINK_MBPS:g} Mbit/s, host links "
                            f"{2 * UPLINK_MBPS:g} Mbit/s, HTB FIFO {LEAF_QUEUE_PACKETS} packets, "
                            f"TCP {machine_cc()} (the machine's), no controller (one class)",
                  "load_average_before": m["load_before"], "load_average_after": m["load_after"],
                  "points": len(m["rows"]) + 1,
                  "median_abs_residual_pct": round(float(100 * statistics.median(rel)), 1),
                  "worst_abs_residual_pct": round(float(100 * max(rel)), 1),
                  "shared_measured_s": round(float(measured_shared), 4)}
    if start:
        provenance.update(startup_alone_samples_s=start["startup_alone_samples"],
                          startup_probe_extra_s=start["startup_probe_extra"],
                          startup_probe_wait_s=round(start["startup_wait_s"], 4),
                          startup_priority_samples_s=start["startup_priority_samples"],
                          many_jobs=BULK_JOBS, many_median_iteration_s=round(statistics.median(
                              v["iteration_s"] for n, v in m["driver"].items()
                              if n.startswith("cal-bulk")), 4))
    if queues:
        provenance["queue_stage"] = {
            q: {k: r[k] for k in ("constant", "value", "clamped", "probes_measured_s",
                                  "model_without_term_s", "model_with_term_s", "load")}
            for q, r in queues.items()}
        provenance["queue_stage_rtt_s"] = m["queues"]["rtt_s"]
    if refit_from:
        provenance["refit_from"] = refit_from
    return provenance
