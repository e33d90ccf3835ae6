"""The sluice policy's ``price_priority``: off unless set, one option
from the policy to every command that builds it (``--price-priority``), and a decision it
changes: a small job the fabric's rule puts first spans the racks that the fair share
would have priced out."""

from __future__ import annotations

import json

import pytest

from sluice_common.placement import Placement
from job_scheduler.core.policies import make_policy
from job_scheduler.core.policies.base import candidate_costs
from job_scheduler.service.app import ServiceConfig
from job_scheduler.service.policy_step import make_policy_step
from job_scheduler.simulation.compare import SimulateConfig
from job_scheduler.simulation.simulator import Simulator
from sluice.cli import main
from sluice_common.errors import InputError
from sluice_common.jobspec import JobSpec
from support.sim_jobs import job
from topologies import load_topology

TWO_RACK = load_topology("two-rack")
# a: PS in rack 1, 7 workers in rack 2 (7 flows on both uplinks); b: all in rack 1.
# Free: one GPU on h1 (rack 1), one on h3 (rack 2): 2 GPUs span the racks.
PINS = (Placement("a", ("h1",), ("h3",) * 3 + ("h4",) * 4),
        Placement("b", ("h2",), ("h1",) * 3 + ("h2",) * 4))
# small and exchange-heavy enough that 2 GPUs pay only at a good bandwidth
SMALL = JobSpec(name="c", model="resnet50", dataset_size=20_000, epochs=1, batch_size=512,
                max_gpus=2)


def _started(price_priority):
    """The sluice policy deciding for SMALL while a and b run (uplink priority on)."""
    pol = make_policy("sluice", price_priority=price_priority)
    jobs = [job("a", max_gpus=7, m=80_000), job("b", max_gpus=7, m=80_000), SMALL]
    sim = Simulator(TWO_RACK, jobs, pol, slot=1.0, priority="remaining")
    sim.waiting = dict.fromkeys(range(3))
    sim.start(0, PINS[0])
    sim.start(1, PINS[1])
    pol.on_arrival(sim, 2)
    return sim, pol


def test_pricing_with_the_rule_moves_the_gpu_count():
    off_sim, off = _started(None)
    on_sim, on = _started("remaining")
    costs_off, places = candidate_costs(off_sim, 2, 2, off.placer)
    costs_on, _ = candidate_costs(on_sim, 2, 2, on.placer, price_priority="remaining")
    model, p2 = off_sim.models[2], places[2]
    assert off_sim.placement_flows(p2)                   # 2 GPUs cross the racks
    # fair share: 1 PS * 5,000 / (7 + 1) flows; on top of the rule: the path alone
    assert costs_off[2] == pytest.approx(model.C(2, 625.0))
    assert costs_on[2] == pytest.approx(model.C(2, off_sim.base_bandwidth(p2)))
    assert costs_on[1] == costs_off[1] == model.cost1
    assert costs_on[2] < model.cost1 < costs_off[2]      # the case the pricing changes
    off.step(off_sim)
    on.step(on_sim)
    assert off_sim.running[2].n == 1
    assert on_sim.running[2].n == 2


def test_off_by_default_everywhere():
    assert make_policy("sluice").price_priority is None
    assert SimulateConfig(workload="x", policies=("sluice",)).price_priority is None
    assert ServiceConfig(db="s.db", policy="sluice").price_priority is None
    est_step = make_policy_step("sluice", TWO_RACK, _started(None)[0].estimator,
                                price_priority="attained")
    assert est_step.policy.price_priority == "attained"


def test_bad_values_name_the_option():
    with pytest.raises(InputError, match="price_priority.*unknown rule 'fastest'"):
        make_policy("sluice", price_priority="fastest")
    with pytest.raises(InputError, match="price_priority.*'lyapunov' does not price"):
        make_policy("lyapunov", price_priority="remaining")
    with pytest.raises(ValueError, match="price_priority.*leave out"):
        SimulateConfig(workload="x", policies=("fifo",), price_priority="remaining")
    with pytest.raises(InputError, match="price_priority"):
        ServiceConfig(db="s.db", policy="fifo", price_priority="remaining")


def _exit_code(argv) -> int:
    """What the command exits with: argparse's own errors raise SystemExit(2), a
    config's come back as 2."""
    try:
        return main(argv)
    except SystemExit as err:
        return err.code


def test_the_flag_on_the_command_lines(capsys, tmp_path):
    args = ["simulate", "--workload", "proteus-small-dispersed", "--policies", "sluice,fifo",
            "--priority", "remaining", "--json"]
    assert main(args + ["--price-priority", "remaining"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["price_priority"] == "remaining" and set(out["policies"]) == {"sluice", "fifo"}
    db = str(tmp_path / "x.db")
    for argv, says in (
            (args + ["--price-priority", "fastest"], "unknown rule 'fastest'"),
            (args + ["--price-priority", "remaining", "--policies", "fifo"], "leave out"),
            (["scheduler", "--policy", "fifo", "--price-priority", "remaining", "--db", db],
             "policy 'fifo' does not price"),
            (["scheduler", "--policy", "sluice", "--price-priority", "x", "--db", db],
             "unknown rule 'x'")):
        assert _exit_code(argv) == 2
        assert "argument --price-priority: " in (err := capsys.readouterr().err)
        assert says in err
