"""Faults injected under a running PS job on leaf-spine, and what it cost.

    .venv/bin/python -m mininet_tests.experiment_faults [--json OUT.json] [--out DIR]

One controller process (state file, echo liveness 0.5 s x 3) and the leaf-spine fabric
(4 ToRs, 2 spines, 100 Mbit/s links). A real PS job (smallcnn, server h1 under tor1,
workers h3/h4 under tor2) runs while, one after the other:

- ``switch silent death``: the spine carrying the job's pushes stops answering on its
  control channel (mininet_tests.of_relay goes silent) and drops every packet (a
  priority-65535 drop rule put in through OVS's management socket, not by the
  controller): no port goes down anywhere. Then it is revived.
- ``link down``: the ToR <-> spine link the pushes cross is set down (both ends).
- ``link up``: the same link comes back.
- ``controller SIGKILL``: the controller is SIGKILLed and restarted on its state file.

During each, h4 pings h1 every 20 ms across the same spine. Per fault:
``detected_s`` (fault -> the controller's view changed: switch disconnected, link
gone/back, API back), ``rerouted_s`` (fault -> first ping answered after the outage;
for link up: -> the ToR forwards over the link again; for the controller: -> every
switch reconnected), ``lost`` (pings), ``job_finished`` (the PS job ended with every
batch and exit 0). Then two faults of their own:

- ``worker SIGKILL``: a second PS job, one worker SIGKILLed at batch 3: detected_s =
  until the launcher reports the job failed (all its processes stopped); lost = None.
- ``scheduler SIGKILL``: the scheduler service (`sluice scheduler`, simulated
  executor) SIGKILLed while submissions stream in (bench/api/bench_scheduler_service.py's
  fault run): rerouted_s = restart to healthy, lost = acknowledged submissions lost,
  job_finished = every job finished.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from controller.client import ControllerClient
from topologies import load_topology
from topologies.mininet_topo import port_map

REPO = Path(__file__).resolve().parents[1]
TOPOLOGY = "leaf-spine"
SERVER, WORKERS, PINGER = "h1", ("h3", "h4"), "h4"
PING_INTERVAL = 0.02


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Controller:
    """A `sluice controller` process that can be SIGKILLed and restarted in place."""

    def __init__(self, out: Path) -> None:
        self.ofp, self.api = _free_port(), _free_port()
        self.token = secrets.token_urlsafe(18)
        self.state = out / "controller-state.json"
        self.log = open(out / "controller.log", "ab")
        self.client = ControllerClient(f"http://127.0.0.1:{self.api}", self.token, timeout=3)
        self.proc: subprocess.Popen | None = None

    def start(self) -> float:
        t0 = time.monotonic()
        env = dict(os.environ, SLUICE_ADMIN_TOKEN=self.token)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sluice", "controller", "--topology", TOPOLOGY,
             "--ofp-port", str(self.ofp), "--api", f"127.0.0.1:{self.api}", "--state-file",
             str(self.state), "--echo-interval", "0.5", "--echo-misses", "3"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"controller exited with {self.proc.returncode}")
            try:
                if self.client.health():
                    return time.monotonic() - t0
            except OSError:
                pass
            if time.monotonic() - t0 > 60:
                raise RuntimeError("controller API not up in 60 s")
            time.sleep(0.02)

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.client.close()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def gauge(self, name: str) -> float | None:
        try:
            text = self.client.metrics()
        except OSError:
            return None
        m = re.search(rf"^{name} (\S+)$", text, re.M)
        return float(m.group(1)) if m else None


def wait_until(pred, timeout: float, step: float = 0.02) -> float | None:
    """Seconds until ``pred()`` is true, None on timeout."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return time.monotonic() - t0
        time.sleep(step)
    return None


