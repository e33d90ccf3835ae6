"""The heavy-tail experiment's command line: options -> a frozen HeavyTailConfig, once.

    .venv/bin/python -m mininet_tests.experiment_priority --mix heavy-tail --load 0.7 \\
        --seed-list 6,7,8,9,10 --baselines all [--cc bbr|cubic] --out DIR
    .venv/bin/python -m mininet_tests.heavy_tail ...          (the same)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mininet_fabric import baselines as bl
from mininet_tests.heavy_tail import config as cfg
from mininet_tests.heavy_tail.config import HeavyTailConfig


def _seed_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds are integers separated by commas, got {text!r}")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m mininet_tests.experiment_priority",
                                 description="Heavy-tailed PS jobs on one shaped rack uplink: "
                                             "priority off vs each ranking rule and baseline.")
    ap.add_argument("--mix", default="heavy-tail", choices=cfg.MIXES)
    ap.add_argument("--load", type=float, default=0.7, help="offered bottleneck load, in (0, 1)")
    ap.add_argument("--seeds", type=int, default=5, help="seeds 1..N")
    ap.add_argument("--seed-list", type=_seed_list, default=None,
                    help="explicit seeds, e.g. 6,7,8,9,10 (instead of --seeds)")
    ap.add_argument("--jobs", type=int, default=cfg.JOBS, help="jobs per seed")
    ap.add_argument("--scale", type=float, default=cfg.SCALE,
                    help="batches per job are 10..1000 times this")
    ap.add_argument("--bytes-lo", type=int, default=cfg.BYTES_LO,
                    help="bytes per batch are log-uniform on [this, 10x this]")
    ap.add_argument("--compute", default="profile", choices=cfg.COMPUTE,
                    help="compute per batch from the H100 profile (alexnet, b=32: "
                         "communication-dominated) or a 30-70 %% communication share")
    ap.add_argument("--start", default="warm", choices=cfg.STARTS,
                    help="PS processes pre-started with MXNet imported (warm) or started per "
                         "job (cold: ~25 s each here)")
    ap.add_argument("--uplink-mbps", type=float, default=None,
                    help="shape the rack uplinks at this rate (every link scaled alike; "
                         f"default: {cfg.UPLINK_MBPS:g} for heavy-tail, the topology's 50 "
                         "Mbit/s for same-start; 0: the topology's for both)")
    ap.add_argument("--job-timeout", type=float, default=400.0)
    ap.add_argument("--host-tcp", default="kernel", choices=tuple(cfg.HOST_TCP),
                    help="host TCP settings (mininet_tests.heavy_tail.config.HOST_TCP)")
    ap.add_argument("--baselines", default="none", choices=cfg.BASELINE_SETS,
                    help="all: also every registered baseline at the switch egresses "
                         f"({bl.help_text()}), and the default rule on each (RULE+BASELINE); "
                         "the summary names the best baseline (mininet_fabric/baselines.py)")
    ap.add_argument("--modes", default=None, metavar="MODE[,MODE...]",
                    help="run only these modes (off always), e.g. BASELINE,RULE+BASELINE "
                         "with --baselines all")
    ap.add_argument("--cc", default="machine", choices=cfg.CONGESTION_CONTROLS,
                    help="the hosts' TCP congestion control, set in each host's network "
                         "namespace (default: this machine's)")
    ap.add_argument("--rule-queue", default="off", metavar="QUEUE",
                    help="the queue the default rule's verdict is judged on, recorded in the "
                         "summary before the run (mininet_tests.check_bounds): one of "
                         f"{', '.join(bl.queues())}; default off, the deep FIFO")
    ap.add_argument("--resummarize", default=None, metavar="DIR",
                    help="recompute DIR's summary from its run reports")
    ap.add_argument("--merge", default=None, metavar="DIR[,DIR...]",
                    help="with --resummarize: add these experiment directories' seeds")
    ap.add_argument("--repredict", action="store_true",
                    help="with --resummarize: the model's predictions again, current constants")
    ap.add_argument("--out", default=None)
    return ap


def config_of(args: argparse.Namespace) -> HeavyTailConfig:
    """The namespace as the experiment's config (ValueError names what is wrong)."""
    if args.seeds < 1:
        raise ValueError("--seeds must be >= 1")
    uplink = args.uplink_mbps
    if uplink is None and args.mix == "heavy-tail":
        uplink = cfg.UPLINK_MBPS
    elif uplink == 0:
        uplink = None                    # the topology's own rate
    modes = tuple(m.strip() for m in (args.modes or "").split(",") if m.strip())
    return HeavyTailConfig(
        mix=args.mix, load=args.load,
        seeds=args.seed_list or tuple(range(1, args.seeds + 1)), jobs=args.jobs,
        scale=args.scale, bytes_lo=args.bytes_lo, compute=args.compute, start=args.start,
        uplink_mbps=uplink, job_timeout_s=args.job_timeout, host_tcp=args.host_tcp,
        baselines=args.baselines, only_modes=modes, cc=args.cc, rule_queue=args.rule_queue,
        out=Path(args.out) if args.out else None)


def main(argv: list[str] | None = None) -> int:
    from mininet_tests.heavy_tail import host_tagging
    from mininet_tests.heavy_tail.render import markdown
    from mininet_tests.heavy_tail.run import resummarize, run
    from mininet_tests.heavy_tail.summary import modes_for

    ap = parser()
    args = ap.parse_args(argv)
    try:          # bad options are refused here, before any fabric is built
        config = config_of(args)
        if host_tagging.needs_host_trust(modes_for(config.baselines, config.only_modes)):
            host_tagging.workload(config)    # pias needs the mix's size distribution
    except ValueError as err:
        ap.error(str(err))
    if args.resummarize:
        merge = [Path(d) for d in args.merge.split(",")] if args.merge else []
        print(markdown(resummarize(Path(args.resummarize), config, merge, args.repredict)))
        return 0
    return run(config)
