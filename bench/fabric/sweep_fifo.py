"""The short FIFO's depth, chosen by a sweep: the heavy-tail mix with priority off on FIFOs
of a few packets up to the deep FIFO's 200 (``off``), at one load and congestion control;
the depth with the lowest mean JCT (median over seeds) is the best a FIFO can do there,
and so the depth the ``off-shallow`` baseline should have.

    sudo .venv/bin/python -m bench.fabric.sweep_fifo --depths 5,11,25,50,100 --load 0.7 \\
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

from bench import harness
from mininet_fabric import baselines as bl
from mininet_fabric import priority

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


def main() -> int:
    from mininet_tests.heavy_tail.config import HeavyTailConfig
    from mininet_tests.heavy_tail.run import run

    ap = harness.parser(__doc__)
    ap.add_argument("--depths", default="5,11,25,50,100",
                    help="FIFO depths in packets per level (the deep FIFO's is always run)")
    ap.add_argument("--load", type=float, default=0.7)
    ap.add_argument("--seed-list", default="1,2,3,4,5")
    ap.add_argument("--cc", default="machine", choices=("machine", "bbr", "cubic"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--record", default=None, metavar="SECTION",
                    help="enter the best depth in mininet_fabric/data/fifo_depths.yaml, "
                         "naming the RESULTS section with this sweep")
    ap.add_argument("--from", dest="from_dir", action="store_true",
                    help="read the finished sweep in --out again (no fabric)")
    args = ap.parse_args()
    depths = sorted({int(d) for d in args.depths.split(",")} - {DEEP})
    modes = tuple(register_depth(d) for d in depths)
    out = Path(args.out)
    config = HeavyTailConfig(load=args.load, seeds=tuple(int(s) for s in args.seed_list.split(",")),
                             baselines="all", only_modes=modes, cc=args.cc, out=out)
    rc = 0 if args.from_dir else run(config)
    summary = json.loads((out / "summary.json").read_text())
    rows = table(summary, depths)
    best = best_depth(rows)
    if args.record:
        from mininet_fabric.fifo_depths import SweptDepth, record_depth

        path = record_depth(SweptDepth(summary["load"], summary["host_cc"], best, args.record,
                                       tuple(summary["seeds"])))
        print(f"recorded {best} packets at load {summary['load']}, {summary['host_cc']} in {path}")
    figures = [harness.figure(f"mean JCT, FIFO of {r['depth_packets']} packets", r["mean_jct_s"],
                              "s", note=f"({r['vs_deep_pct']:+.1f} % vs {DEEP}, paired)")
               for r in rows]
    print(f"best FIFO depth at load {args.load}, cc {summary['host_cc']}: {best} packets")
    harness.write_json(args.json, {"rows": rows, "best_depth_packets": best, "figures": figures,
                                   "load": args.load, "cc": args.cc, "seeds": config.seeds})
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
