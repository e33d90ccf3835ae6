"""The heavy-tail experiment's bookkeeping without a fabric: the time split and its parsers,
the run-queue sampler on this process, the mode list, and a summary with every mode the
checks read (best baseline, the default rule on it, CPU wait share, prediction)."""

from __future__ import annotations

import os

import pytest

from sluice_common.rank_rules import DEFAULT_RULE
from mininet_tests import time_split
from mininet_tests.heavy_tail.summary import all_modes, modes_for, summarize
from mininet_tests.heavy_tail.render import _bounds_text
from mininet_tests.heavy_tail.measure import bucket_edges, measure
from mininet_tests.heavy_tail.fabric_setup import resolve_cc
from mininet_tests.heavy_tail.config import HeavyTailConfig, RunFacts
from mininet_tests.heavy_tail.mix import MixJob

SNMP = """Ip: Forwarding DefaultTTL
Ip: 1 64
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 10 5 0 0 2 1000 900 17 0 3 0
Udp: InDatagrams
Udp: 4
"""
NETSTAT = """TcpExt: SyncookiesSent TCPTimeouts TCPLossProbes
TcpExt: 0 4 9
IpExt: InNoRoutes
IpExt: 0
"""


def test_parsers():
    assert time_split.parse_schedstat("123 456 7\n") == (123, 456, 7)
    with pytest.raises(ValueError):
        time_split.parse_schedstat("1 2")
    assert time_split.parse_tcp_counters(SNMP, NETSTAT) == {"retrans_segs": 17, "timeouts": 4}
    assert time_split.parse_tcp_counters("", "") == {"retrans_segs": 0, "timeouts": 0}
    tc = ("qdisc htb 1: root refcnt 3 r2q 10 default 0x8\n Sent 100 bytes 2 pkt (dropped 0, "
          "overlimits 0 requeues 0)\n backlog 3028b 2p requeues 0\n")
    assert time_split.parse_root_backlog(tc) == 3028
    assert time_split.parse_root_backlog("qdisc noqueue 0: root") == 0
    tcp = (" sl local_address rem_address st tx_queue rx_queue tr tm->when retrnsmt uid\n"
           " 0: 0100000A:4E21 0300000A:A000 01 00000000:00000000 01:00000020 00000000 0 0 1\n"
           " 1: 0300000A:B000 0100000A:4E49 01 00000800:00000000 01:00000020 00000002 0 0 2\n")
    assert time_split.parse_proc_tcp(tcp) == [(20001, 40960, 0), (45056, 20041, 2)]
    assert time_split.ports_in_recovery(tcp) == {45056, 20041}


def test_split_sums_to_the_jct_and_floors_the_rest():
    s = time_split.split(10.0, 0.5, batches=20, compute_s=0.1, exchange_s=0.2, cpu_wait_s=1.5)
    assert s == {"jct_s": 10.0, "startup_s": 0.5, "compute_s": 2.0, "transfer_s": 4.0,
                 "cpu_wait_s": 1.5, "tcp_rto_s": 0.0, "network_wait_s": 2.0}
    assert time_split.split(10.0, 0.5, 20, 0.1, 0.2, 1.5, tcp_rto_s=0.5)["network_wait_s"] == 1.5
    assert sum(v for k, v in s.items() if k != "jct_s") == pytest.approx(10.0)
    assert time_split.split(1.0, 0.5, 20, 0.1, 0.2, 0.0)["network_wait_s"] == 0.0
    assert time_split.cpu_wait_share([s, time_split.split(4.0, 0, 1, 0, 0, 1.0)]) == \
        pytest.approx((0.15 + 0.25) / 2)
    assert time_split.cpu_wait_share([]) is None


def test_process_waits_reads_this_process():
    waits = time_split.ProcessWaits()
    for _ in range(3):
        sum(range(200_000))
        waits.sample("me", [os.getpid(), 2 ** 22 + 12345])     # the second does not exist
    assert set(waits.last["me"]) == {os.getpid()}
    assert waits.wait_s("me") >= 0 and waits.wait_s("other") == 0
    # only the delay since the process was first seen counts
    waits.first["me"][os.getpid()] -= 7 * 10 ** 9
    assert waits.wait_s("me") >= 7.0


def test_modes_and_cc():
    assert modes_for("none") == ("off", "progress", "remaining", "aged", "attained")
    assert modes_for("all") == all_modes()
    assert {"off", "off-shallow", "off-fair", "pias", "progress", "remaining", "aged",
            "attained", f"{DEFAULT_RULE}+off-shallow", f"{DEFAULT_RULE}+off-fair"} == set(all_modes())
    with pytest.raises(ValueError):
        modes_for("some")
    # --modes keeps a subset in the usual order, off always (the pairing's reference)
    assert modes_for("all", (f"{DEFAULT_RULE}+off-fair", "off-fair")) == (
        "off", "off-fair", f"{DEFAULT_RULE}+off-fair")
    with pytest.raises(ValueError, match="off-fair"):
        modes_for("none", ("off-fair",))          # a baseline needs --baselines all
    # the command line turns --modes into that tuple, once
    from mininet_tests.heavy_tail.cli import config_of, parser
    config = config_of(parser().parse_args(["--baselines", "all",
                                            "--modes", "remaining+off-fair, off-fair"]))
    assert config.only_modes == ("remaining+off-fair", "off-fair")
    assert config.uplink_mbps == 12.0 and config.seeds == (1, 2, 3, 4, 5)
    # the queue the rule's verdict is judged on is named before the run, the deep FIFO
    # unless said otherwise, and must be a switch queue
    assert config.rule_queue == "off"
    assert config_of(parser().parse_args(["--rule-queue", "off-fair"])).rule_queue == "off-fair"
    with pytest.raises(ValueError, match="rule_queue"):
        config_of(parser().parse_args(["--rule-queue", "pias"]))
    assert resolve_cc("cubic") == "cubic"
    assert resolve_cc("machine") == open("/proc/sys/net/ipv4/tcp_congestion_control").read().strip()


