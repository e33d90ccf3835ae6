"""One controller-at-scale run's parts, shared by bench_scale (one controller) and
bench_pods (a controller per pod): the `sluice controller` process started from a state
file, the fake switches in a process of their own, the load driven through the real
client logic, and the figures' helpers."""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench.controller import scale_cluster as C
from bench.controller.scale_load import MIN_INTERVAL_S, Figures, Load, Pool
from bench.harness import ROOT
from ps_runtime.ports import free_port

SLUICE = str(ROOT / ".venv" / "bin" / "sluice")
ADMIN = "bench-scale-admin-token-0123"


def log(text: str) -> None:
    print(f"bench_scale: {text}", file=sys.stderr, flush=True)


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 3)


# ---- the fake switches, in a process of their own ---------------------------------------
def switches_main(topo: dict, port: int, commands: mp.Queue, answers: mp.Queue,
                  only: frozenset[str] | None = None) -> None:
    from bench.controller.fake_openflow import FakeFabric

    async def serve() -> None:
        fabric = FakeFabric(C.load(topo), only)
        await fabric.connect("127.0.0.1", port)
        loop = asyncio.get_running_loop()
        while True:
            command = await loop.run_in_executor(None, commands.get)
            if command == "stop":
                return
            answers.put(fabric.stats())

    asyncio.run(serve())


class Switches:
    def __init__(self, topo: dict, port: int, only: frozenset[str] | None = None) -> None:
        """The switches of ``topo`` (``only``: these of them) connected to ``port``."""
        self.commands, self.answers = mp.Queue(), mp.Queue()
        self.proc = mp.Process(target=switches_main, args=(topo, port, self.commands,
                                                           self.answers, only), daemon=True)
        self.proc.start()

    def stats(self) -> dict:
        self.commands.put("stats")
        return self.answers.get(timeout=60)

    def settle(self, switches: int, timeout_s: float) -> dict:
        """Wait until every switch has its rules (flow mods stop coming)."""
        deadline, last = time.monotonic() + timeout_s, None
        while time.monotonic() < deadline:
            time.sleep(2.0)
            st = self.stats()
            if last is not None and st["flow_mods"] == last["flow_mods"] \
                    and st["barriers"] >= switches:
                return st
            last = st
        raise RuntimeError(f"the switches did not settle in {timeout_s:.0f} s: {last}")

    def stop(self) -> None:
        self.commands.put("stop")
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.terminate()


@dataclass(frozen=True)
class ScaleConfig:
    """The cluster, the load and the window, built once from the command line."""
    workers: int = 2048
    per_job: int = 8
    seconds: float = 60.0           # the measured window
    warmup: float = 15.0
    rank: str = "remaining"         # the controller's ranking rule
    hints: str = "on"               # off: the controller gives no hints (today's reporting)
    connections: int = 64
    seed: int = 1
    pod_workers: int = 0            # > 0: the per-pod deployment (bench_pods.py)
    pods_in_turn: bool = False      # drive one pod at a time (bench_pods.py says why)


# ---- the controller process ---------------------------------------------------------------
def start_controller(work: Path, topo: dict, jobs, cfg: ScaleConfig, pod: str | None = None
                     ) -> tuple[subprocess.Popen, int, int]:
    """``pod``: `sluice controller --pod pod` (a controller per pod, bench_pods.py)."""
    (work / "topology.yaml").write_text(yaml.safe_dump(topo))
    state = C.state_file(C.load(topo), jobs, cfg.rank, 0.0, pod)
    (work / "state.json").write_text(json.dumps(state))
    ofp, api = free_port(), free_port()
    argv = [SLUICE, "controller", "--topology", str(work / "topology.yaml"),
            "--ofp-port", str(ofp), "--api", f"127.0.0.1:{api}", "--state-file",
            str(work / "state.json"), "--rank", cfg.rank, "--report-hints", cfg.hints,
            "--log-level", "info"] + (["--pod", pod] if pod else [])
    proc = subprocess.Popen(argv, env=dict(os.environ, SLUICE_ADMIN_TOKEN=ADMIN),
                            stdout=subprocess.DEVNULL, stderr=open(work / "controller.log", "w"))
    deadline = time.monotonic() + 600
    import http.client
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", api, timeout=2)
            c.request("GET", "/health")
            c.getresponse().read()
            return proc, ofp, api
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the controller did not start (see {work}/controller.log)")
            time.sleep(0.5)


def held_batches(api: int) -> dict[tuple[str, str], int]:
    from controller.client import ControllerClient

    client = ControllerClient(f"http://127.0.0.1:{api}", ADMIN, timeout=60)
    held, cursor = {}, None
    while True:
        page = client.request("GET", "/jobs?limit=1000" + (f"&cursor={cursor}" if cursor else ""))
        for j in page["jobs"]:
            held.update({(j["id"], w): b for w, b in j["batches"].items()})
        cursor = page.get("next")
        if not cursor:
            return held


def today_rate(jobs) -> float:
    """Reports/s today's client would send: every worker every max(step, 0.2 s)."""
    return sum(len(j.body["workers"]) / max(j.step_s, MIN_INTERVAL_S) for j in jobs)


# ---- one run ---------------------------------------------------------------------------
async def drive(topo_obj, jobs, api: int, cfg: ScaleConfig, proc_pid: int, switches: Switches) -> dict:
    fig = Figures(window_start=cfg.warmup)
    pool, admin = Pool("127.0.0.1", api, cfg.connections), Pool("127.0.0.1", api, 1)
    load = Load(topo_obj, jobs, pool, admin, ADMIN, cfg.per_job, cfg.seed, fig)
    marks = {}

    async def mark_window() -> None:
        await asyncio.sleep(cfg.warmup)
        marks["cpu0"], marks["t0"], marks["sw0"] = cpu_s(proc_pid), time.monotonic(), \
            switches.stats()
        marks["load_cpu0"] = time.process_time()

    marker = asyncio.ensure_future(mark_window())
    await load.run(cfg.warmup + cfg.seconds)
    await marker
    window = time.monotonic() - marks["t0"]
    cpu = (cpu_s(proc_pid) - marks["cpu0"]) / window
    load_cpu = (time.process_time() - marks["load_cpu0"]) / window
    sw1 = switches.stats()
    return {"fig": fig, "window_s": window, "cpu": cpu, "load_cpu": load_cpu,
            "sw0": marks["sw0"], "sw1": sw1,
            "running": list(load.jobs.values())}
