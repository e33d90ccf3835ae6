"""Where the exchange model misses, by job size: each stored heavy-tail run's jobs
predicted one by one (the model of ``mininet_tests.experiment_heavy_tail``, the shipped
constants, from each seed's mix alone) against their measured JCT, start-up and time
split, per mode and size bucket, over every seed.

    .venv/bin/python -m bench.fabric.model_by_bucket DIR_OR_PER_SEED_JSON [...] [--modes off,off-fair]

A reading of stored results: no fabric, a few seconds. A directory is an experiment's
``--out`` (its ``per_seed.json`` and ``summary.json``); a file is a stored
``*-per-seed.json`` beside its ``*-summary.json``. Prints, per mode and bucket, the mean
measured and predicted JCT and their difference, the measured start-up, the wait for the
link (``network_wait_s``) and retransmission timeouts, and each bucket's share of the
mode's total error (which jobs the mean's error comes from).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mininet_tests import experiment_heavy_tail as ht


BUCKET_ORDER = {"small": 0, "medium": 1, "large": 2}


def sources(path: str) -> tuple[list[dict], dict]:
    """(per-seed records, summary) of an experiment directory or a stored per-seed file."""
    p = Path(path)
    if p.is_dir():
        return (json.loads((p / "per_seed.json").read_text()),
                json.loads((p / "summary.json").read_text()))
    summary = p.with_name(p.name.replace("per-seed", "summary"))
    return json.loads(p.read_text()), json.loads(summary.read_text())


def by_bucket(per_seed: list[dict], summary: dict, modes: list[str] | None = None) -> dict:
    """mode -> bucket -> sums over every job of every seed (``n``, measured and predicted
    JCT, start-up, network wait, TCP timeouts)."""
    _, capacity = ht.experiment_topology(summary.get("uplink_mbps"))
    out: dict[str, dict[str, dict[str, float]]] = {}
    for seed in per_seed:
        mix = ht.stored_mix(seed)
        for mode, m in seed["modes"].items():
            if modes and mode not in modes:
                continue
            predicted, _ = ht.model_jobs(mix, capacity, mode, summary.get("rtt_s"))
            for name, bucket in m["bucket_of"].items():
                split = m["time_split"][name]
                a = out.setdefault(mode, {}).setdefault(bucket, dict.fromkeys(
                    ("n", "measured", "predicted", "startup", "network_wait", "tcp_rto"), 0.0))
                a["n"] += 1
                a["measured"] += m["jct_s"][name]
                a["predicted"] += predicted[name]
                a["startup"] += split["startup_s"]
                a["network_wait"] += split["network_wait_s"]
                a["tcp_rto"] += split["tcp_rto_s"]
    return out


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="experiment directories or stored *-per-seed.json")
    ap.add_argument("--modes", help="comma-separated modes (default: every mode stored)")
    args = ap.parse_args(argv)
    modes = args.modes.split(",") if args.modes else None
    for path in args.paths:
        per_seed, summary = sources(path)
        print(f"\n{path} (load {summary.get('load')}, {len(per_seed)} seeds, host TCP "
              f"{summary.get('host_cc') or summary.get('host_tcp')})\n")
        print("\n".join(table(by_bucket(per_seed, summary, modes))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
