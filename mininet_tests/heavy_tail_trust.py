"""The simulator beside the heavy-tail verdict runs (``mininet_tests.experiment_priority
--mix heavy-tail``): each mode's measured mean JCT (the median over the run's seeds, as
its summary has it) against the simulator's (the median over the same seeds of its mean
JCT on each seed's mix, the mix the run recorded).

What the simulator represents of a mode (:mod:`mininet_tests.heavy_tail.simulate`: the
mix's jobs with their own bytes and compute per batch, each lone worker in rack 2
exchanging with its PS in rack 1 over both rack uplinks, the exchange model priced on the
emulated fabric): a ranking rule as strict priority on the rack uplinks
(``priority=RULE``); a FIFO egress, deep or shallow (the run's ``shallow_limit_packets``),
as the exchange pricing's FIFO waits; per-flow fair queueing (``off-fair``) as its fair
queue; PIAS's tagging at the hosts (``pias``) as the ``attained`` rule at the thresholds
PIAS derives from the mix's size distribution and load (the summary's ``scale``,
``bytes_lo`` and ``load``), on its FIFO leaves; the hosts' congestion control (the
summary's ``host_cc``) as how full the senders keep a FIFO. A run whose summary does not give the
fabric (``uplink_mbps``) or whose seeds do not record their mix cannot be simulated
either, nor ``pias`` in a run whose summary lacks the size distribution.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from end_to_end.trust_verdict import Comparison, finite

BOUND_PCT = 15.0

NOTE = ("The mix's jobs in the simulator (mininet_tests.heavy_tail.simulate): each seed's "
        "recorded mix, every job one worker in rack 2 with its PS in rack 1 and its own "
        "bytes and compute per batch, on the run's uplink rate, RTT and shallow depth; "
        "the exchange model's committed constants, nothing fitted to the runs.")
# what the simulator lacks of each switch queue or host scheme (None: it has a model)
QUEUE_GAPS = {
    "off": None,                  # a deep FIFO: the exchange pricing's FIFO waits
    "off-shallow": None,          # a shallow FIFO: the same, at the run's depth
    "off-fair": None,             # per-flow fair queueing: the pricing's fair queue
    "pias": None,                 # PIAS's host tagging: attained at its thresholds
}


def mode_gaps(mode: str) -> list[str]:
    """What the simulator has no model of in ``mode`` (empty: it has one)."""
    from mininet_fabric import baselines as bl
    from sluice_common import rank_rules

    try:
        _, queue = bl.split_mode(mode, rank_rules.names())
    except ValueError:
        return [f"a mode named {mode!r}"]
    if queue not in QUEUE_GAPS:
        return [f"the {queue!r} queue"]
    return [QUEUE_GAPS[queue]] if QUEUE_GAPS[queue] else []


def gap_reason(gaps: list[str]) -> str:
    return "the simulator has no model of " + "; nor of ".join(gaps)


def measured_mean_jct(per_seed: list, mode: str) -> tuple[float | None, str | None]:
    """The median over seeds of ``mode``'s mean JCT, or why there is none."""
    values, missing = [], []
    for record in per_seed:
        figure = ((record.get("modes") or {}).get(mode) or {}).get("mean_jct_s")
        if finite(figure):
            values.append(figure)
        else:
            missing.append(str(record.get("seed")))
    if missing:
        return None, f"seed(s) {', '.join(missing)} have no finite mean JCT for {mode}"
    return statistics.median(values), None


def fabric_of(summary: dict | None) -> tuple[dict | None, str | None]:
    """The run's fabric as its summary records it (``uplink_mbps``, ``rtt_s``,
    ``shallow_limit_packets``, ``host_cc`` and the mix's size distribution), or why not."""
    if not isinstance(summary, dict):
        return None, "the run has no summary to give its fabric (uplink_mbps)"
    rate = summary.get("uplink_mbps")
    if not finite(rate) or rate <= 0:
        return None, f"the run's summary gives no uplink rate (uplink_mbps {rate!r})"
    rtt, depth = summary.get("rtt_s"), summary.get("shallow_limit_packets")
    return {"uplink_mbps": float(rate), "rtt_s": rtt if finite(rtt) and rtt > 0 else None,
            "shallow_packets": depth if isinstance(depth, int) and depth > 0 else None,
            "workload": workload_of(summary),
            "host_cc": cc if isinstance(cc := summary.get("host_cc"), str) else None}, None