def _result(jcts: dict[str, float], mix) -> dict:
    jobs = [{"name": j.name, "status": "finished", "arrival": j.arrival,
             "start": j.arrival, "finish": j.arrival + jcts[j.name],
             "turnaround": jcts[j.name], "cpu_wait_s": 0.05 * jcts[j.name],
             "iterations": [[j.arrival + 1.0, 0, 1, 0.5]]} for j in mix]
    return {"jobs": jobs, "links": [], "summary": {"makespan_s": max(jcts.values())}}


@pytest.mark.parametrize("fair_jct, shallow_jct, best", [(6.0, 9.0, "off-fair"),
                                                        (12.0, 9.0, "off-shallow"),
                                                        (12.0, 11.0, "off")])
def test_summary_has_every_key_the_checks_read(fair_jct, shallow_jct, best):
    capacity = 1.5e6
    mix = [MixJob("ht00", 0.0, 5, 150_000, 0.9, 0.0042),
           MixJob("ht01", 1.0, 100, 1_500_000, 0.9, 0.0042)]
    edges = bucket_edges(150_000)
    base = {"off": 10.0, "off-shallow": shallow_jct, "off-fair": fair_jct, "progress": 8.0,
            "remaining": 7.5, "aged": 7.0, "attained": 9.5, f"{DEFAULT_RULE}+off-shallow": 6.5,
            f"{DEFAULT_RULE}+off-fair": 5.0, "pias": 13.0}
    modes = {}
    for mode, jct in base.items():
        modes[mode] = measure(_result({"ht00": jct / 2, "ht01": jct * 1.5}, mix), mix,
                              capacity, edges)
        modes[mode].update(predicted_mean_jct_s=jct * 0.9, fluid_mean_jct_s=jct * 0.8,
                           queue_delay_ms={"push": 12.0, "pull": 3.0},
                           tcp={"retrans_segs": 5, "timeouts": 1})
    config = HeavyTailConfig(load=0.7, seeds=(1,), compute="profile", start="warm", cc="bbr",
                             rule_queue="off-fair")
    summary = summarize([{"seed": 1, "order": list(base), "mix": [], "modes": modes}],
                        config, RunFacts(cc="bbr", rtt_s=0.001, wall_s=1.0), edges)
    assert (summary["host_cc"], summary["rtt_s"], summary["uplink_mbps"]) == ("bbr", 0.001, 12.0)
    assert summary["default_rule"] == DEFAULT_RULE
    assert summary["best_baseline"] == best
    combo = f"{DEFAULT_RULE}+{best}"
    assert summary["default_rule_on_best_baseline"] == combo
    for mode in ("off", "off-shallow", "off-fair", "progress", "remaining", "aged", "attained",
                 combo):
        x = summary["modes"][mode]
        for key in ("mean_jct_s", "p95_jct_s", "bottleneck_mbps", "cpu_wait_share",
                    "predicted_mean_jct_s"):
            assert key in x, (mode, key)
        assert x["cpu_wait_share"] == pytest.approx(0.05, abs=1e-3)
    assert summary["modes"]["off"]["mean_jct_s"] == 10.0
    assert summary["modes"][combo]["predicted_mean_jct_s"] == pytest.approx(
        base.get(combo, base[DEFAULT_RULE]) * 0.9)
    assert summary["modes"]["off"]["time_split_mean_s"]["small"]["cpu_wait_s"] == 0.25
    assert summary["best_mode"] == f"{DEFAULT_RULE}+off-fair"
    assert summary["modes"][f"{DEFAULT_RULE}+off-fair"]["mean_jct_vs_best_baseline_pct"] == \
        pytest.approx(100 * (5.0 / min(base[b] for b in ("off", "off-shallow", "off-fair")) - 1),
                      abs=0.1)
    # the bounds are the committed checker's (mininet_tests.check_bounds), on the queue the
    # configuration named before the run; on one seed the hardest baseline is the fastest
    assert (summary["rule_queue"], summary["registered_seeds"]) == ("off-fair", [1])
    b = summary["bounds"]
    assert (b["rule"], b["best_baseline"]) == (f"{DEFAULT_RULE}+off-fair", best)
    names = [v["name"] for v in b["verdicts"]]
    assert names[2:4] == ["mean JCT vs off", f"mean JCT vs {best}"]
    assert b["verdicts"][1]["met"]                   # the one registered seed is there
    rule = base[f"{DEFAULT_RULE}+off-fair"]
    assert b["verdicts"][2]["value"] == pytest.approx(100 * (rule / 10.0 - 1), abs=0.1)
    assert b["verdicts"][3]["met"] is (100 * (rule / base[best] - 1) <= -20.0)
    # every mode's prediction is 0.9 of its measurement: 10 % off, within the 15 %
    assert b["verdicts"][-1]["value"] == pytest.approx(10.0, abs=0.1) and b["verdicts"][-1]["met"]
    assert b["met"] is all(v["met"] for v in b["verdicts"])
    assert _bounds_text(b).count("\n") == len(b["verdicts"])
    # each mode's per-seed mean JCT, by seed
    assert summary["modes"]["off"]["per_seed"] == {"1": 10.0}


def test_a_bad_modes_list_exits_2_before_any_fabric(capsys):
    from mininet_tests.experiment_priority import main

    with pytest.raises(SystemExit) as e:
        main(["--mix", "heavy-tail", "--modes", "off-fair,bogus"])
    assert e.value.code == 2
    assert "bogus" in capsys.readouterr().err
