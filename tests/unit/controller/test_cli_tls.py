"""Transport security of a real `sluice controller` process: the OpenFlow channel over TLS
(os-ken's controller-certificate options, optionally requiring switch certificates
signed by a CA), bad certificate options refused with exit 2, and per-job tokens that
report progress for their own job only (over real HTTP)."""

from __future__ import annotations

import os
import socket
import ssl
import struct
import subprocess
import sys
import time

import pytest

from controller.client import ControllerClient, ControllerError
from ps_runtime.ports import free_port
from support.controller_process import ADMIN, start_controller, stop

OFPT_HELLO, OFPT_ECHO_REQUEST, OFPT_FEATURES_REQUEST, OFP_VERSION_13 = 0, 2, 5, 4


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, a controller certificate and a switch certificate signed by the CA, and a
    self-signed switch certificate the CA never signed."""
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=sluice-test-ca", "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"))
    for name in ("controller", "switch"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
                "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.csr"))
        (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
        openssl("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / "ca.pem"),
                "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "2",
                "-extfile", str(d / "san.ext"), "-out", str(d / f"{name}.pem"))
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=rogue", "-keyout", str(d / "rogue.key"), "-out", str(d / "rogue.pem"))
    return d


def ofp_hello() -> bytes:
    return struct.pack("!BBHI", OFP_VERSION_13, OFPT_HELLO, 8, 1)


def read_message(sock) -> tuple[int, int]:
    """(version, type) of the next OpenFlow message."""
    header = b""
    while len(header) < 8:
        chunk = sock.recv(8 - len(header))
        if not chunk:
            raise ConnectionError("closed")
        header += chunk
    version, mtype, length, _xid = struct.unpack("!BBHI", header)
    left = length - 8
    while left > 0:
        left -= len(sock.recv(left))
    return version, mtype


def wait_listening(port: int, proc, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert proc.poll() is None and time.monotonic() < deadline, "OpenFlow port not up"
        time.sleep(0.1)


def tls_switch(port: int, pki, cert: str | None):
    """Connect like a switch with TLS; returns the wrapped socket (handshake done)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(pki / "ca.pem"))
    ctx.check_hostname = False          # the test certificate names no host
    if cert:
        ctx.load_cert_chain(str(pki / f"{cert}.pem"), str(pki / f"{cert}.key"))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return ctx.wrap_socket(raw)


@pytest.mark.parametrize("require_client_cert", [False, True])
def test_openflow_channel_speaks_tls_only(tmp_path, pki, require_client_cert):
    ofp, api = free_port(), free_port()
    log = open(tmp_path / "controller.log", "w+")
    extra = ["--ofp-tls-cert", str(pki / "controller.pem"),
             "--ofp-tls-key", str(pki / "controller.key")]
    if require_client_cert:
        extra += ["--ofp-tls-ca", str(pki / "ca.pem")]
    proc, _client = start_controller("two-rack", ofp, api, log, *extra)
    try:
        wait_listening(ofp, proc)
        # a switch with a certificate the CA signed: OpenFlow hello, then features request
        with tls_switch(ofp, pki, "switch") as s:
            s.sendall(ofp_hello())
            assert read_message(s) == (OFP_VERSION_13, OFPT_HELLO)
            # then the features request; echo requests (liveness) may come first
            types = [read_message(s)[1]]
            while types[-1] == OFPT_ECHO_REQUEST and len(types) < 5:
                types.append(read_message(s)[1])
            assert types[-1] == OFPT_FEATURES_REQUEST, types
            # the controller proved itself with the CA-signed controller certificate
            assert dict(x[0] for x in s.getpeercert()["subject"])["commonName"] == "controller"
        # plain TCP: no OpenFlow message ever comes back in clear text
        with socket.create_connection(("127.0.0.1", ofp), timeout=3) as s:
            s.sendall(ofp_hello())
            with pytest.raises((ConnectionError, socket.timeout, OSError)):
                read_message(s)
        # a certificate the CA never signed (or none) is refused when a CA is required
        for cert in ("rogue", None):
            if not require_client_cert:
                break
            with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
                with tls_switch(ofp, pki, cert) as s:
                    s.sendall(ofp_hello())   # TLS 1.3: the refusal shows on first read
                    read_message(s)
        assert proc.poll() is None, "a bad client must not stop the controller"
    finally:
        stop(proc)
        log.close()


