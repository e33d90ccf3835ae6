"""bench/controller/bench_scale.py end to end at a small size: the real controller process,
the fake OpenFlow switches over TCP, the emulated workers through ReportGate."""

from __future__ import annotations

import json
import subprocess
import sys

from bench.harness import ROOT


def _bench(tmp_path, *extra):
    out = tmp_path / "out.json"
    r = subprocess.run([sys.executable, "-m", "bench.controller.bench_scale", "--workers", "32",
                        "--json", str(out), *extra], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(out.read_text()), r.stdout


def test_small_cluster_reports_less_than_today_and_loses_nothing(tmp_path):
    got, stdout = _bench(tmp_path, "--seconds", "4", "--warmup", "3")
    assert got["workers"] == 32 and got["jobs"] == 4 and got["switches"] == 4
    assert got["lost"] == 0 and got["switch_reconnects"] == 0
    assert 0 < got["reports_per_s"] < got["reports_per_s_today_client"]
    assert 0 < got["controller_cpu_share"] < 1
    assert "FIGURE reports arriving" in stdout and "VERDICTS" in stdout
    # the switches hold what the controller's own service computes for the cluster
    rules, _ = _bench(tmp_path, "--rules-only")
    assert got["rules_per_edge_switch_max"] == rules["rules_per_edge_switch_max"] > 0
    assert got["job_rules_per_edge_switch_max"] == rules["job_rules_per_edge_switch_max"] > 0


def test_per_pod_deployment_drives_a_controller_per_pod(tmp_path):
    """--pod-workers: two pods of 32 workers and a core switch, each pod its own
    `sluice controller --pod` and switches, the core its own; the figures add up over
    the pods and the edge switch holds the prefix route to the other pod."""
    got, stdout = _bench(tmp_path, "--workers", "64", "--pod-workers", "32",
                         "--seconds", "4", "--warmup", "3")
    assert got["workers"] == 64 and got["pods"] == 2 and got["jobs"] == 8
    assert got["switches"] == 9 and got["lost"] == 0 and got["switch_reconnects"] == 0
    assert len(got["controller_cpu_share_each"]) == 2
    assert got["controller_cpu_share"] == max(got["controller_cpu_share_each"]) > 0
    assert 0 < got["reports_per_s"] < got["reports_per_s_today_client"]
    pod, _ = _bench(tmp_path, "--rules-only")        # one pod of 32 workers, no core
    assert got["prefix_routes_per_edge_switch"] == 1
    assert got["rules_per_edge_switch_max"] == pod["rules_per_edge_switch_max"] + 1
    # the core switch: its base and transit rules, and one prefix route per pod
    assert got["core_switch_rules"] >= 2 and got["core_controller_cpu_share"] >= 0
    assert "VERDICTS" in stdout


def test_pods_in_turn_drives_each_pod_alone_and_sums_their_rates(tmp_path):
    """--pods-in-turn: both pods' controllers and switches up, their workers driven one
    pod after the other; each pod has figures of its own and nothing is lost."""
    got, stdout = _bench(tmp_path, "--workers", "64", "--pod-workers", "32",
                         "--pods-in-turn", "--seconds", "3", "--warmup", "3")
    assert got["pods_driven"] == "in turn" and got["lost"] == 0
    assert got["switch_reconnects"] == 0 and len(got["controller_cpu_share_each"]) == 2
    assert all(share > 0 for share in got["controller_cpu_share_each"])
    assert len(got["level_change_p99_ms_each"]) == 2
    assert 0 < got["reports_per_s"] < got["reports_per_s_today_client"]
    assert "VERDICTS" in stdout


def test_pods_in_turn_without_pods_is_refused(tmp_path):
    r = subprocess.run([sys.executable, "-m", "bench.controller.bench_scale", "--workers", "32",
                        "--pods-in-turn"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--pods-in-turn needs --pod-workers" in r.stderr
