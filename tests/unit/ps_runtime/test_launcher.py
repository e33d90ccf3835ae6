"""PS runtime: real ps-lite jobs on loopback, failure handling, progress reporting,
port plans, models and the profiler fit."""

from __future__ import annotations

import dataclasses
import io
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from sluice_common.models import MODELS
from sluice_common.profile import load_profile
from ps_runtime.launcher import JobFailed, PSJob
from ps_runtime.models import MODEL_NAMES, build_model, input_shape, parameter_count
from ps_runtime.plan import (HostPlan, PortPlan, default_base_port, endpoints,
                             placement_from_scheduler, registration)
from ps_runtime.profiler import fit_table, format_fit, measure_step, plot_fit
from ps_runtime.progress import ProgressReporter, controller_sender
from ps_runtime.runners import LocalRunner
from ps_runtime.worker import make_buckets
from sluice.cli import main as sluice_main
from topologies import load_topology
from ps_runtime.ports import free_port_block as free_base

from support.paths import REPO
from support.ps_jobs import SMALL, small_job
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _children_of_launcher(launcher_pid: int) -> list[int]:
    """PS processes whose watchdog points at ``launcher_pid`` (read from /proc)."""
    needle = f"SLUICE_LAUNCHER_PID={launcher_pid}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    pids.append(int(entry.name))
            except OSError:
                pass
    return [p for p in pids if _alive(p)]


def _cmdline(pid: int, timeout: float = 5.0) -> bytes:
    """A just-started process's command line. Popen returns once exec has begun, and the
    kernel fills the new image's arguments a moment later: read at once, under load,
    /proc/PID/cmdline was empty (a CI failure)."""
    deadline = time.monotonic() + timeout
    while True:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if cmdline or time.monotonic() > deadline:
            return cmdline
        time.sleep(0.01)


# ---- real jobs on loopback -------------------------------------------------------------

def test_two_workers_one_server_train_with_falling_loss_and_report_progress(tmp_path):
    """A real ps-lite job (scheduler, 1 server, 2 workers) whose workers report their
    batch to the controller's real HTTP API (its service on a fake flow table)."""
    from controller.api import ApiServer
    from controller.client import ControllerClient
    from support.controller_fakes import ADMIN, make_service
    from controller.fake_fabric import bring_up

    api = ApiServer(bring_up(make_service("two-rack")), "127.0.0.1", 0).start()
    try:
        admin = ControllerClient(api.url, ADMIN)
        place = HostPlan.on_hosts(load_topology("two-rack"), ["h1"], ["h2", "h3"])
        token = admin.register_job(registration(SMALL.name, place,
                                                PortPlan.for_job(SMALL.name, place)))["token"]
        job = small_job(tmp_path, batches=40, controller_url=api.url, token=token)
        with job:
            job.start()
            # The job token travels in the environment, not on the visible command line.
            cmdline = _cmdline(job.workers[0].popen.pid)
            assert token.encode() not in cmdline and b"ps_runtime.worker" in cmdline
            seen = []
            result = job.wait(timeout=120, on_batch=lambda w, rec: seen.append((w, rec.batch)))
        reported = {j["id"]: j["batches"] for j in admin.jobs()}[SMALL.name]
    finally:
        api.stop()
    assert result.returncodes == {"scheduler0": 0, "server0": 0, "worker0": 0, "worker1": 0}
    for worker in (0, 1):
        losses = [r.loss for r in result.batches[worker]]
        assert [r.batch for r in result.batches[worker]] == list(range(1, 41))
        assert statistics.mean(losses[-5:]) < 0.5 * statistics.mean(losses[:5]), losses
        assert all(0 < r.comm_s <= r.time_s for r in result.batches[worker])
    assert sorted(seen) == sorted((w, b) for w in (0, 1) for b in range(1, 41))
    # The last batch of each worker reached the controller (latest wins, flushed at exit).
    assert reported == {"w0": 40, "w1": 40}
    log = (tmp_path / "worker1.log").read_text()
    import torch     # device auto: CUDA where there is one

    assert f"computing on {'cuda' if torch.cuda.is_available() else 'cpu'}" in log
    assert "of 2" in log
    assert "cannot reach the controller" not in log
    # Synchronous data parallelism: different data, yet identical weights at the end.
    sums = [[l for l in (tmp_path / f"worker{j}.log").read_text().splitlines()
             if l.startswith("weights_checksum")] for j in (0, 1)]
    assert len(sums[0]) == 1 and sums[0] == sums[1]
    assert result.batches[0][0].loss != result.batches[1][0].loss
    assert all(not _alive(p.popen.pid) for p in job.processes)


