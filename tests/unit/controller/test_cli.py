"""`sluice controller` as a process: bad input exits 2 before listening; a good start
serves the API and stops cleanly on SIGTERM (no switch needed)."""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from controller.client import ControllerClient, ControllerError
from ps_runtime.ports import free_port

# The interpreter under test, not a .venv path: the suite runs in any environment.
SLUICE = [sys.executable, "-m", "sluice"]



def run(*args, token="cli-test-token-1", timeout=60):
    env = dict(os.environ)
    env.pop("SLUICE_ADMIN_TOKEN", None)
    if token:
        env["SLUICE_ADMIN_TOKEN"] = token
    return subprocess.run([*SLUICE, "controller", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("args, token, words", [
    (["--topology", "no-such-topology"], "cli-test-token-1", ["no-such-topology"]),
    (["--api", "localhost"], "cli-test-token-1", ["--api", "HOST:PORT"]),
    (["--ofp-port", "70000"], "cli-test-token-1", ["--ofp-port", "1..65535"]),
    (["--levels", "9"], "cli-test-token-1", ["--levels", "1..8"]),
    ([], None, ["--admin-token", "SLUICE_ADMIN_TOKEN"]),
    (["--state-file", "/nonexistent-dir/state.json"], "cli-test-token-1", ["nonexistent-dir"]),
    (["--topology", "two-pod", "--pod", "pod9"], "cli-test-token-1",
     ["--pod", "pod9", "pod1, pod2"]),
    (["--topology", "leaf-spine:racks_per_domain=2", "--pod", "pod1"], "cli-test-token-1",
     ["switch spine1", "role core"]),
])
def test_bad_input_exits_2_with_a_clear_message(args, token, words):
    api = free_port()
    r = run("--api", f"127.0.0.1:{api}", "--ofp-port", str(free_port()), *args, token=token)
    assert r.returncode == 2, r.stderr
    for w in words:
        assert w in r.stderr
    with socket.socket() as s:            # nothing was started
        assert s.connect_ex(("127.0.0.1", api)) != 0


def test_starts_serves_and_stops_cleanly_on_sigterm(tmp_path):
    api, ofp = free_port(), free_port()
    state = tmp_path / "state.json"
    env = dict(os.environ, SLUICE_ADMIN_TOKEN="cli-test-token-1")
    proc = subprocess.Popen([*SLUICE, "controller", "--api", f"127.0.0.1:{api}", "--ofp-port",
                             str(ofp), "--state-file", str(state)], env=env,
                            stderr=subprocess.PIPE, text=True)
    client = ControllerClient(f"http://127.0.0.1:{api}", "cli-test-token-1")
    try:
        deadline = time.monotonic() + 60      # imports are slow on a loaded host with two cores
        while True:
            try:
                client.health()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                assert time.monotonic() < deadline, "the API did not come up in 60 s"
                time.sleep(0.1)
        job = client.register_job("j1", [("10.0.0.3", 9000)], [("10.0.0.1", 9001)])
        with pytest.raises(ControllerError):
            ControllerClient(client.url, "nope-nope").remove_job("j1")
        # the OpenFlow port listens too; os-ken binds it after the API is up (the API
        # starts first, os-ken's run_apps in a thread after it), so allow it the same time
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", ofp)) == 0:
                    break
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the OpenFlow port did not listen in 60 s"
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:   # never leave a controller behind
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(f"the controller ignored SIGTERM for 20 s: {err[-2000:]}")
    assert proc.returncode == 0, err
    assert "j1" in state.read_text() and job["token"] not in state.read_text()
    assert job["token"] not in err and "cli-test-token-1" not in err
