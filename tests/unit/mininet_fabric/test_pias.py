"""The ``pias`` baseline: its host tagging rules (text), its place in the registry (a
mode of its own, never under a ranking rule), its model, and the experiment's apply /
remove of the rules, also when a run fails (a fake fabric records the commands)."""

import re

import pytest

from mininet_fabric import baselines as bl
from mininet_fabric import pias
from mininet_tests.heavy_tail import host_tagging
from mininet_tests.heavy_tail.config import HeavyTailConfig
from mininet_tests.heavy_tail.mix import MixJob
from topologies import priority_classes as pc

TH = (200_000, 500_000, 1_000_000)
WORKLOAD = host_tagging.workload(HeavyTailConfig(load=0.7))


def test_level_ranges_cover_every_byte_count_once():
    ranges = pias.level_ranges(TH)
    assert ranges == [(0, 199_999), (200_000, 499_999), (500_000, 999_999), (1_000_000, None)]
    for sent in (0, 1, 199_999, 200_000, 999_999, 1_000_000, 10**9):
        hits = [k for k, (lo, hi) in enumerate(ranges) if lo <= sent and (hi is None or sent <= hi)]
        assert hits == [pias.level_of_bytes(sent, TH)]


def test_the_rules_tag_both_directions_by_their_own_bytes_and_pure_acks_urgent():
    text = pias.tagging_rules(TH)
    lines = text.splitlines()
    assert lines[0] == "*mangle" and lines[-1] == "COMMIT"
    assert f"-A OUTPUT -p tcp -j {pias.CHAIN}" in lines
    for direction, ctdir in (("original", "ORIGINAL"), ("reply", "REPLY")):
        got = [(m.group(1), int(m.group(2))) for line in lines for m in [re.search(
            rf"--ctdir {ctdir} -m connbytes --connbytes-dir {direction} --connbytes-mode bytes "
            r"--connbytes (\S+) -j DSCP --set-dscp (\d+)$", line)] if m]
        assert got == [("0:199999", 56), ("200000:499999", 48), ("500000:999999", 40),
                       ("1000000", 32)]
    # the last rule wins: no payload -> most urgent
    assert lines[-2] == (f"-A {pias.CHAIN} -m length --length 0:80 -j DSCP --set-dscp "
                         f"{pc.dscp_of_level(pc.MOST_URGENT)}")


@pytest.mark.parametrize("bad", [(), (5, 5), (10, 5), (0, 5), tuple(range(1, 9))])
def test_bad_thresholds_are_refused(bad):
    if bad == ():
        assert pias.level_ranges(bad) == [(0, None)]
        return
    with pytest.raises(ValueError):
        pias.level_ranges(bad)


def test_pias_is_a_mode_but_not_a_queue_for_the_rules():
    from mininet_tests.heavy_tail.summary import modes_for
    from sluice_common.rank_rules import DEFAULT_RULE, names

    RANK_RULES = names()

    assert "pias" in bl.names() and "pias" not in bl.queues()
    modes = modes_for("all")
    assert "pias" in modes and f"{DEFAULT_RULE}+pias" not in modes
    assert bl.split_mode("pias", RANK_RULES) == (None, "pias")
    with pytest.raises(ValueError, match="BASELINE one of"):
        bl.split_mode(f"{DEFAULT_RULE}+pias", RANK_RULES)
    assert bl.egress_tree("pias", "s1-eth1", 12.0) == bl.egress_tree("off", "s1-eth1", 12.0)
    assert host_tagging.needs_host_trust(("off", "pias"))
    assert not host_tagging.needs_host_trust(modes_for("all")[:3])


def test_the_hosts_rules_carry_the_derived_thresholds():
    th = bl.pias_thresholds(WORKLOAD)
    assert bl.host_rules("pias", WORKLOAD) == pias.tagging_rules(th)
    assert bl.host_rules("off", WORKLOAD) is None
    with pytest.raises(ValueError, match="same-start"):
        host_tagging.workload(HeavyTailConfig(mix="same-start"))


def test_the_model_prices_pias_as_attained_with_its_thresholds():
    from mininet_tests import fluid
    from mininet_tests.heavy_tail.predict import model_jobs

    capacity = 1.5e6
    mix = [MixJob(f"j{k}", 0.3 * k, 4 + 6 * k, 300_000, 0.9, 0.0042) for k in range(4)]
    with pytest.raises(ValueError, match="workload"):
        model_jobs(mix, capacity, "pias", 0.001)
    got = model_jobs(mix, capacity, "pias", 0.001, WORKLOAD)[0]
    assert got != model_jobs(mix, capacity, "off", 0.001)[0]
    # the same as the attained rule given PIAS's thresholds directly
    from mininet_tests.heavy_tail.predict import KEYS, PIPELINE_KEYS, SLOT_S, buffer_bytes, cross_path
    jobs = [fluid.BatchJob(j.name, j.arrival, j.batches, j.bytes_per_batch, j.compute_s, KEYS,
                           PIPELINE_KEYS, cross_path(capacity)) for j in mix]
    want = fluid.simulate_batches(jobs, "attained", capacity, buffer_bytes("off", capacity, 0.001),
                                  overhead_s=SLOT_S / 2,
                                  attained_thresholds=bl.pias_thresholds(WORKLOAD))
    assert got == want


class FakeFabric:
    def __init__(self, fail_on=None):
        self.calls, self.fail_on, self.chains = [], fail_on, set()

    def cmd(self, host, command):
        self.calls.append((host, command))
        if command.startswith("iptables-restore"):
            if host == self.fail_on:
                return "iptables-restore: line 3 failed\nrc=1"
            self.chains.add(host)
            return "rc=0"
        if command.startswith(f"iptables -t mangle -X {pias.CHAIN}"):
            self.chains.discard(host)
        if command.startswith(f"iptables -t mangle -S {pias.CHAIN}"):
            return "rc=0" if host in self.chains else "rc=1"
        return ""


def test_rules_are_applied_to_every_host_and_removed_after_the_run():
    fab = FakeFabric()
    with host_tagging.tagging(fab, ("h1", "h2"), "*mangle\nCOMMIT\n"):
        assert fab.chains == {"h1", "h2"}
    assert fab.chains == set()


def test_rules_are_removed_when_the_run_fails():
    fab = FakeFabric()
    with pytest.raises(KeyboardInterrupt):
        with host_tagging.tagging(fab, ("h1", "h2"), "*mangle\nCOMMIT\n"):
            raise KeyboardInterrupt
    assert fab.chains == set()


def test_a_host_that_refuses_the_rules_fails_the_run_and_the_others_are_cleaned():
    fab = FakeFabric(fail_on="h2")
    with pytest.raises(host_tagging.HostTaggingError, match="h2"):
        with host_tagging.tagging(fab, ("h1", "h2", "h3"), "*mangle\nCOMMIT\n"):
            pytest.fail("the run must not start")
    assert fab.chains == set() and not any(h == "h3" for h, _ in fab.calls)


def test_no_rules_no_commands():
    fab = FakeFabric()
    with host_tagging.tagging(fab, ("h1",), None):
        pass
    assert fab.calls == []


def test_the_command_line_refuses_pias_without_a_size_distribution(capsys):
    from mininet_tests.heavy_tail.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["--mix", "same-start", "--baselines", "all"])
    assert exit_.value.code == 2 and "pias" in capsys.readouterr().err