class Pinger:
    """h4 -> h1 every 20 ms; afterwards: transmitted, received, and reply timestamps."""

    def __init__(self, fabric, seconds: float) -> None:
        self.proc = fabric.popen(PINGER, "ping", "-D", "-i", str(PING_INTERVAL), "-W", "1",
                                 "-w", str(int(seconds)), fabric.ip(SERVER),
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def result(self) -> dict:
        out, _ = self.proc.communicate(timeout=60)
        replies = [(int(seq), float(t)) for t, seq in
                   re.findall(r"^\[(\d+\.\d+)\] \d+ bytes from .*icmp_seq=(\d+)", out, re.M)]
        m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
        sent, got = (int(m.group(1)), int(m.group(2))) if m else (0, len(replies))
        return {"sent": sent, "received": got, "lost": sent - got, "replies": replies}


def outage_end(replies: list[tuple[int, float]], t_fault: float) -> float:
    """Seconds from the fault to the first reply after the first run of lost pings
    that follows it (0.0 when no ping was lost after the fault)."""
    if not replies:
        return float("nan")
    got = {seq for seq, _ in replies}
    before = [seq for seq, t in replies if t <= t_fault]
    first = max(before) + 1 if before else 1
    last = max(got)
    missing = [s for s in range(first, last) if s not in got]
    if not missing:
        return 0.0
    run_end = missing[0]
    while run_end + 1 in missing:
        run_end += 1
    t_back = min(t for seq, t in replies if seq > run_end)
    return round(t_back - t_fault, 3)


def forwarding_port(fabric, switch: str, dst_ip: str) -> int | None:
    """The output port of ``switch``'s forwarding rule (table 1) for ``dst_ip``."""
    for line in fabric.dump_flows(switch).splitlines():
        if "table=1" in line and f"nw_dst={dst_ip} " in line + " ":
            m = re.search(r"actions=output:(\d+)", line)
            if m:
                return int(m.group(1))
    return None


def job_marks(fabric, switch: str, cookie: int) -> bool:
    """Whether ``switch`` holds a rule of the job (its cookie)."""
    return f"cookie={cookie:#x}," in fabric.dump_flows(switch)


def ovs(*args: str) -> None:
    subprocess.run(list(args), check=True, timeout=30, capture_output=True)


def relay_spines(fab, ctl, topology, relays: dict) -> tuple[int, float]:
    """Put each spine's controller connection through a relay (``relays``: spine -> its
    :class:`~mininet_tests.of_relay.SilentRelay`, the way to silence it), wait for every
    switch to reconnect and the fabric to forward: (switches, links discovered)."""
    from mininet_tests.of_relay import SilentRelay

    spines = [s.name for s in topology.switches if s.name.startswith("spine")]
    for sp in spines:
        relays[sp] = SilentRelay(("127.0.0.1", ctl.ofp))
        ovs("ovs-vsctl", "set-controller", sp, f"tcp:127.0.0.1:{relays[sp].port}")
    n_sw = len(topology.switches)
    assert wait_until(lambda: ctl.gauge("sluice_switches_connected") == n_sw, 30) \
        is not None, "switches did not reconnect through the relays"
    deadline = time.monotonic() + 30
    while fab.ping_all() > 0:
        if time.monotonic() > deadline:
            raise RuntimeError("fabric does not forward under the controller")
    return n_sw, ctl.gauge("sluice_links_discovered")


def job_facts(result, batches: int, extra: dict) -> bool:
    """Whether the job under the faults finished every batch; its elapsed, slowest and
    median batch times into ``extra``."""
    finished = set(result.returncodes.values()) == {0} and all(
        len(b) == batches for b in result.batches.values())
    extra["job_elapsed_s"] = round(result.elapsed_s, 1)
    times = [r.time_s for b in result.batches.values() for r in b]
    extra["slowest_batch_s"] = round(max(times), 2)
    extra["median_batch_s"] = round(sorted(times)[len(times) // 2], 3)
    return finished


def fabric_faults(out: Path, batches: int) -> tuple[list[dict], dict]:
    from sluice_common.jobspec import JobSpec
    from mininet_fabric.fabric import Fabric
    from ps_runtime.launcher import JobFailed, PSJob, WorkerOptions
    from ps_runtime.plan import HostPlan
    from ps_runtime.runners import MininetRunner

    topology = load_topology(TOPOLOGY)
    ports = port_map(topology)
    neighbour_at = {sw: {p: n for n, p in m.items()} for sw, m in ports.items()}
    ctl = Controller(out)
    ctl.start()
    rows: list[dict] = []
    extra: dict = {}
    relays = {}
    try:
        with Fabric(TOPOLOGY, controller=f"127.0.0.1:{ctl.ofp}", progress=False) as fab:
            n_sw, links = relay_spines(fab, ctl, topology, relays)
            tor = topology.rack_by_name[topology.host_by_name[WORKERS[0]].rack].tor
            server_ip = fab.ip(SERVER)
            port = forwarding_port(fab, tor, server_ip)
            victim = neighbour_at[tor][port]
            print(f"experiment_faults: pushes {tor} -> {victim} -> h1; faults there",
                  file=sys.stderr, flush=True)

            spec = JobSpec(name="faults-ps", model="smallcnn", dataset_size=32 * 2 * batches,
                           epochs=1, batch_size=32, max_gpus=2)
            placement = HostPlan.on_hosts(fab.topology, [SERVER], list(WORKERS))
            job = PSJob(spec, placement, MininetRunner(fab), out / "job", batches=batches,
                        options=WorkerOptions(threads=1))
            answer = ctl.client.register_job(job.registration(), wait=True)
            cookie, token = int(answer["cookie"], 16), answer["token"]
            progress = {"batch": 0}

            def on_batch(worker, rec):
                progress["batch"] = max(progress["batch"], rec.batch)
                try:
                    ControllerClient(ctl.client.url, timeout=1).progress(
                        spec.name, f"w{worker}", rec.batch, token)
                except Exception:      # the controller may be down right now
                    pass

            def faults():
                wait_until(lambda: progress["batch"] >= 3, 120, 0.1)
                rows.append(silent_switch(fab, ctl, relays[victim], victim, tor, port,
                                          cookie, n_sw))
                rows.append(link_change(fab, ctl, tor, victim, port, "down", links))
                rows.append(link_change(fab, ctl, tor, victim, port, "up", links))
                rows.append(controller_kill(fab, ctl, n_sw))
                extra["batch_at_end_of_faults"] = progress["batch"]

            thread = threading.Thread(target=faults, daemon=True)
            finished, why = False, ""
            with job:
                job.start()
                thread.start()
                try:
                    finished = job_facts(job.wait(timeout=600, on_batch=on_batch), batches,
                                         extra)
                except JobFailed as err:
                    why = str(err)[:300]
            thread.join(timeout=120)
            for row in rows:
                row["job_finished"] = finished
            if why:
                extra["job_failure"] = why
            if extra.get("batch_at_end_of_faults", batches) >= batches:
                extra["warning"] = "the job ended before the last fault: give it more batches"
            rows.append(worker_kill(fab, ctl, out))
    finally:
        for r in relays.values():
            r.close()
        ctl.stop()
    return rows, extra


def silent_switch(fab, ctl, relay, victim, tor, port, cookie, n_sw) -> dict:
    pinger = Pinger(fab, 12)
    time.sleep(1.0)
    t_fault = time.time()
    t0 = time.monotonic()
    relay.freeze()
    ovs("ovs-ofctl", "-O", "OpenFlow13", "add-flow", victim, "priority=65535,actions=drop")
    detected = wait_until(lambda: ctl.gauge("sluice_switches_connected") == n_sw - 1, 20)
    moved = wait_until(lambda: forwarding_port(fab, tor, fab.ip(SERVER)) not in (None, port),
                       10)
    rules_moved_s = None if moved is None else round(time.monotonic() - t0, 3)
    marks = job_marks(fab, tor, cookie)
    ping = pinger.result()
    # revive: the drop rule goes, the channel comes back (OVS reconnects with backoff)
    ovs("ovs-ofctl", "-O", "OpenFlow13", "del-flows", "--strict", victim, "priority=65535")
    relay.thaw()
    back = wait_until(lambda: ctl.gauge("sluice_switches_connected") == n_sw, 40)
    wait_until(lambda: forwarding_port(fab, tor, fab.ip(SERVER)) == port, 10)
    return {"fault": "switch silent death", "detected_s": _r(detected),
            "rerouted_s": outage_end(ping["replies"], t_fault), "lost": ping["lost"],
            "pings_sent": ping["sent"], "rules_rerouted_s": rules_moved_s,
            "job_rules_on_ingress": marks, "revived_s": _r(back)}


def link_change(fab, ctl, tor, victim, port, status, links) -> dict:
    pinger = Pinger(fab, 8)
    time.sleep(1.0)
    intfs = [fab.intf(tor, victim), fab.intf(victim, tor)]
    t_fault = time.time()
    t0 = time.monotonic()
    for intf in intfs:
        ovs("ip", "link", "set", "dev", intf, status)
    want = links - 1 if status == "down" else links
    detected = wait_until(lambda: ctl.gauge("sluice_links_discovered") == want, 20)
    if status == "down":
        moved = wait_until(lambda: forwarding_port(fab, tor, fab.ip(SERVER)) not in (None, port),
                           10)
    else:
        moved = wait_until(lambda: forwarding_port(fab, tor, fab.ip(SERVER)) == port, 20)
    rules_s = None if moved is None else round(time.monotonic() - t0, 3)
    ping = pinger.result()
    rerouted = outage_end(ping["replies"], t_fault) if status == "down" else rules_s
    return {"fault": f"link {status}", "detected_s": _r(detected), "rerouted_s": rerouted,
            "lost": ping["lost"], "pings_sent": ping["sent"], "rules_rerouted_s": rules_s}


def controller_kill(fab, ctl, n_sw) -> dict:
    pinger = Pinger(fab, 8)
    time.sleep(1.0)
    t_fault = time.time()
    t0 = time.monotonic()
    ctl.kill9()
    api_s = ctl.start()
    detected = time.monotonic() - t0
    reconnected = wait_until(lambda: ctl.gauge("sluice_switches_connected") == n_sw, 30)
    ping = pinger.result()
    return {"fault": "controller SIGKILL", "detected_s": _r(detected),
            "rerouted_s": _r(None if reconnected is None else detected + reconnected),
            "lost": ping["lost"], "pings_sent": ping["sent"], "api_back_s": _r(api_s),
            "note": "detected = restarted and API up; rerouted = every switch reconnected "
                    f"and reconciled; outage in pings: {outage_end(ping['replies'], t_fault)} s"}


def worker_kill(fab, ctl, out: Path) -> dict:
    from sluice_common.jobspec import JobSpec
    from ps_runtime.launcher import JobFailed, PSJob, WorkerOptions
    from ps_runtime.plan import HostPlan
    from ps_runtime.runners import MininetRunner, kill_group

    spec = JobSpec(name="faults-kill", model="smallcnn", dataset_size=32 * 2 * 200, epochs=1,
                   batch_size=32, max_gpus=2)
    placement = HostPlan.on_hosts(fab.topology, ["h5"], ["h7", "h8"])
    job = PSJob(spec, placement, MininetRunner(fab), out / "job-kill", batches=200,
                options=WorkerOptions(threads=1), base_port=26000)
    ctl.client.register_job(job.registration(), wait=True)
    killed = {}

    def on_batch(worker, rec):
        if worker == 0 and rec.batch >= 3 and not killed:
            kill_group(job.workers[0].popen, signal.SIGKILL)
            killed["t0"] = time.monotonic()

    failed = False
    with job:
        job.start()
        try:
            job.wait(timeout=300, on_batch=on_batch)
        except JobFailed:
            failed = True
    detected = time.monotonic() - killed["t0"] if killed else None
    left = [p.describe() for p in job.processes if p.popen.poll() is None]
    ctl.client.remove_job(spec.name, wait=True)
    return {"fault": "worker SIGKILL", "detected_s": _r(detected), "rerouted_s": None,
            "lost": None, "job_finished": False, "job_failed_cleanly": failed and not left,
            "note": "the job is failed and stopped (no process left); a retry is the "
                    "scheduler's --max-retries"}


def scheduler_kill(out: Path) -> dict:
    spec = importlib.util.spec_from_file_location(
        "bench_scheduler_service", REPO / "bench" / "api" / "bench_scheduler_service.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    work = out / "scheduler"
    work.mkdir(parents=True, exist_ok=True)
    r = bench.fault_run(work, 120, 1)
    done = r["states"]["finished"] == r["submissions"]
    return {"fault": "scheduler SIGKILL", "detected_s": None,
            "rerouted_s": _r(r["restart_to_healthy_s"][0]), "lost": r["lost"],
            "job_finished": done, "duplicated": r["duplicated"],
            "running_at_kill": r["running_at_kill"][0],
            "note": "rerouted = restart to healthy; lost = acknowledged submissions lost; "
                    "job_finished = every submitted (simulated) job finished"}


def _r(x):
    return None if x is None else round(x, 3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mininet_tests.experiment_faults",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--batches", type=int, default=150,
                    help="batches of the PS job that runs across the faults")
    args = ap.parse_args(argv)
    out = Path(args.out or f"runs/experiment-faults-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    rows, extra = fabric_faults(out, args.batches)
    rows.append(scheduler_kill(out))
    extra["wall_s"] = round(time.monotonic() - t0, 1)
    (out / "faults.json").write_text(json.dumps({"rows": rows, **extra}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    print(json.dumps({"rows": rows, **extra}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
