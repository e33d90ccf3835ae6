"""The demo's arms: what each runs, and --arms on the command line."""

import subprocess
import sys

import pytest

from end_to_end.arms import ALL_ARMS, ARMS, parse_arms
from end_to_end.demo_arms import arm_config, pool_sizes
from end_to_end.run import DEMO_JOBS, DEMO_TOPOLOGY, RunConfig
from sluice_common.errors import InputError


def test_the_four_arms():
    a, b, c, d = (ARMS[k] for k in "abcd")
    assert (a.policy, a.placement, a.priority) == ("fifo", "slurm", False)
    assert (b.policy, b.placement, b.priority) == ("fifo", "slurm", True)
    assert (c.policy, c.placement, c.priority) == ("lyapunov", None, False)
    assert (d.policy, d.placement, d.priority) == ("sluice", None, True)
    assert a.make_policy().placer.name == "slurm"
    config = arm_config(RunConfig(jobs=str(DEMO_JOBS), topology=DEMO_TOPOLOGY), b)
    assert (config.policy, config.placement, config.priority) == ("fifo", "slurm", "on")
    assert config.make_policy().placer.name == "slurm"


def test_arm_d_prices_placements_with_the_controller_s_rule_and_only_d_does():
    from job_scheduler.core.policies.sluice import SluicePolicy

    config = RunConfig(jobs=str(DEMO_JOBS), topology=DEMO_TOPOLOGY, rank="attained")
    for arm in ARMS.values():
        arm_run = arm_config(config, arm)
        policy = arm_run.make_policy()           # what the dry run and the pass build
        if arm.key == "d":
            assert arm_run.price_priority == "attained" == policy.price_priority
            assert isinstance(policy, SluicePolicy)
            assert ARMS["d"].make_policy("remaining").price_priority == "remaining"
        else:
            assert arm_run.price_priority is None
            assert getattr(policy, "price_priority", None) is None


def test_parse_arms_selects_in_order_and_refuses_unknown_or_empty():
    assert [a.key for a in parse_arms("d,a")] == ["a", "d"]
    assert [a.key for a in parse_arms(ALL_ARMS)] == list("abcd")
    assert [a.key for a in parse_arms(" B ")] == ["b"]
    for bad in ("a,e", "", "a,,b"):
        with pytest.raises(InputError) as err:
            parse_arms(bad)
        assert err.value.field == "arms"


@pytest.mark.parametrize("argv, says", [
    (["--arms", "a,z"], "argument --arms: unknown arm(s) 'z'"),
    (["--arms", "a", "--executor", "slurm"], "argument --arms: not with --executor slurm"),
    (["--seed", "3", "--executor", "slurm"], "argument --seed: not with --executor slurm"),
])
def test_bad_arms_exit_2_naming_the_flag(argv, says, tmp_path):
    out = tmp_path / "never"
    proc = subprocess.run([sys.executable, "-m", "sluice", "demo", "--out", str(out), *argv],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr
    assert not out.exists()                 # refused before anything started


def test_each_host_s_pool_holds_what_any_arm_takes_there_plus_a_spare():
    # per job: a ps-lite scheduler and each server on the first server host, each worker
    a = [{"ps_hosts": ["h1"], "worker_hosts": ["h1", "h1"]}]                 # h1: 4
    c = [{"ps_hosts": ["h2"], "worker_hosts": ["h1", "h2", "h3"]}]           # h1 1, h2 3, h3 1
    assert pool_sizes(["h1", "h2", "h3", "h4"], {"a": a, "c": c}) == \
        {"h1": 5, "h2": 4, "h3": 2, "h4": 1}


def test_each_arm_s_predictions_come_from_its_own_dry_run():
    from collections import Counter

    from end_to_end.arms import ARMS
    from end_to_end.demo_arms import predictions, workload
    from topologies import load_topology

    topology = load_topology(DEMO_TOPOLOGY)
    config = RunConfig(jobs=str(DEMO_JOBS), topology=DEMO_TOPOLOGY, compute="emulated")
    jobs = workload(topology, config, 47).jobs
    planned, predicted = predictions(topology, jobs, config, list(ARMS.values()))
    names = {j.name for j in jobs}
    for key in "abcd":
        assert {r["name"] for r in planned[key]} == names == set(predicted[key])
    by_name = {j.name: j for j in jobs}
    for r in planned["a"]:                       # Slurm's arms: every job at its request
        assert len(r["worker_hosts"]) == by_name[r["name"]].max_gpus
        assert r["ps_hosts"] == [min(r["worker_hosts"], key=[h.name for h in topology.hosts].index)]
    assert planned["a"] == planned["b"]                  # same scheduler
    # sluice's scheduler decides otherwise than Slurm's FIFO for this workload
    assert [Counter(r["worker_hosts"]) for r in planned["a"]] != \
        [Counter(r["worker_hosts"]) for r in planned["c"]]