@pytest.mark.parametrize("victim", ["worker", pytest.param("server", marks=pytest.mark.slow)])
def test_a_dead_process_fails_the_job_within_seconds(tmp_path, victim):
    job = small_job(tmp_path, batches=100000)
    killed_at = []

    def on_batch(worker, rec):
        if worker == 1 and rec.batch == 3 and not killed_at:
            target = job.workers[1] if victim == "worker" else job.processes[1]
            os.kill(target.popen.pid, signal.SIGKILL)
            killed_at.append(time.monotonic())

    with job, pytest.raises(JobFailed) as failed:
        job.start()
        job.wait(timeout=90, on_batch=on_batch)
    took = time.monotonic() - killed_at[0]
    print(f"{victim} killed -> job failed and stopped in {took:.2f} s")
    message = str(failed.value)
    expected = "worker 1 on host local (127.0.0.1:" if victim == "worker" else "server 0 on host local"
    assert expected in message and "SIGKILL" in message and "last log lines" in message
    assert took < 5, f"job took {took:.1f} s to fail"
    assert all(not _alive(p.popen.pid) for p in job.processes)


class ShellRunner:
    """Runs a shell snippet per role instead of ps-lite: launcher logic without MXNet."""

    def __init__(self, scripts: dict[str, str]):
        self.scripts = scripts

    def start(self, host, argv, env, log):
        rank = argv[argv.index("--worker-index") + 1] if "--worker-index" in argv else "0"
        script = self.scripts.get(f"{env['DMLC_ROLE']}{rank}", self.scripts[env["DMLC_ROLE"]])
        return subprocess.Popen(["sh", "-c", script], stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def test_exit_code_and_log_tail_name_the_failed_process(tmp_path):
    runner = ShellRunner({"scheduler": "sleep 30", "server": "sleep 30 & sleep 30",
                          "worker": "sleep 30",
                          "worker1": "echo loading; echo 'RuntimeError: boom'; exit 3"})
    job = PSJob(SMALL, HostPlan.loopback(1, 2), runner, tmp_path, batches=5, grace=1.0)
    t0 = time.monotonic()
    with job, pytest.raises(JobFailed) as failed:
        job.start()
        job.wait(timeout=20)
    assert time.monotonic() - t0 < 5
    msg = str(failed.value)
    assert "worker 1 on host local" in msg and "exited with code 3" in msg
    assert "RuntimeError: boom" in msg and failed.value.process.role == "worker"
    # The server's background child was in its process group: gone too.
    assert all(not _alive(p.popen.pid) for p in job.processes)
    assert [p.returncode for p in job.processes if p.role != "worker" or p.rank != 1] == [-15] * 3


def test_a_hanging_job_times_out_and_is_stopped(tmp_path):
    runner = ShellRunner({"scheduler": "sleep 30", "server": "sleep 30",
                          "worker": "trap '' TERM; sleep 30"})   # ignores SIGTERM
    job = PSJob(SMALL, HostPlan.loopback(1, 1), runner, tmp_path, batches=5, grace=0.5)
    with job, pytest.raises(JobFailed, match=r"timed out after 1 s; still running: scheduler 0"):
        job.start()
        job.wait(timeout=1)
    assert all(not _alive(p.popen.pid) for p in job.processes)
    assert job.workers[0].returncode == -9           # SIGKILL after the grace period


@pytest.mark.slow
def test_sigterm_to_train_command_leaves_no_process(tmp_path):
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(yaml.safe_dump({"jobs": [{"name": "t-term", "model": "smallcnn",
                                              "dataset_size": 10 ** 7, "epochs": 1,
                                              "batch_size": 8, "max_gpus": 2}]}))
    proc = subprocess.Popen([sys.executable, "-m", "sluice", "train", str(jobs), "--job", "t-term",
                             "--servers", "1", "--base-port", str(free_base()),
                             "--out", str(tmp_path / "out")],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()             # the first batch line: all are running
        assert "batch 1/" in line, line + proc.stderr.read()
        children = _children_of_launcher(proc.pid)
        assert len(children) == 4                 # scheduler, server, two workers
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) != 0
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_alive(p) for p in children):
            time.sleep(0.1)
        assert not [p for p in children if _alive(p)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_children_exit_when_the_launcher_is_killed(tmp_path):
    """SIGKILL gives the launcher no chance to clean up: the children's watchdog must."""
    script = (f"import sys, time; sys.path.insert(0, {str(REPO)!r})\n"
              "from tests.support.ps_jobs import small_job\n"
              "from pathlib import Path\n"
              f"job = small_job(Path({str(tmp_path)!r}), batches=100000)\n"
              "job.start(); print('started', flush=True); time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "started"
        # A child shows its own environment in /proc only once it has exec'd: poll.
        deadline = time.monotonic() + 10
        children = _children_of_launcher(proc.pid)
        while len(children) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
            children = _children_of_launcher(proc.pid)
        assert len(children) == 4
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and any(_alive(p) for p in children):
            time.sleep(0.1)
        assert not [p for p in children if _alive(p)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_train_command_rejects_bad_input_before_starting(tmp_path, capsys):
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(yaml.safe_dump({"jobs": [
        {"name": "a", "model": "smallcnn", "dataset_size": 64, "epochs": 1, "batch_size": 8,
         "max_gpus": 2},
        {"name": "big", "model": "resnet50", "dataset_size": 64, "epochs": 1, "batch_size": 8,
         "max_gpus": 2}]}))
    out = tmp_path / "out"
    assert sluice_main(["train", str(jobs), "--job", "nope", "--out", str(out)]) == 2
    assert "no job named 'nope'" in capsys.readouterr().err
    # torch compute needs a torch definition of the model (emulated compute only a count)
    assert sluice_main(["train", str(jobs), "--job", "big", "--compute", "torch",
                        "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "job 'big'" in err and "field 'model'" in err and "resnet50" in err
    assert sluice_main(["train", str(jobs), "--job", "a", "--workers", "0", "--out", str(out)]) == 2
    assert "--workers" in capsys.readouterr().err
    assert sluice_main(["train", str(tmp_path / "missing.yaml"), "--job", "a"]) == 2
    assert not out.exists()


# ---- progress reporting ----------------------------------------------------------------

def test_progress_reporter_never_blocks_and_latest_batch_wins():
    release = threading.Event()
    sent: list[int] = []

    def hanging_controller(job, worker, batch):
        release.wait(10)                  # a controller that does not answer
        sent.append(batch)

    rep = ProgressReporter(hanging_controller, "j", "w0", min_interval=0.0)
    t0 = time.perf_counter()
    for batch in range(1, 5001):
        rep.report(batch)
    assert time.perf_counter() - t0 < 0.5
    release.set()
    rep.close(timeout=5)
    assert sent[-1] == 5000 and len(sent) <= 3   # intermediate batches were dropped


def test_progress_reporter_rate_limit():
    times: list[float] = []
    rep = ProgressReporter(lambda j, w, b: times.append(time.monotonic()), "j", "w0",
                           min_interval=0.2)
    end = time.monotonic() + 1.0
    batch = 0
    while time.monotonic() < end:
        batch += 1
        rep.report(batch)
        time.sleep(0.002)
    rep.close(timeout=2)
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert 3 <= len(times) <= 7 and min(gaps) >= 0.19


def test_progress_to_a_dead_controller_logs_once_and_does_not_block():
    with socket.socket() as s:            # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    log = io.StringIO()
    rep = ProgressReporter(controller_sender(dead, "tok"), "j", "w0", min_interval=0.01, log=log)
    t0 = time.perf_counter()
    for batch in range(1, 200):
        rep.report(batch)
        time.sleep(0.001)
    assert time.perf_counter() - t0 < 1.0
    rep.close(timeout=3)
    assert log.getvalue().count("cannot reach the controller") == 1


# ---- plans, models, buckets --------------------------------------------------------------

def test_port_plan_and_endpoints_are_deterministic():
    topo = load_topology("two-rack")
    place = HostPlan.on_hosts(topo, ["h1"], ["h2", "h3"])
    a, b = PortPlan.for_job("resnet-a", place), PortPlan.for_job("resnet-a", place)
    assert a == b and a.base == default_base_port("resnet-a")
    assert default_base_port("resnet-a") != default_base_port("resnet-b")
    assert a.all_ports() == [a.scheduler, a.server(0), a.worker(0), a.worker(1)]
    assert len(set(a.all_ports())) == 4
    assert endpoints(place, a) == {"servers": [("10.0.0.1", a.base + 1)],
                                   "workers": [("10.0.0.2", a.base + 2), ("10.0.0.3", a.base + 3)]}
    body = registration("resnet-a", place, a)
    assert [w["id"] for w in body["workers"]] == ["w0", "w1"]
    assert body["servers"] == [{"id": "s0", "ip": "10.0.0.1", "port": a.base + 1}]
    fixed = PortPlan.for_job("x", HostPlan.loopback(2, 3), base=41000)
    assert fixed.worker(2) == 41000 + 1 + 2 + 2
    with pytest.raises(ValueError):
        HostPlan.on_hosts(topo, ["h1"], ["h9"])
    # The scheduler's placement (a host repeats once per GPU) maps one worker per GPU,
    # each with its own port.
    from sluice_common.placement import Placement as SchedulerPlacement

    two_on_h3 = placement_from_scheduler(topo, SchedulerPlacement("j", ("h1",), ("h3", "h3")))
    plan = PortPlan.for_job("j", two_on_h3)
    assert endpoints(two_on_h3, plan)["workers"] == [("10.0.0.3", plan.base + 2),
                                                     ("10.0.0.3", plan.base + 3)]
    # The launcher exposes the same plan before anything starts.
    job = PSJob(dataclasses.replace(SMALL, name="resnet-a"), place, LocalRunner(), "/nonexistent",
                batches=1)
    assert job.endpoints() == endpoints(place, a)


def test_models_have_the_scheduler_table_parameter_counts():
    import torch

    for name in MODEL_NAMES:
        if name == "smallcnn":
            continue
        with torch.device("meta"):       # shapes only: no 138M-parameter initialisation
            model = build_model(name)
            assert parameter_count(model) == MODELS[name].params, name
            for size in (32, 64, 224):       # adaptive pooling: any input size works
                sized = build_model(name, input_size=size)
                assert sized(torch.zeros(2, *input_shape(name, size))).shape == (2, 1000)
    # smallcnn is built from the scheduler's layer list; biases add a little.
    small = parameter_count(build_model("smallcnn"))
    assert MODELS["smallcnn"].params <= small <= MODELS["smallcnn"].params * 1.01


def test_buckets_respect_the_size_limit():
    import torch

    params = [torch.nn.Parameter(torch.zeros(n)) for n in (10, 10, 300, 5, 5)]
    buckets = make_buckets(params, bucket_bytes=100)   # 25 floats
    assert [[p.numel() for p in b] for b in buckets] == [[10, 10], [300], [5, 5]]


# ---- profiler ----------------------------------------------------------------------------

def test_profiler_fit_recovers_a_known_curve_and_plots(tmp_path):
    t1 = 0.02
    points = {b: t1 * (1 + 0.6 * (b - 1) ** 0.8) for b in (1, 2, 4, 8, 16, 32, 64)}
    prof, rows = fit_table("resnet18", points)
    beta, gamma = prof.fit
    assert abs(beta - 0.6) < 0.05 and abs(gamma - 0.8) < 0.02
    assert max(abs(r.rel_error) for r in rows) < 0.01
    text = format_fit("resnet18", points)
    assert "Cost_bat(1) = 20.00 ms" in text and text.count("%") == len(points)
    png = plot_fit({"resnet18": points}, tmp_path / "fit.png", "test")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_profile_command_writes_a_profile_the_scheduler_reads(tmp_path, capsys):
    import torch

    assert measure_step("smallcnn", 2, torch.device("cpu"), warmup=0, repeats=1) > 0
    out = tmp_path / "p.yaml"
    assert sluice_main(["profile", "--models", "smallcnn", "--batch-sizes", "2,4",
                        "--device", "cpu", "--warmup", "1", "--repeats", "2",
                        "--out", str(out), "--plot", str(tmp_path / "p.png")]) == 0
    printed = capsys.readouterr().out
    assert "smallcnn: Cost_bat(1)" in printed and "rel err" in printed
    prof = load_profile(out)
    dev = prof.device()
    assert dev.device.startswith("cpu-")
    assert sorted(dev.models["smallcnn"].points) == [1, 2, 4]   # b = 1 always measured
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_profile_command_rejects_bad_input(tmp_path, capsys):
    out = tmp_path / "p.yaml"
    assert sluice_main(["profile", "--models", "resnet18,lenet", "--out", str(out)]) == 2
    assert "lenet" in capsys.readouterr().err
    assert sluice_main(["profile", "--batch-sizes", "1,x", "--out", str(out)]) == 2
    assert sluice_main(["profile", "--out", str(tmp_path / "no" / "p.yaml")]) == 2
    assert not out.exists()
