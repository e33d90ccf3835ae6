"""Bursts of bad requests against both services, then valid ones.

Starts ``sluice scheduler`` and ``sluice controller`` (no switch connected) as processes
with admin tokens on free loopback ports, measures the latency of valid requests and each
process's resident memory (VmRSS), sends 100 bad requests of each kind (ids out of range,
a reused Idempotency-Key, huge numbers, form bodies, nested YAML aliases, a 10,001-job
file, a 10,000-job file of one name, bodies over the limit, wrong tokens, degenerate
registrations, 60 KB bad registrations, ...), and measures again. Prints, per kind, the
status codes the burst got and how long it took, then the valid-request latency (p50,
p99) and memory (VmRSS now, VmHWM the peak) after each burst, with ratios against the
figures measured before the first burst of the same run.

    .venv/bin/python -m bench.api.bench_api_burst [--count 100] [--probe 200] [--tree DIR]
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from ps_runtime.ports import free_port

from bench import harness
from bench.api.api_defects_curl import start
from bench.harness import ROOT

SCHED_TOKEN = "bench-scheduler-token-0123"
CTL_TOKEN = "bench-controller-token-0123"
ONE_JOB = ("  - {{name: j{i}, model: resnet18, dataset_size: 1000, epochs: 1, batch_size: 32, "
           "max_gpus: 1}}\n")
REGISTRATION = {"id": "job-a", "servers": [{"ip": "10.0.0.3", "port": 9000}],
                "workers": [{"ip": "10.0.0.1", "port": 9001}, {"ip": "10.0.0.2", "port": 9001}]}


def aliases_yaml(levels: int = 12, fan: int = 9) -> bytes:
    lines = ["a0: &a0 [{name: x, model: resnet18, dataset_size: 1, epochs: 1, batch_size: 1, "
             "max_gpus: 1, junk: 1}]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * fan) + "]"
              for i in range(1, levels)]
    lines.append(f"jobs: *a{levels - 1}")
    return "\n".join(lines).encode()


def request(port: int, method: str, path: str, body: bytes | None = None,
            headers: dict | None = None) -> tuple[int, int]:
    """(status, answer bytes). A ``Content-Length`` header without a body: only the
    headers are sent (a body over the limit is refused from them; sending it would only
    meet a closed connection)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        if body is None and headers and "Content-Length" in headers:
            conn.putrequest(method, path)
            for k, v in headers.items():
                conn.putheader(k, v)
            conn.endheaders()
        else:
            conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, len(resp.read())
    finally:
        conn.close()


