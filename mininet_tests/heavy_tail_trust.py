"""The simulator beside the heavy-tail verdict runs (``mininet_tests.experiment_priority
--mix heavy-tail``): each mode's measured mean JCT (the median over the run's seeds, as
its summary has it) against what the discrete-event simulator can say of that mode.

What the simulator represents of a mode (``job_scheduler.simulation.simulator`` with the
exchange model priced on the emulated fabric): a ranking rule as strict priority on the
rack uplinks (``priority=RULE``); a FIFO egress, deep or shallow, as the exchange
pricing's FIFO waits (``ExchangePricing.buffer_bytes``), its flows sharing the link
fairly. What it does not: per-flow fair queueing (``off-fair``), PIAS's tagging at the
hosts (``pias``), and, in every mode, the mix's jobs themselves: each is one worker in
rack 2 whose parameter server is in rack 1, moving its own bytes and computing its own
time per batch (``mininet_tests.heavy_tail.mix``), and the simulator gives a one-GPU job
no exchange at all (``Estimator.comm`` is 0 for one worker, and a lone worker's
placement has an unbounded bandwidth) and prices a job's bytes and compute from its
model. So every mode is ``cannot judge``, naming what the simulator lacks, until the
simulator prices a lone worker's exchange with a remote server and a job's own bytes and
compute per batch.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from end_to_end.trust_verdict import Comparison, finite

BOUND_PCT = 15.0

JOB_SHAPE = "the mix's jobs (one worker, its parameter server in the other rack)"
NOTE = ("The mix's jobs: each is one worker in rack 2 whose parameter server is in rack 1, "
        "with its own bytes and compute per batch; the simulator gives a one-GPU job no "
        "exchange (Comm(1) = 0, a lone worker's placement an unbounded bandwidth) and prices "
        "a job's bytes and compute from its model, so none of the modes can be simulated.")
# what the simulator lacks of each switch queue or host scheme (None: it has a model)
QUEUE_GAPS = {
    "off": None,                  # a deep FIFO: the exchange pricing's FIFO waits
    "off-shallow": None,          # a shallow FIFO: the same, at the run's depth
    "off-fair": "per-flow fair queueing (its uplinks are FIFO queues shared fairly)",
    "pias": "PIAS's tagging at the hosts (priority by the bytes a connection has sent)",
}


def mode_gaps(mode: str) -> list[str]:
    """What the simulator has no model of in ``mode``, the mix's jobs first."""
    from mininet_fabric import baselines as bl
    from sluice_common import rank_rules

    gaps = [JOB_SHAPE]
    try:
        _, queue = bl.split_mode(mode, rank_rules.names())
    except ValueError:
        return gaps + [f"a mode named {mode!r}"]
    if queue not in QUEUE_GAPS:
        return gaps + [f"the {queue!r} queue"]
    return gaps + ([QUEUE_GAPS[queue]] if QUEUE_GAPS[queue] else [])


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
    rows = []
    for mode in modes:
        measured, why = measured_mean_jct(run.per_seed, mode)
        reasons = [why] if why else []
        rows.append(Comparison(label, mode, measured, None, BOUND_PCT,
                               "; ".join(reasons + [gap_reason(mode_gaps(mode))])))
    return rows
