"""How much the Proteus reproduction depends on choices the paper does not pin down here.

lyapunov / single (average JCT, geometric mean over seeds) on two-rack for each scenario,
varying one thing at a time from the defaults (caps="paper", N = 8, exchange inside one
host charged at the host's intra_bw, 100 Gbit/s, shared by the job's flows):

  * N, the one max_gpus of every job: 4, 8 (default), 16;
  * caps="mixed" (1/2/4/8 per job);
  * in-host exchange free (``Simulator(in_host=False)``);
  * in-host exchange over a host bus of B Gbit/s shared by the job's workers on the
    host, B = 200 and 50 (the default is 100, ``topologies.model.DEFAULT_INTRA_BW_MBPS``);
  * the paper's eq. 5 taken literally: every worker of an n > 1 job gets the nominal
    10 Gbit/s to itself wherever it is placed, in-host included, no sharing.

The what-ifs subclass the Simulator here; nothing in job_scheduler changes.

    .venv/bin/python -m bench.scheduler.bench_proteus_sensitivity [--seeds 0,1,2,3,4]
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

from job_scheduler.core.policies import make_policy
from job_scheduler.simulation.simulator import Simulator
from job_scheduler.simulation.workloads import SCENARIOS, load_workload
from topologies import load_topology
import os

from bench import harness

# The figures of this bench in bench/RESULTS.md use the P100-derived profile, the GPU class
# the Proteus scenarios are sized for (the commands' default is the measured H100);
# SLUICE_PROFILE=h100 (or a profile file) re-runs them on another.
os.environ.setdefault("SLUICE_PROFILE", "p100")

SLOT = 10.0


def bus_simulator(bus_gbps: float):
    """A Simulator whose single-host placements pay Comm over a shared host bus of
    ``bus_gbps`` (the fabric model otherwise)."""
    class BusSimulator(Simulator):
        def __init__(self, *args, **kw):
            super().__init__(*args, in_host=False, **kw)

        def base_bandwidth(self, placement):
            bw = super().base_bandwidth(placement)
            n = len(placement.worker_hosts)
            return bus_gbps * 1000.0 / n if n > 1 and math.isinf(bw) else bw
    return BusSimulator


class FreeHostSimulator(Simulator):
    """Exchange inside one host costs nothing (``in_host=False``)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, in_host=False, **kw)


class PaperEq5Simulator(Simulator):
    """Eq. 5 as printed: a fixed per-worker bandwidth for every n > 1, never shared."""

    def base_bandwidth(self, placement):
        if len(placement.worker_hosts) <= 1:
            return math.inf
        return self.estimator.nominal_bw_mbps

    def live_bandwidth(self, placement, flows=None, base=None, joining=True):
        return self.base_bandwidth(placement) if base is None else base


def ratio(topo, sim_class, jobs_for_seed, seeds) -> float:
    rs = []
    for seed in seeds:
        jobs = jobs_for_seed(seed)
        ly = sim_class(topo, jobs, make_policy("lyapunov"), slot=SLOT).run().avg_jct
        single = sim_class(topo, jobs, make_policy("single"), slot=SLOT).run().avg_jct
        rs.append(ly / single)
    return statistics.geometric_mean(rs)


def main() -> int:
    ap = harness.parser(__doc__, json_out=False)
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--topology", default="two-rack")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    topo = load_topology(args.topology)

    def paper(sc, n=None):
        def jobs(seed):
            out = load_workload(sc, seed=seed)
            return out if n is None else [replace(j, max_gpus=n) for j in out]
        return jobs

    settings = [
        ("default (caps=paper, N=8, host bus 100)", Simulator, lambda sc: paper(sc)),
        ("in-host exchange free", FreeHostSimulator, lambda sc: paper(sc)),
        ("N = 4", Simulator, lambda sc: paper(sc, 4)),
        ("N = 16", Simulator, lambda sc: paper(sc, 16)),
        ("caps=mixed", Simulator, lambda sc: (lambda s: load_workload(sc, seed=s, caps="mixed"))),
        ("host bus 200 Gbit/s", bus_simulator(200), lambda sc: paper(sc)),
        ("host bus 50 Gbit/s", bus_simulator(50), lambda sc: paper(sc)),
        ("eq. 5 literal, 10 Gbit/s per worker", PaperEq5Simulator, lambda sc: paper(sc)),
    ]
    print(f"lyapunov / single on {topo.name}, seeds {seeds}, slot {SLOT:g} s, defaults V/eps/k")
    print(f"{'setting':<38} " + " ".join(f"{s.replace('proteus-', ''):>19}" for s in SCENARIOS))
    for label, sim_class, jobs_for in settings:
        cells = [ratio(topo, sim_class, jobs_for(sc), seeds) for sc in SCENARIOS]
        print(f"{label:<38} " + " ".join(f"{c:>19.2f}" for c in cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
