"""Issue 27's experiment bookkeeping without a fabric: the time split and its parsers,
the run-queue sampler on this process, the mode list, and a summary with every mode the
checks read (best baseline, the default rule on it, CPU wait share, prediction)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from sluice_common.job_rank import DEFAULT_RULE
from mininet_tests import time_split
from mininet_tests.experiment_heavy_tail import (ALL_MODES, MODES, _bounds_text, bounds,
                                                 bucket_edges, measure, modes_for, resolve_cc,
                                                 summarize)
from mininet_tests.heavy_tail import MixJob

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
    assert modes_for("none") == MODES
    assert modes_for("all") == ALL_MODES
    assert {"off", "off-shallow", "off-fair", "progress", "remaining", "attained",
            f"{DEFAULT_RULE}+off-shallow", f"{DEFAULT_RULE}+off-fair"} == set(ALL_MODES)
    with pytest.raises(ValueError):
        modes_for("some")
    # --modes keeps a subset in the usual order, off always (the pairing's reference)
    assert modes_for("all", "remaining+off-fair,off-fair") == (
        "off", "off-fair", f"{DEFAULT_RULE}+off-fair")
    with pytest.raises(ValueError, match="off-fair"):
        modes_for("none", "off-fair")          # a baseline needs --baselines all
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
            "remaining": 7.0, "attained": 9.5, f"{DEFAULT_RULE}+off-shallow": 6.5,
            f"{DEFAULT_RULE}+off-fair": 5.0}
    modes = {}
    for mode, jct in base.items():
        modes[mode] = measure(_result({"ht00": jct / 2, "ht01": jct * 1.5}, mix), mix,
                              capacity, edges)
        modes[mode].update(predicted_mean_jct_s=jct * 0.9, fluid_mean_jct_s=jct * 0.8,
                           queue_delay_ms={"push": 12.0, "pull": 3.0},
                           tcp={"retrans_segs": 5, "timeouts": 1})
    args = SimpleNamespace(mix="heavy-tail", load=0.7, scale=0.1, bytes_lo=150_000,
                           host_tcp="kernel", uplink_mbps=12.0, compute="profile",
                           start="warm", cc="bbr", rtt_s=0.001)
    summary = summarize([{"seed": 1, "order": list(base), "mix": [], "modes": modes}],
                        args, 1.0, edges)
    assert summary["default_rule"] == DEFAULT_RULE
    assert summary["best_baseline"] == best
    combo = f"{DEFAULT_RULE}+{best}"
    assert summary["default_rule_on_best_baseline"] == combo
    for mode in ("off", "off-shallow", "off-fair", "progress", "remaining", "attained", combo):
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
    # the bounds the issue asks of the default rule on the best baseline, each checked
    b = summary["bounds"]
    assert (b["mode"], b["against"]) == (combo, best)
    rule = base.get(combo, base[DEFAULT_RULE])
    assert b["mean_jct_vs_off_pct"] == pytest.approx(100 * (rule / 10.0 - 1), abs=0.1)
    assert b["met"]["mean_jct_vs_off_pct"] is (rule <= 7.0)
    # (the model's predictions are the measurements' 0.9, so its bound is the rule's change)
    change = 100 * (rule / base[best] - 1)
    target = -20.0 if change <= -20.0 else round(change + 5.0, 1)
    assert b["mean_jct_target_pct"] == pytest.approx(target, abs=0.1)
    assert b["met"]["mean_jct_pct"] is (100 * (rule / base[best] - 1) <= b["mean_jct_target_pct"])
    # every job scales with its mode's JCT, so p95 and each bucket move alike
    assert b["p95_jct_pct"] == pytest.approx(b["mean_jct_pct"], abs=0.2)
    assert set(b["slowdown_pct"]) == set(summary["modes"][best]["slowdown_by_bucket"])
    assert b["met"]["p95_jct_pct"] is True and b["met"]["slowdown_pct"] is True
    # the model's bound: what the model says the rule on the best baseline gains over it
    assert b["model_bound_pct"] == pytest.approx(100 * (rule / base[best] - 1), abs=0.1)


def test_a_model_bound_short_of_the_target_lowers_it_by_its_slack():
    """Where the model says the rule on the best baseline can gain less than 20 % over it,
    the rule must come within 5 points of the model's figure (issue 27); where it says
    more, the 20 % stands. Only that combination counts: not the rule on other leaves."""
    from mininet_tests.experiment_heavy_tail import MODEL_BOUND_SLACK_PTS, mean_jct_target

    base = {"mean_jct_change_pct": -31.0, "p95_jct_s": 10.0, "slowdown_by_bucket": {"small": 2.0},
            "bottleneck_mbps": 10.0, "mean_jct_vs_best_baseline_pct": 0.0,
            "predicted_vs_best_baseline_pct": 0.0}
    modes = {"off-fair": base,
             "remaining+off-shallow": {**base, "predicted_vs_best_baseline_pct": -31.0},
             "remaining+off-fair": {**base, "mean_jct_vs_best_baseline_pct": -14.5,
                                    "predicted_vs_best_baseline_pct": -15.0}}
    b = bounds(modes, "remaining+off-fair", "off-fair")
    assert b["model_bound_pct"] == -15.0
    assert b["mean_jct_target_pct"] == -15.0 + MODEL_BOUND_SLACK_PTS
    assert b["met"]["mean_jct_pct"] is True
    assert "the model's bound -15 % + 5 points" in _bounds_text(b)
    modes["remaining+off-fair"]["mean_jct_vs_best_baseline_pct"] = -9.0
    assert bounds(modes, "remaining+off-fair", "off-fair")["met"]["mean_jct_pct"] is False
    # the model says more is possible: the issue's -20 % holds
    modes["remaining+off-fair"]["predicted_vs_best_baseline_pct"] = -25.0
    modes["remaining+off-fair"]["mean_jct_vs_best_baseline_pct"] = -18.0
    b = bounds(modes, "remaining+off-fair", "off-fair")
    assert b["mean_jct_target_pct"] == -20.0 and b["met"]["mean_jct_pct"] is False
    assert mean_jct_target(None) == -20.0


def test_bounds_say_which_fail():
    base = {"mean_jct_change_pct": -25.0, "mean_jct_vs_best_baseline_pct": -22.0,
            "p95_jct_s": 11.5, "slowdown_by_bucket": {"small": 2.0, "large": 2.3},
            "bottleneck_mbps": 9.0}
    modes = {"off-fair": {**base, "p95_jct_s": 10.0, "slowdown_by_bucket":
                          {"small": 4.0, "large": 2.0}, "bottleneck_mbps": 10.0},
             "remaining+off-fair": base}
    b = bounds(modes, "remaining+off-fair", "off-fair")
    assert b["slowdown_pct"] == {"small": -50.0, "large": 15.0}
    assert b["met"] == {"mean_jct_vs_off_pct": False, "mean_jct_pct": True,
                        "p95_jct_pct": False, "slowdown_pct": False, "bottleneck_pct": False}
    # the markdown line names each bound's verdict
    text = _bounds_text(b)
    assert text.count("NOT met") == 4 and "vs off-fair -22.0 % (met, <= -20 %)" in text


def test_a_bad_modes_list_exits_2_before_any_fabric(capsys):
    from mininet_tests.experiment_priority import main

    with pytest.raises(SystemExit) as e:
        main(["--mix", "heavy-tail", "--modes", "off-fair,bogus"])
    assert e.value.code == 2
    assert "bogus" in capsys.readouterr().err
