"""Port counters -> bytes/s per port and the link it belongs to (no switch)."""

from controller.linkstats import LinkStats
from support.controller_fakes import make_service
from controller.fake_fabric import bring_up


def test_rate_from_counter_deltas_and_resets_ignored():
    s = LinkStats()
    s.update(1, 3, 10.0, tx_bytes=1000, rx_bytes=0)
    assert s.rates[(1, 3)].tx_bps == 0              # one sample: no rate yet
    s.update(1, 3, 12.0, tx_bytes=5000, rx_bytes=800)
    assert s.rates[(1, 3)].tx_bps == 2000 and s.rates[(1, 3)].rx_bps == 400
    s.update(1, 3, 13.0, tx_bytes=10, rx_bytes=10)  # counters reset (switch restarted)
    assert s.rates[(1, 3)].tx_bps == 2000           # keeps the last good rate
    s.update(1, 3, 14.0, tx_bytes=1010, rx_bytes=10)
    assert s.rates[(1, 3)].tx_bps == 1000


def test_links_name_the_peer_switch_or_host():
    svc = bring_up(make_service("two-rack"))
    tor1 = svc.fabric.dpid_of_name["tor1"]
    svc.port_stats(tor1, [(1, 1.0, 0, 0), (3, 1.0, 0, 0)])
    svc.port_stats(tor1, [(1, 2.0, 125_000, 0), (3, 2.0, 6_250_000, 0)])
    ports = {(p["switch"], p["port"]): p for p in svc.links()["ports"]}
    assert ports[("tor1", 1)]["peer"] == "h1"
    assert ports[("tor1", 3)]["peer"] == "spine1"
    assert ports[("tor1", 3)]["tx_bytes_per_s"] == 6_250_000     # 50 Mbit/s
    assert 'sluice_port_tx_bytes_per_second{port="3",switch="tor1"} 6.25e+06' \
        in svc.metrics_text()