def workload_of(summary: dict):
    """The heavy-tail mix's per-connection size distribution at the run's load, what a
    host-tagging baseline derives its thresholds from; None when the summary lacks it."""
    from mininet_fabric import baselines as bl
    from mininet_tests.heavy_tail.connection_sizes import connection_sizes

    scale, lo, load = (summary.get(k) for k in ("scale", "bytes_lo", "load"))
    if summary.get("mix") != "heavy-tail" or not all(finite(v) and v > 0
                                                     for v in (scale, lo, load)):
        return None
    return bl.Workload(connection_sizes(float(scale), float(lo)), float(load))


def mix_of(record: dict):
    """A seed's recorded mix as MixJobs; ValueError when it records none."""
    from mininet_tests.heavy_tail.mix import MixJob

    mix = record.get("mix")
    if not isinstance(mix, list) or not mix:
        raise ValueError(f"seed {record.get('seed')} records no mix")
    fields = ("name", "arrival", "batches", "bytes_per_batch", "comm_fraction", "compute_s")
    try:
        return [MixJob(**{f: j[f] for f in fields}) for j in mix]
    except (KeyError, TypeError) as err:
        raise ValueError(f"seed {record.get('seed')}'s mix lacks {err}") from None


def simulated_mean_jct(per_seed: list, mode: str, fabric: dict) -> tuple[float | None, str | None]:
    """The median over seeds of the simulator's mean JCT of ``mode`` on each seed's mix,
    or why there is none."""
    from mininet_tests.heavy_tail.simulate import simulated_mean_jct as simulate

    values = []
    for record in per_seed:
        try:
            got = simulate(mix_of(record), mode, **fabric)
        except (ValueError, KeyError, TypeError, RuntimeError) as err:
            return None, f"the simulator could not run it ({err})"
        if got is None:
            what = (f"the {mode!r} queue" if fabric.get("workload") is not None else
                    f"{mode!r} without the mix's size distribution (the summary's scale, "
                    "bytes_lo, load)")
            return None, gap_reason([what])
        values.append(got)
    return statistics.median(values), None


def _label(path: Path) -> str:
    if path.is_dir():
        return path.name
    for tail in ("-summary.json", "-per-seed.json", "summary.json", "per_seed.json"):
        if path.name.endswith(tail) and path.name != tail:
            return path.name[:-len(tail)]
    return path.parent.name


def compare_run(path: str | Path) -> list[Comparison]:
    """One row per mode of the run (every mode any seed ran); a run that cannot be read
    is one ``cannot judge`` row."""
    from mininet_tests.check_bounds import load_run

    path = Path(path)
    label = _label(path)
    try:
        run = load_run(path)
    except (OSError, ValueError) as err:
        return [Comparison(label, "(every mode)", None, None, BOUND_PCT,
                           f"the run cannot be read ({err})")]
    named = (run.summary or {}).get("modes")
    modes = list(dict.fromkeys([m for s in run.per_seed for m in s["modes"]]
                               + list(named if isinstance(named, dict) else ())))
    fabric, no_fabric = fabric_of(run.summary)
    rows = []
    for mode in modes:
        measured, why = measured_mean_jct(run.per_seed, mode)
        gaps = mode_gaps(mode)
        reasons = [r for r in (why, gap_reason(gaps) if gaps else None, no_fabric) if r]
        simulated = None
        if not reasons:
            simulated, failed = simulated_mean_jct(run.per_seed, mode, fabric)
            reasons = [failed] if failed else []
        rows.append(Comparison(label, mode, measured, simulated, BOUND_PCT,
                               "; ".join(reasons) or None))
    return rows
