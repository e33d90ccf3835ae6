"""On the real fabric (Mininet + OVS + the controller process): a host marking its own
packets DSCP 56 is served at the least urgent class, a host forging a PS job's worker
address and port gets nothing through, and the registered PS flow keeps its throughput
(mininet_tests.experiment_spoofing, short phases)."""

import pytest

from topologies.priority_classes import LEAST_URGENT


@pytest.mark.fabric
def test_no_host_can_buy_priority(tmp_path):
    from mininet_tests.experiment_spoofing import run

    r = run(seconds=3, out=tmp_path)
    assert r["ps_only_mbps"] > 0.5 * r["bottleneck_mbps"], r
    assert r["dscp56_class"] == LEAST_URGENT, r
    assert r["forged_delivered_mbps"] == 0, r
    assert r["dscp56_sent_mbps"] > r["bottleneck_mbps"] and r["forged_sent_mbps"] > 0, r
    # 0.9 is the target (bench/RESULTS.md); 0.8 leaves room for a loaded host with two cores
    assert r["ps_with_dscp56_mbps"] >= 0.8 * r["ps_only_mbps"], r
    assert r["ps_with_forged_mbps"] >= 0.8 * r["ps_only_mbps"], r
