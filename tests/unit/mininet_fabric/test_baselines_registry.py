"""A new network baseline is one registry entry: it reaches every user of the axis
(the experiment's modes and their pairing, the egress tree, the exchange model's queue,
the model check's disciplines, the verdict's baselines and the command line's help)."""

from __future__ import annotations

import contextlib
import io

import pytest

from mininet_fabric import baselines as bl
from mininet_fabric import priority


@pytest.fixture
def tiny():
    """A FIFO of 5 packets per level, registered for the test only."""
    entry = bl.register(bl.Baseline(
        "tiny-fifo", "a FIFO of 5 packets per level (test)",
        tree=lambda intf, rate, levels, rtt: priority.priority_tree(intf, rate, levels,
                                                                    leaf_limit=5),
        queue_packets=lambda rate, rtt: 5))
    yield entry
    bl.unregister(entry.name)
    assert "tiny-fifo" not in bl.names()


def test_the_builtin_baselines_come_from_the_registry():
    assert bl.names()[:3] == ("off", "off-shallow", "off-fair")
    with pytest.raises(ValueError, match="baseline must be one of"):
        bl.baseline("no-such")
    with pytest.raises(ValueError, match="no '\\+'"):
        bl.register(bl.Baseline("a+b", "", tree=lambda *a: [], queue_packets=lambda r, t: 1))


def test_a_registered_baseline_reaches_the_modes_and_the_tree(tiny):
    from mininet_tests.heavy_tail.summary import modes_for
    from sluice_common.rank_rules import DEFAULT_RULE, names

    modes = modes_for("all")
    assert "tiny-fifo" in modes and f"{DEFAULT_RULE}+tiny-fifo" in modes
    assert bl.split_mode(f"{DEFAULT_RULE}+tiny-fifo", names()) == (DEFAULT_RULE, "tiny-fifo")
    lines = bl.egress_tree("tiny-fifo", "s1-eth1", 12.0)
    assert any("limit 5" in line for line in lines)
    assert lines != bl.egress_tree("off", "s1-eth1", 12.0)


def test_a_registered_baseline_reaches_the_exchange_model(tiny):
    from mininet_tests.heavy_tail.predict import buffer_bytes, model_jobs
    from mininet_tests.heavy_tail.mix import MixJob

    capacity = 1.5e6
    assert buffer_bytes("tiny-fifo", capacity, 0.001) == 5 * bl.MTU_BYTES
    mix = [MixJob(f"j{k}", 0.2 * k, 3, 600_000, 0.9, 0.0042) for k in range(4)]
    shallow = model_jobs(mix, capacity, "tiny-fifo", 0.001)[0]
    deep = model_jobs(mix, capacity, "off", 0.001)[0]
    assert set(shallow) == set(deep) and shallow != deep   # the queue depth reached the model


def test_a_registered_baseline_reaches_the_checks_and_the_help(tiny):
    from bench.fabric import check_exchange
    from mininet_tests import check_bounds, experiment_priority
    from sluice_common.rank_rules import DEFAULT_RULE

    # the model check compares a measured run under the new discipline with its model
    mix = check_exchange.scenarios()["two"]
    jobs = {j.name: {"jct_s": 0.0, "iteration_s": 1.0} for j in mix}
    run = {"jobs": jobs, "load": 1.0, "tcp": {"retrans_segs": 0, "timeouts": 0}}
    rows = check_exchange.compare({"runs": {"tiny-fifo/two": run, "off/two": run},
                                   "rtt_s": 0.001})
    by_disc = {r["discipline"]: r for r in rows}
    assert set(by_disc) == {"tiny-fifo", "off"}
    assert by_disc["tiny-fifo"]["model_s"] != by_disc["off"]["model_s"]
    # the verdict wants every registered baseline: a run without it has no passing verdict
    seed = {"seed": 1, "modes": {m: {"mean_jct_s": 1.0} for m in ("off", "off-shallow",
                                                                   "off-fair", DEFAULT_RULE)}}
    first = check_bounds.verdicts([seed], registered_seeds=[1])[1][0]
    assert not first.met and "tiny-fifo" in first.detail
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        experiment_priority.main(["--mix", "heavy-tail", "--help"])
    assert "tiny-fifo: a FIFO of 5 packets per level (test)" in " ".join(out.getvalue().split())
