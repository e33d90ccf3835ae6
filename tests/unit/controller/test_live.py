"""The live picture's data (pure) and its two routes on the controller API."""

from __future__ import annotations

import json
import urllib.request

from controller.api import ApiServer
from controller.client import ControllerClient
from controller.live import layout, link_load, live_state
from support.controller_fakes import ADMIN, make_service
from controller.fake_fabric import bring_up
from topologies import load_topology

TOPO = load_topology("two-rack")
JOB = {"id": "job-a", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 9000}],
       "workers": [{"id": "w0", "ip": "10.0.0.1", "port": 9001},
                   {"id": "w1", "ip": "10.0.0.2", "port": 9001}]}


def test_layout_puts_tiers_in_rows_and_racks_under_their_tor():
    pos = layout(TOPO)
    assert pos["spine1"][1] < pos["tor1"][1] < pos["h1"][1]
    assert pos["h1"][0] < pos["h2"][0] < pos["h3"][0] < pos["h4"][0]
    assert all(0 < x < 1 and 0 < y < 1 for x, y in pos.values())


def test_link_load_takes_the_busier_direction_against_emulated_capacity():
    ports = [{"switch": "tor1", "peer": "spine1", "tx_bytes_per_s": 1e6, "rx_bytes_per_s": 2e6},
             {"switch": "spine1", "peer": "tor1", "tx_bytes_per_s": 5e6, "rx_bytes_per_s": 0},
             {"switch": "tor1", "peer": None, "tx_bytes_per_s": 9e9}]
    load = link_load(TOPO, ports)
    # 5 MB/s = 40 Mbit/s on a 5000 Mbit/s link emulated at bw_scale 0.01 = 50 Mbit/s
    assert load == {("spine1", "tor1"): {"mbps": 40.0, "utilisation": 0.8}}


def test_live_state_has_placement_progress_and_levels():
    jobs = [{**JOB, "batches": {"w0": 5, "w1": 7}}]
    flows = [{"job": "job-a", "kind": "pull", "worker": "w0", "server": "s0",
              "src": "10.0.0.3", "dst": "10.0.0.1", "batch": 5, "level": 0, "dscp": 46}]
    state = live_state(TOPO, jobs, flows, [])
    assert {n["name"] for n in state["nodes"]} == {"tor1", "tor2", "spine1", "h1", "h2",
                                                   "h3", "h4"}
    assert len(state["links"]) == 6             # 4 host links + 2 uplinks
    job = state["jobs"][0]
    assert [w["host"] for w in job["workers"]] == ["h1", "h2"]
    assert job["servers"][0]["host"] == "h3" and (job["min_batch"], job["max_batch"]) == (5, 7)
    assert state["flows"][0] | {} == {"job": "job-a", "kind": "pull", "worker": "w0",
                                      "server": "s0", "src": "h3", "dst": "h1", "batch": 5,
                                      "level": 0, "dscp": 46}


def test_live_routes_serve_the_page_and_its_state():
    svc = bring_up(make_service("two-rack"))
    api = ApiServer(svc, "127.0.0.1", 0).start()
    try:
        admin = ControllerClient(api.url, ADMIN)
        token = admin.register_job(JOB)["token"]
        admin.progress("job-a", "w1", 3, token, wait=True)
        page = urllib.request.urlopen(f"{api.url}/live", timeout=10)
        assert page.headers["Content-Type"].startswith("text/html")
        assert b'fetch("live/state"' in page.read()
        state = json.load(urllib.request.urlopen(f"{api.url}/live/state", timeout=10))
        assert state["jobs"][0]["id"] == "job-a"
        assert {w["id"]: w["batch"] for w in state["jobs"][0]["workers"]} == {"w0": 0, "w1": 3}
        assert {f["level"] for f in state["flows"]} - {None}
    finally:
        api.stop()
