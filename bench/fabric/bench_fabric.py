"""Fabric figures: `sluice fabric check` three times in a row (no cleanup between), build
and teardown times per topology, single-flow throughput vs the emulated rate, and the
priority ratio against a same-class baseline measured in the same run.

    sudo .venv/bin/python -m bench.fabric.bench_fabric [--runs 3] [--seconds 8] [--png PATH]

Needs root (the Mininet fabric). Prints one JSON object per measurement and a summary;
writes a PNG bar chart of the two flows' throughput, priority off vs on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench import harness
from bench.harness import ROOT as REPO

SLUICE = str(Path(sys.executable).parent / "sluice")


def check_runs(runs: int, seconds: float) -> list[dict]:
    out = []
    for i in range(runs):
        print(f"bench: sluice fabric check run {i + 1}/{runs}", file=sys.stderr, flush=True)
        proc = subprocess.run([SLUICE, "fabric", "check", "--topology", "two-rack", "--json",
                               "--single-flow", "--seconds", str(seconds)],
                              capture_output=True, text=True, cwd=REPO)
        result = json.loads(proc.stdout) if proc.stdout.strip() else {"stderr": proc.stderr[-500:]}
        result["rc"] = proc.returncode
        print(json.dumps(result), flush=True)
        out.append(result)
    return out


def build_times() -> dict:
    from mininet_fabric.fabric import Fabric
    from mininet_fabric.system import leftovers

    times = {}
    for name in ("two-rack", "leaf-spine", "fat-tree"):
        print(f"bench: build/teardown {name}", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        with Fabric(name, progress=False) as fab:
            t1 = time.monotonic()
            n = len(fab.net.switches), len(fab.net.hosts)
        t2 = time.monotonic()
        times[name] = {"switches": n[0], "hosts": n[1], "up_s": round(t1 - t0, 2),
                       "down_s": round(t2 - t1, 2), "leftovers": leftovers()}
    print(json.dumps({"build_times": times}), flush=True)
    return times


def priority_vs_baseline(seconds: float) -> dict:
    from mininet_fabric.fabric import Fabric
    from mininet_tests.priority_check import priority_check
    from topologies import priority_classes as pc

    with Fabric("two-rack", progress=False) as fab:
        print("bench: baseline (both flows unmarked)", file=sys.stderr, flush=True)
        base = priority_check(fab, seconds, high_level=pc.LEAST_URGENT,
                              low_level=pc.LEAST_URGENT)
        print("bench: priority (level 0 vs level 7)", file=sys.stderr, flush=True)
        prio = priority_check(fab, seconds)
    result = {"baseline": base, "priority": prio}
    print(json.dumps(result), flush=True)
    return result


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base, prio = result["baseline"], result["priority"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    labels = ["same class (baseline)", "DSCP 56 vs DSCP 0"]
    first = [base["high_mbps"], prio["high_mbps"]]
    second = [base["low_mbps"], prio["low_mbps"]]
    x = range(len(labels))
    ax.bar([i - 0.18 for i in x], first, width=0.36, label=f"{prio['high_flow']}")
    ax.bar([i + 0.18 for i in x], second, width=0.36, label=f"{prio['low_flow']}")
    ax.axhline(prio["bottleneck_mbit"], color="grey", ls="--", lw=1,
               label=f"{prio['bottleneck']} rate")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("throughput (Mbit/s)")
    ax.set_title(f"two-rack: two TCP flows into {prio['bottleneck']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"bench: wrote {path}", file=sys.stderr)


def main() -> int:
    ap = harness.parser(__doc__, json_out=False)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--png", type=Path, default=REPO / "bench" / "results" / "fabric_priority.png")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench: needs root (Mininet)", file=sys.stderr)
        return 1
    runs = check_runs(args.runs, args.seconds)
    times = build_times()
    pv = priority_vs_baseline(args.seconds)
    plot(pv, args.png)
    ok = sum(r.get("rc") == 0 for r in runs)
    print(f"\nsummary: fabric check passed {ok}/{len(runs)} runs in a row")
    for r in runs:
        if "loss" in r:
            print(f"  loss {r['loss']:.1f} %  ratio {r['priority_ratio']:.1f}  high "
                  f"{r['high_mbps']:.1f}  low {r['low_mbps']:.2f}  single flow "
                  f"{r['single_flow']['mbps']:.1f}/{r['single_flow']['nominal_mbps']:g} Mbit/s  "
                  f"total {r['total_s']:.1f} s")
    for name, t in times.items():
        print(f"  {name}: {t['switches']} switches {t['hosts']} hosts up {t['up_s']} s down "
              f"{t['down_s']} s leftovers {sum(map(len, t['leftovers'].values()))}")
    b, p = pv["baseline"], pv["priority"]
    print(f"  baseline same class: {b['high_mbps']:.1f} vs {b['low_mbps']:.1f} Mbit/s "
          f"(ratio {b['priority_ratio']:.2f}); priority: {p['high_mbps']:.1f} vs "
          f"{p['low_mbps']:.2f} (ratio {p['priority_ratio']:.1f})")
    return 0 if ok == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
