"""The live page in a real headless browser (Debian's chromium) during a fabric run:
a `sluice controller` process drives the Mininet/OVS fabric, a job is registered and
reports progress while iperf3 loads a rack uplink; chromium loads /live, runs its
script, and the rendered DOM must show the job, its flows' levels and every link with a
non-zero utilisation on the loaded one. A screenshot is saved (to
$SLUICE_SCREENSHOT_DIR when set: `docs/` holds the committed one).
Needs root, OVS and chromium (`make setup` installs it); fails loudly otherwise."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from support.controller_process import wait_located
from mininet_fabric.fabric import Fabric
from end_to_end.controller_proc import controller_process

pytestmark = pytest.mark.fabric


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "chromium is not installed (`make setup` installs Debian's chromium)"
    return path


def browse(url: str, *args: str) -> str:
    """Load ``url`` headless, give its script 4 s of (virtual) time, return stdout."""
    done = subprocess.run([chromium(), "--headless=new", "--no-sandbox", "--disable-gpu",
                           "--disable-dev-shm-usage", "--hide-scrollbars",
                           "--virtual-time-budget=4000", *args, url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_live_page_shows_jobs_links_and_levels(tmp_path):
    shots = Path(os.environ.get("SLUICE_SCREENSHOT_DIR", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    # the progress rule ranks per flow (batch, pull before push): levels that differ
    with controller_process("two-rack", tmp_path / "controller.log", rank="progress") as (ofp, client), \
            Fabric("two-rack", controller=ofp) as fabric:
        # as every controller fabric test: ping once the controller located every host
        # (before that a pair's first packet may be dropped on a loaded machine)
        wait_located(client, len(fabric.topology.hosts))
        assert fabric.ping_all() == 0.0
        job = client.register_job("job-a", servers=[(fabric.ip("h3"), 9000)],
                                  workers=[(fabric.ip("h1"), 9001), (fabric.ip("h2"), 9001)],
                                  wait=True)
        client.progress("job-a", "w0", 4, job["token"], wait=True)
        client.progress("job-a", "w1", 2, job["token"], wait=True)
        # load the rack1 uplink: h1 -> h3 crosses tor1 - spine1 - tor2
        fabric.popen("h3", "iperf3", "-s", "-1", "-p", "5301")
        time.sleep(0.5)
        iperf = fabric.popen("h1", "iperf3", "-c", fabric.ip("h3"), "-p", "5301", "-t", "12")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:     # the controller polls port stats each second
            state = client.request("GET", "/live/state")
            busy = {l["id"]: l["utilisation"] for l in state["links"]}
            if busy["spine1-tor1"] > 0.05:
                break
            time.sleep(0.5)
        assert busy["spine1-tor1"] > 0.05, busy

        url = f"{client.url}/live"
        dom = browse(url, "--dump-dom")
        shot = shots / "live-page.png"
        browse(url, f"--screenshot={shot}", "--window-size=1000,820")
        iperf.wait(timeout=30)

    # the script ran and drew what the controller knows
    assert 'data-job="job-a"' in dom, dom[-3000:]
    links = set(re.findall(r'class="link" data-link="([^"]+)"', dom))
    assert links == {"h1-tor1", "h2-tor1", "h3-tor2", "h4-tor2", "spine1-tor1", "spine1-tor2"}
    uplink = re.search(r'data-link="spine1-tor1".*?<text[^>]*>(\d+)%</text>', dom, re.S)
    assert uplink and int(uplink.group(1)) > 0, dom[-3000:]
    assert "w0@h1: 4" in dom and "w1@h2: 2" in dom           # placement and progress
    levels = re.findall(r'class="lvl"[^>]*>(\d+)<', dom)
    assert len(levels) == 4 and len(set(levels)) > 1, levels  # 4 flows, different levels
    # a real picture: a PNG of the asked size with more than a blank page in it
    from matplotlib import image
    pixels = image.imread(shot)
    assert pixels.shape[:2] == (820, 1000) and pixels.std() > 0.05
