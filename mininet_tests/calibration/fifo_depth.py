"""The short FIFO's depth, chosen by a sweep: the heavy-tail mix with priority off on FIFOs
of a few packets up to the deep FIFO's 200 (``off``), at one load and congestion control;
the depth with the lowest mean JCT (median over seeds) is the best a FIFO can do there,
and so the depth the ``off-shallow`` baseline should have.

    sudo .venv/bin/sluice calibrate fifo-depth --depths 5,11,25,50,100 --load 0.7 \\
        --seed-list 1,2,3,4,5 [--cc machine|bbr|cubic] --out DIR [--json OUT] \\
        [--record "RESULTS SECTION"]

``--record`` enters the best depth in ``mininet_fabric/data/fifo_depths.yaml`` (with the
section of bench/RESULTS.md that holds the sweep's table), so the heavy-tail experiment's
``off-shallow`` has it at this load and congestion control; ``--from DIR`` reads a finished
sweep's summary again (no fabric).

Each depth is registered as a baseline ``fifo-N`` for the run (mininet_fabric.baselines:
the deep FIFO's tree with N packets a level), so the heavy-tail experiment runs it as a
mode like any other, paired per seed with ``off``. Takes the fabric lock; about 100 s a
mode and seed on this machine. Use tuning seeds, never a verdict's.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from mininet_fabric import baselines as bl
from mininet_fabric import priority
from sluice_common.errors import InputError, read_user_text

DEEP = priority.LEAF_QUEUE_PACKETS


def register_depth(packets: int) -> str:
    """Register a FIFO of ``packets`` a level as the baseline ``fifo-N``; its name."""
    bl.register(bl.Baseline(
        f"fifo-{packets}", f"a FIFO of {packets} packets per level (sweep)",
        tree=lambda intf, rate, levels, rtt, n=packets: priority.priority_tree(
            intf, rate, levels, leaf_limit=n),
        queue_packets=lambda rate, rtt, n=packets: n))
    return f"fifo-{packets}"


@contextlib.contextmanager
def depths_registered(depths):
    """The FIFOs of ``depths`` (packets) as baselines ``fifo-N`` while the block runs; those
    registered here are unregistered after, so no other reader sees them."""
    depths = list(dict.fromkeys(depths))
    added = [d for d in depths if f"fifo-{d}" not in bl.names()]
    for d in added:
        register_depth(d)
    try:
        yield [f"fifo-{d}" for d in depths]
    finally:
        for d in added:
            bl.unregister(f"fifo-{d}")


def mode_of(depth: int) -> str:
    return "off" if depth == DEEP else f"fifo-{depth}"


def table(summary: dict, depths: list[int]) -> list[dict]:
    """Per depth: mean JCT (median over seeds), its change against the deep FIFO paired per
    seed, p95 and the hosts' retransmissions (median over seeds)."""
    rows = []
    for depth in sorted(set(depths) | {DEEP}):
        m = summary["modes"].get(mode_of(depth))
        if m is None:
            raise ValueError(f"the run has no mode {mode_of(depth)!r}")
        rows.append({"depth_packets": depth, "mean_jct_s": m["mean_jct_s"],
                     "vs_deep_pct": m["mean_jct_change_pct"], "p95_jct_s": m["p95_jct_s"],
                     "tcp_retrans_segs": m.get("tcp_retrans_segs")})
    return rows


def best_depth(rows: list[dict]) -> int:
    """The depth with the lowest mean JCT (the deeper one on a tie: less loss)."""
    return min(rows, key=lambda r: (r["mean_jct_s"], -r["depth_packets"]))["depth_packets"]


def sweep(depths: tuple[int, ...], load: float, seeds: tuple[int, ...], cc: str, out: Path,
          record: str | None, from_dir: bool, json_out: str | None,
          data_file: Path | None = None) -> int:
    """Run the sweep into ``out`` (or read the finished one there, ``from_dir``), print the
    best depth; ``record``: enter it in the data file (``data_file``, default the shipped
    one), naming that RESULTS section."""
    from mininet_tests.calibration.report import figure, write_json
    from mininet_tests.heavy_tail.config import HeavyTailConfig
    from mininet_tests.heavy_tail.run import run

    depths = tuple(sorted(set(depths) - {DEEP}))
    summary_file = out / "summary.json"
    with depths_registered(depths) as modes:
        config = HeavyTailConfig(load=load, seeds=seeds, baselines="all",
                                 only_modes=tuple(modes), cc=cc, out=out)
        rc = 0 if from_dir else run(config)
    summary = read_summary(summary_file)
    missing = [mode_of(d) for d in depths + (DEEP,) if mode_of(d) not in summary["modes"]]
    if missing:
        raise InputError(str(summary_file), f"no mode {', '.join(missing)}: the sweep there "
                         "ran other depths", field="modes")
    rows = table(summary, list(depths))
    best = best_depth(rows)
    if record:
        from mininet_fabric.fifo_depths import SweptDepth, record_depth

        path = record_depth(SweptDepth(summary["load"], summary["host_cc"], best, record,
                                       tuple(summary["seeds"])), data_file)
        print(f"recorded {best} packets at load {summary['load']}, {summary['host_cc']} in {path}")
    figures = [figure(f"mean JCT, FIFO of {r['depth_packets']} packets", r["mean_jct_s"],
                      "s", note=f"({r['vs_deep_pct']:+.1f} % vs {DEEP}, paired)")
               for r in rows]
    print(f"best FIFO depth at load {load}, cc {summary['host_cc']}: {best} packets")
    write_json(json_out, {"rows": rows, "best_depth_packets": best, "figures": figures,
                          "load": load, "cc": cc, "seeds": list(config.seeds)})
    return rc


SUMMARY_FIELDS = ("modes", "load", "host_cc", "seeds")


def read_summary(path: Path) -> dict:
    """A heavy-tail run's ``summary.json``; one that does not parse or lacks a field the
    sweep reads is an InputError naming the file and the field."""
    try:
        summary = json.loads(read_user_text(path))
    except json.JSONDecodeError as err:
        raise InputError(str(path), f"not JSON: {err}") from None
    if not isinstance(summary, dict):
        raise InputError(str(path), "not a run's summary (a mapping)")
    for name in SUMMARY_FIELDS:
        if name not in summary:
            raise InputError(str(path), "missing", field=name)
    return summary