@pytest.mark.parametrize("args, words", [
    (["--ofp-tls-cert", "/nonexistent/c.pem", "--ofp-tls-key", "/nonexistent/k.pem"],
     ["/nonexistent/c.pem", "cannot load"]),
    (["--ofp-tls-cert", "CERT"], ["--ofp-tls-key", "both"]),
    (["--ofp-tls-ca", "CERT"], ["--ofp-tls-ca", "needs"]),
    (["--echo-interval", "0"], ["--echo-interval"]),
    (["--tls-cert", "CERT"], ["--tls-cert", "both"]),
    (["--tls-cert", "CERT", "--tls-key", "/nonexistent/k.pem"], ["cannot load"]),
])
def test_bad_tls_options_exit_2(pki, args, words):
    args = [a.replace("CERT", str(pki / "controller.pem")) for a in args]
    env = dict(os.environ, SLUICE_ADMIN_TOKEN="cli-test-token-1")
    r = subprocess.run([sys.executable, "-m", "sluice", "controller", "--api",
                        f"127.0.0.1:{free_port()}", "--ofp-port", str(free_port()), *args],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    for w in words:
        assert w in r.stderr


def test_northbound_api_over_https_only(tmp_path, pki):
    import http.client

    ofp, api = free_port(), free_port()
    log = open(tmp_path / "controller.log", "w+")
    env = dict(os.environ, SLUICE_ADMIN_TOKEN=ADMIN)
    proc = subprocess.Popen([sys.executable, "-m", "sluice", "controller", "--ofp-port",
                             str(ofp), "--api", f"127.0.0.1:{api}",
                             "--tls-cert", str(pki / "controller.pem"),
                             "--tls-key", str(pki / "controller.key")],
                            env=env, stdout=log, stderr=log)
    trusted = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    client = ControllerClient(f"https://127.0.0.1:{api}", ADMIN, ssl_context=trusted)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if client.health():
                    break
            except OSError:
                pass
            assert proc.poll() is None, open(tmp_path / "controller.log").read()[-2000:]
            assert time.monotonic() < deadline, "HTTPS API not up in 60 s"
            time.sleep(0.2)
        job = client.register_job("job-t", [("10.0.0.3", 9000)], [("10.0.0.1", 9001)])
        assert client.progress("job-t", "w0", 3, job["token"])["result"] == "accepted"
        # clear-text HTTP gets no answer, and a client that does not trust the CA refuses
        conn = http.client.HTTPConnection("127.0.0.1", api, timeout=5)
        with pytest.raises((http.client.HTTPException, OSError)):
            conn.request("GET", "/health")
            conn.getresponse().read()
        with pytest.raises(ssl.SSLError):
            ControllerClient(f"https://127.0.0.1:{api}", ADMIN).health()
    finally:
        stop(proc)
        log.close()


def test_a_job_token_reports_for_its_own_job_only(tmp_path):
    ofp, api = free_port(), free_port()
    log = open(tmp_path / "controller.log", "w+")
    proc, admin = start_controller("two-rack", ofp, api, log)
    try:
        a = admin.register_job("job-a", [("10.0.0.3", 9000)], [("10.0.0.1", 9001)])
        b = admin.register_job("job-b", [("10.0.0.4", 9000)], [("10.0.0.2", 9001)])
        for job, token in (("job-b", a["token"]), ("job-a", b["token"]),
                           ("job-a", admin.admin_token)):
            with pytest.raises(ControllerError) as err:
                admin.progress(job, "w0", 7, token)
            assert err.value.status == 401
        assert admin.progress("job-a", "w0", 7, a["token"])["result"] == "accepted"
        assert {j["id"]: j["batches"] for j in admin.jobs()} == {"job-a": {"w0": 7},
                                                                "job-b": {}}
    finally:
        stop(proc)
        log.close()


def test_scheduler_api_over_https(tmp_path, pki, monkeypatch):
    from job_scheduler.service.client import SchedulerClient, Unreachable

    port = free_port()
    log = open(tmp_path / "scheduler.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "sluice", "scheduler", "--listen",
                             f"127.0.0.1:{port}", "--db", str(tmp_path / "s.db"),
                             "--tls-cert", str(pki / "controller.pem"),
                             "--tls-key", str(pki / "controller.key")],
                            stdout=log, stderr=log)
    monkeypatch.setenv("SLUICE_CA_FILE", str(pki / "ca.pem"))
    client = SchedulerClient(f"https://127.0.0.1:{port}", timeout=5)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                client.health()
                break
            except Unreachable:
                assert proc.poll() is None, open(tmp_path / "scheduler.log").read()[-2000:]
                assert time.monotonic() < deadline, "HTTPS scheduler API not up in 60 s"
                time.sleep(0.2)
        answer = client.submit("jobs:\n  - {name: t1, model: resnet18, dataset_size: 1000, "
                               "epochs: 1, batch_size: 32, max_gpus: 2}\n", "t.yaml")
        assert len(answer["jobs"]) == 1
        with pytest.raises(Unreachable):          # clear text gets nowhere
            SchedulerClient(f"http://127.0.0.1:{port}", timeout=5).health()
    finally:
        stop(proc)
        log.close()