def memory_kb(pid: int) -> dict:
    """VmRSS (resident now) and VmHWM (the most it was ever resident) of ``pid``, KiB."""
    fields = dict(line.split(":", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {k: int(fields[k].split()[0]) for k in ("VmRSS", "VmHWM")}


def probe(port: int, paths: list[str], n: int) -> dict:
    """Latency of ``n`` valid GETs (cycled over ``paths``), milliseconds."""
    times = []
    for k in range(n):
        t0 = time.perf_counter()
        status, _ = request(port, "GET", paths[k % len(paths)])
        times.append((time.perf_counter() - t0) * 1000)
        assert status == 200, (paths[k % len(paths)], status)
    times.sort()
    return {"median_ms": statistics.median(times), "p99_ms": times[int(0.99 * (len(times) - 1))]}


def scheduler_kinds() -> dict:
    auth = {"Authorization": f"Bearer {SCHED_TOKEN}"}
    yaml_h = {**auth, "Content-Type": "application/yaml"}
    many = ("jobs:\n" + "".join(ONE_JOB.format(i=0) for _ in range(10_001))).encode()
    same_name = ("jobs:\n" + "".join(ONE_JOB.format(i=0) for _ in range(10_000))).encode()
    return {
        "GET id 2^63": lambda i: ("GET", "/jobs/9223372036854775808", None, {}),
        "cancel id 2^63": lambda i: ("POST", "/jobs/9223372036854775808/cancel", None, auth),
        "reused key, other body": lambda i: (
            "POST", "/submissions", ("jobs:\n" + ONE_JOB.format(i=i + 1)).encode(),
            {**yaml_h, "Idempotency-Key": "bench-key-0001"}),
        "dataset_size 1e14": lambda i: (
            "POST", "/submissions", ("jobs:\n" + ONE_JOB.format(i=i)).replace(
                "dataset_size: 1000", "dataset_size: 100000000000000").encode(), yaml_h),
        "form content type": lambda i: (
            "POST", "/submissions", b"jobs: []",
            {**auth, "Content-Type": "application/x-www-form-urlencoded"}),
        "nested YAML aliases": lambda i: ("POST", "/submissions", aliases_yaml(), yaml_h),
        "10,001 jobs": lambda i: ("POST", "/submissions", many, yaml_h),
        "10,000 jobs, one name": lambda i: ("POST", "/submissions", same_name, yaml_h),
        "body over 1 MiB (10 MB)": lambda i: ("POST", "/submissions", None,
                                              {**yaml_h, "Content-Length": str(10 << 20)}),
        "wrong token": lambda i: ("POST", "/submissions", b"jobs: []",
                                  {"Authorization": "Bearer wrong-token-0123456789",
                                   "Content-Type": "application/yaml"}),
        "bad cursor": lambda i: ("GET", "/jobs?cursor=abc&limit=0", None, {}),
    }


def controller_kinds() -> dict:
    auth = {"Authorization": f"Bearer {CTL_TOKEN}", "Content-Type": "application/json"}

    def reg(change) -> bytes:
        body = json.loads(json.dumps(REGISTRATION))
        change(body)
        return json.dumps(body).encode()
    return {
        "endpoint twice": lambda i: ("POST", "/jobs", reg(lambda b: b["workers"].append(
            dict(b["workers"][0], id="w9"))), auth),
        "PS equal to a worker": lambda i: ("POST", "/jobs", reg(lambda b: b["servers"].__setitem__(
            0, dict(b["workers"][0], id="s0"))), auth),
        "port 0": lambda i: ("POST", "/jobs", reg(lambda b: b["workers"][0].__setitem__(
            "port", 0)), auth),
        "form content type": lambda i: ("POST", "/jobs", b"id=job-a",
                                        {**auth, "Content-Type":
                                         "application/x-www-form-urlencoded"}),
        "unknown rank rule": lambda i: ("POST", "/rank", b'{"rule": "fastest"}', auth),
        "not JSON": lambda i: ("POST", "/jobs", b"{not json", auth),
        "body over 64 KiB (10 MB)": lambda i: ("POST", "/jobs", None,
                                               {**auth, "Content-Length": str(10 << 20)}),
        "wrong token": lambda i: ("POST", "/jobs", json.dumps(REGISTRATION).encode(),
                                  {**auth, "Authorization": "Bearer wrong-token-0123456789"}),
        "progress batch 4126.5": lambda i: ("POST", "/jobs/job-a/progress",
                                            b'{"worker": "w0", "batch": 4126.5}', auth),
        "OPTIONS": lambda i: ("OPTIONS", "/jobs", None, {}),
        "60 KB: 1,900 workers, 1 endpoint": lambda i: ("POST", "/jobs", reg(
            lambda b: b["workers"].extend([dict(b["workers"][0])] * 1900)), auth),
        "60 KB not JSON": lambda i: ("POST", "/jobs", b"{" + b"x" * 60_000, auth),
    }


def one_burst(proc, port: int, paths: list[str], kind: str, make, count: int, probes: int,
              base: dict, rss0: float) -> tuple[bool, float, float]:
    """``count`` bad requests of one kind, then valid ones again: whether any answer was
    not 4xx or the service died, and the valid median and p99 as multiples of ``base``.
    Prints the kind's row."""
    statuses: Counter = Counter()
    biggest = 0
    t0 = time.perf_counter()
    for i in range(count):
        method, path, body, headers = make(i)
        status, size = request(port, method, path, body, headers)
        statuses[status] += 1
        biggest = max(biggest, size)
    burst = time.perf_counter() - t0
    after = probe(port, paths, probes)
    mem = memory_kb(proc.pid)
    bad = [s for s in statuses if not 400 <= s < 500]
    p50, p99 = after["median_ms"] / base["median_ms"], after["p99_ms"] / base["p99_ms"]
    print(f"{kind:<30} {','.join(f'{s}x{n}' for s, n in sorted(statuses.items())):<16} "
          f"{burst:>8.2f} {biggest:>12} {after['median_ms']:>12.2f} {p50:>8.2f} "
          f"{after['p99_ms']:>8.2f} {p99:>8.2f} {mem['VmRSS'] / 1024:>8.1f} "
          f"{mem['VmRSS'] / rss0:>8.2f} {mem['VmHWM'] / 1024:>8.1f}", flush=True)
    return bool(bad) or proc.poll() is not None, p50, p99


def main() -> int:
    parser = harness.parser(__doc__, json_out=False)
    parser.add_argument("--count", type=int, default=100, help="bad requests per kind")
    parser.add_argument("--probe", type=int, default=200, help="valid requests per probe")
    parser.add_argument("--only", default=None, help="only the kinds whose name has this")
    parser.add_argument("--tree", type=Path, default=ROOT,
                        help="source tree whose services to start (PYTHONPATH=TREE)")
    args = parser.parse_args()
    tree = args.tree.resolve()
    work = Path(tempfile.mkdtemp(prefix="sluice-burst-"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("SLUICE_SCHEDULER_TOKEN", "SLUICE_ADMIN_TOKEN", "PYTHONPATH")}
    sp, cp = free_port(), free_port()
    procs = {
        "scheduler": (start(tree, ["scheduler", "--listen", f"127.0.0.1:{sp}", "--db",
                                   str(work / "jobs.db")],
                            {**env, "SLUICE_SCHEDULER_TOKEN": SCHED_TOKEN},
                            sp, work / "scheduler.log"), sp, ["/health", "/jobs?limit=10"],
                      scheduler_kinds()),
        "controller": (start(tree, ["controller", "--api", f"127.0.0.1:{cp}", "--ofp-port",
                                    str(free_port()), "--state-file", str(work / "ctl.json")],
                             {**env, "SLUICE_ADMIN_TOKEN": CTL_TOKEN}, cp,
                             work / "controller.log"), cp, ["/health", "/jobs", "/flows"],
                       controller_kinds()),
    }
    print(f"tree {tree}; load average {os.getloadavg()[0]:.2f} "
          f"(uptime: {Path('/proc/loadavg').read_text().strip()})")
    failed = False
    try:
        # a valid job in each, so the valid reads list something
        request(sp, "POST", "/submissions", ("jobs:\n" + ONE_JOB.format(i=0)).encode(),
                {"Authorization": f"Bearer {SCHED_TOKEN}", "Content-Type": "application/yaml",
                 "Idempotency-Key": "bench-key-0001"})
        request(cp, "POST", "/jobs", json.dumps(REGISTRATION).encode(),
                {"Authorization": f"Bearer {CTL_TOKEN}", "Content-Type": "application/json"})
        for name, (proc, port, paths, kinds) in procs.items():
            probe(port, paths, 50)                                   # warm up
            base, mem0 = probe(port, paths, args.probe), memory_kb(proc.pid)
            rss0 = mem0["VmRSS"]
            print(f"\n== {name} (pid {proc.pid}): valid GET {', '.join(paths)}: median "
                  f"{base['median_ms']:.2f} ms, p99 {base['p99_ms']:.2f} ms; "
                  f"RSS {rss0 / 1024:.1f} MiB before any burst "
                  f"(peak so far {mem0['VmHWM'] / 1024:.1f} MiB)")
            print(f"{'bad request (x' + str(args.count) + ')':<30} {'statuses':<16} "
                  f"{'burst s':>8} {'max answer B':>12} {'valid p50 ms':>12} "
                  f"{'x before':>8} {'p99 ms':>8} {'x before':>8} {'RSS MiB':>8} "
                  f"{'x before':>8} {'peak MiB':>8}")
            worst = {"p50": 0.0, "p99": 0.0}
            for kind, make in kinds.items():
                if args.only and args.only not in kind:
                    continue
                bad, p50, p99 = one_burst(proc, port, paths, kind, make, args.count,
                                          args.probe, base, rss0)
                failed |= bad
                worst = {"p50": max(worst["p50"], p50), "p99": max(worst["p99"], p99)}
            end = memory_kb(proc.pid)
            alive = proc.poll() is None
            print(f"{name}: RSS before {rss0 / 1024:.1f} MiB, peak {end['VmHWM'] / 1024:.1f} MiB, "
                  f"after all bursts {end['VmRSS'] / 1024:.1f} MiB "
                  f"({end['VmRSS'] / rss0:.2f}x before); valid requests after a burst, worst: "
                  f"p50 {worst['p50']:.2f}x, p99 {worst['p99']:.2f}x before; "
                  f"still serving: {alive}")
    finally:
        for proc, *_ in procs.values():
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    print("\nevery bad request answered 4xx, both services alive:", not failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
