"""Controller benchmark: reaction latency and flow-mod throughput, sluice vs plain os-ken.

Both controllers run as real processes against the same Mininet/OVS fabric (two-rack,
userspace datapath, via the fabric harness and its lock), one after the other in the
same run:

- reaction latency: a progress report (HTTP POST ``?wait=1``) that flips the ranking of
  two jobs (4 rules change) until the switches' barrier replies, at a paced rate
  (default 200 reports/s); the reference is an HTTP POST to the plain app that modifies
  4 rules and waits for the barrier.
- flow-mod throughput: registering 10 jobs of 2 servers x 256 workers (~5,160 rules) and
  removing them again, each request until the barrier replies; the reference sends about
  the same number of flow mods from the plain app (one request, to barrier).

    sudo .venv/bin/python -m bench.controller.bench_controller [--reports 1000] [--rate 200]

Prints one line per figure (and JSON with --json). Progress goes to stderr.
"""

from __future__ import annotations

import dataclasses

import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench import harness
from sluice_common import rank_rules
from bench.harness import ROOT

from controller.client import ControllerClient
from mininet_fabric.fabric import Fabric
from ps_runtime.ports import free_port

PY = str(ROOT / ".venv" / "bin" / "python")
REACTION_RATE, REACTION_BOUND_MS = 200.0, 5.0      # the bound: median < 5 ms at 200/s
SLUICE = str(ROOT / ".venv" / "bin" / "sluice")
ADMIN = "bench-admin-token-0123"


def log(text: str) -> None:
    print(f"bench_controller: {text}", file=sys.stderr, flush=True)



@contextmanager
def process(argv: list[str], health_url: tuple[str, int], env=None):
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                            stderr=open("/tmp/bench-controller.log", "a"))
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                c = http.client.HTTPConnection(*health_url, timeout=1)
                c.request("GET", "/health")
                c.getresponse().read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{argv[:3]} did not start (see /tmp/bench-controller.log)")
                time.sleep(0.2)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def quantiles(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {"median_ms": round(statistics.median(ms), 3),
            "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 3),
            "max_ms": round(ms[-1], 3), "n": len(ms)}


def paced(n: int, rate: float, call) -> tuple[list[float], float]:
    """Call ``call(i)`` n times at ``rate``/s (open-loop schedule, one client);
    returns per-call latencies (ms) and the achieved rate."""
    lat = []
    start = time.monotonic()
    for i in range(n):
        due = start + i / rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        t0 = time.monotonic()
        call(i)
        lat.append((time.monotonic() - t0) * 1000)
    return lat, n / (time.monotonic() - start)


def process_figures(pid: int, switches: int, idle_s: float = 3.0) -> dict:
    """Threads of the controller process (os-ken native hub: real threads) and its CPU
    use while idle (port-stats polling, LLDP) with ``switches`` connected."""
    def cpu() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    threads = int(re.search(r"Threads:\s+(\d+)", Path(f"/proc/{pid}/status").read_text()).group(1))
    c0 = cpu()
    time.sleep(idle_s)
    return {"threads": threads, "switches": switches,
            "idle_cpu_percent": round(100 * (cpu() - c0) / idle_s, 1)}


def wait_hosts(client: ControllerClient, n: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        m = re.search(r"^sluice_hosts_located (\d+)", client.metrics(), re.M)
        if m and int(m.group(1)) >= n:
            return
        time.sleep(0.2)
    raise RuntimeError("the controller did not locate every host")


def flow_mods_total(client: ControllerClient) -> float:
    m = re.search(r"^sluice_flow_mods_total (\S+)", client.metrics(), re.M)
    return float(m.group(1)) if m else 0.0


@dataclass(frozen=True)
class LoadConfig:
    """What both controllers are put through, built once from the command line."""
    reports: int = 1000           # progress reports (rule changes), paced
    rate: float = 200.0           # of them per second
    rounds: int = 3               # rounds of 10 big jobs added and removed
    rank: str | None = None       # the sluice controller's ranking rule (None: its default)


def bench_sluice(cfg: LoadConfig) -> dict:
    ofp, api = free_port(), free_port()
    env = dict(os.environ, SLUICE_ADMIN_TOKEN=ADMIN)
    argv = [SLUICE, "controller", "--topology", "two-rack", "--ofp-port", str(ofp),
            "--api", f"127.0.0.1:{api}", "--log-level", "warning"]
    if cfg.rank:
        argv += ["--rank", cfg.rank]
    out = {"rank": cfg.rank or "default"}
    with process(argv, ("127.0.0.1", api), env) as proc, \
            Fabric("two-rack", controller=f"127.0.0.1:{ofp}") as fab:
        client = ControllerClient(f"http://127.0.0.1:{api}", ADMIN)
        wait_hosts(client, len(fab.topology.hosts))
        out["process"] = process_figures(proc.pid, len(fab.topology.switches))
        log(f"sluice: {out['process']}")
        tok = {}
        for job, (w, s, port) in {"a": ("10.0.0.1", "10.0.0.3", 9000),
                                  "b": ("10.0.0.2", "10.0.0.4", 9100)}.items():
            # Equal sizes: every report moves its job ahead of the other under each
            # rule (progress: the other is now behind; remaining: it has less left).
            tok[job] = client.register_job(
                {"id": job, "servers": [{"id": "s0", "ip": s, "port": port}],
                 "workers": [{"id": "w0", "ip": w, "port": port + 1}],
                 "total_batches": 10 ** 6, "bytes_per_batch": 10 ** 6}, wait=True)["token"]
        # b starts one batch ahead, so each report below (a, b, a, ...) moves the
        # reported job level with or past the other: the ranking changes every time.
        client.progress("b", "w0", 2, tok["b"], wait=True)
        changed = []

        def report(i):
            job = "a" if i % 2 == 0 else "b"
            ans = client.progress(job, "w0", i + 2, tok[job], wait=True)
            if not ans.get("applied"):
                raise RuntimeError(f"report {i} was not applied: {ans}")
            changed.append(ans["changed_rules"])

        log(f"sluice: {cfg.reports} progress reports at {cfg.rate:g}/s")
        lat, achieved = paced(cfg.reports, cfg.rate, report)
        out["reaction"] = {**quantiles(lat), "rate_per_s": round(achieved, 1),
                           "rules_changed_per_report": statistics.median(changed)}
        # 10 jobs x (2 servers, 256 workers on h1/h2): 516 distinct rules each (push
        # flows of workers sharing a host share a match), ~5,160 flow mods per round.
        servers = [{"id": f"s{i}", "ip": ("10.0.0.3", "10.0.0.4")[i], "port": 30000 + i}
                   for i in range(2)]
        workers = [{"id": f"w{j}", "ip": ("10.0.0.1", "10.0.0.2")[j % 2], "port": 40000 + j}
                   for j in range(256)]
        rounds = []
        for r in range(cfg.rounds):
            before, t0 = flow_mods_total(client), time.monotonic()
            for k in range(10):
                ans = client.register_job({"id": f"big{k}",
                                           "servers": [{**sv, "port": sv["port"] + 10 * k}
                                                       for sv in servers],
                                           "workers": [{**w, "port": w["port"] + 300 * k}
                                                       for w in workers]}, wait=True)
                if not ans.get("applied"):
                    raise RuntimeError("a big job's rules were not confirmed by barrier")
            add_s, adds = time.monotonic() - t0, flow_mods_total(client) - before
            before, t0 = flow_mods_total(client), time.monotonic()
            for k in range(10):
                if not client.remove_job(f"big{k}", wait=True).get("applied"):
                    raise RuntimeError("a big job's removal was not confirmed by barrier")
            del_s, dels = time.monotonic() - t0, flow_mods_total(client) - before
            rounds.append((adds / add_s, dels / del_s, adds, dels))
            log(f"sluice: round {r}: {adds:.0f} adds in {add_s * 1000:.0f} ms, "
                f"{dels:.0f} deletes in {del_s * 1000:.0f} ms")
        out["throughput"] = {
            "add_per_s": round(statistics.median(x[0] for x in rounds)),
            "delete_per_s": round(statistics.median(x[1] for x in rounds)),
            "flow_mods_per_round": rounds[0][2]}
    return out


def bench_plain(cfg: LoadConfig) -> dict:
    ofp, api = free_port(), free_port()
    argv = [PY, str(Path(__file__).with_name("plain_forwarding_app.py")), "--ofp-port", str(ofp),
            "--api", f"127.0.0.1:{api}"]
    out = {}
    with process(argv, ("127.0.0.1", api)), \
            Fabric("two-rack", controller=f"127.0.0.1:{ofp}") as fab:
        conn = http.client.HTTPConnection("127.0.0.1", api, timeout=60)

        def post(body):
            data = json.dumps(body).encode()
            conn.request("POST", "/flowmods", body=data,
                         headers={"Content-Length": str(len(data))})
            return json.loads(conn.getresponse().read())

        switches = len(fab.topology.switches)
        post({"n": 2})   # warm-up
        log(f"plain: {cfg.reports} 4-rule changes at {cfg.rate:g}/s")
        # 4 flow mods in all per call, like one sluice report (spread over the switches)
        lat, achieved = paced(cfg.reports, cfg.rate,
                              lambda i: post({"n": 1 if i % 3 else 2, "dscp": 8 * (i % 8)}))
        out["reaction"] = {**quantiles(lat), "rate_per_s": round(achieved, 1)}
        per_switch = 5120 // switches
        rounds = []
        for r in range(cfg.rounds):
            add_s = post({"n": per_switch, "dscp": 56})["latency_ms"] / 1000
            del_s = post({"n": per_switch, "delete": True})["latency_ms"] / 1000
            total = per_switch * switches
            rounds.append((total / add_s, total / del_s))
            log(f"plain: round {r}: {total} adds in {add_s * 1000:.0f} ms, "
                f"{total} deletes in {del_s * 1000:.0f} ms")
        out["throughput"] = {"add_per_s": round(statistics.median(x[0] for x in rounds)),
                             "delete_per_s": round(statistics.median(x[1] for x in rounds)),
                             "flow_mods_per_round": per_switch * switches}
    return out


def add_load_arguments(ap) -> None:
    """The load options, shared with bench_controller_ab (one place: a new option reaches
    both, as LoadConfig's fields do)."""
    ap.add_argument("--reports", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rank", default=None, choices=rank_rules.names(),
                    help="controller ranking rule (default: the controller's default)")


def main() -> int:
    ap = harness.parser(__doc__)
    add_load_arguments(ap)
    args = ap.parse_args()
    cfg = LoadConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(LoadConfig)})
    result = {"sluice": bench_sluice(cfg), "plain_os_ken": bench_plain(cfg)}
    s, p = result["sluice"], result["plain_os_ken"]
    print(f"reaction latency (report -> barrier), {s['reaction']['rate_per_s']}/s: "
          f"sluice median {s['reaction']['median_ms']} ms p99 {s['reaction']['p99_ms']} ms | "
          f"plain os-ken median {p['reaction']['median_ms']} ms p99 {p['reaction']['p99_ms']} ms "
          f"| ratio (median) {s['reaction']['median_ms'] / p['reaction']['median_ms']:.2f}")
    print(f"flow-mod throughput to barrier: sluice add {s['throughput']['add_per_s']}/s "
          f"delete {s['throughput']['delete_per_s']}/s | plain os-ken add "
          f"{p['throughput']['add_per_s']}/s delete {p['throughput']['delete_per_s']}/s | "
          f"ratio (add) {s['throughput']['add_per_s'] / p['throughput']['add_per_s']:.2f}")
    verdicts = reaction_verdicts(s["reaction"])
    if not verdicts:
        print(f"no verdict: the reports went at {s['reaction']['rate_per_s']}/s, not "
              f"{REACTION_RATE:.0f}/s", flush=True)
    else:
        result["verdicts"] = verdicts
        print("VERDICTS " + " ".join(f"{k}={'met' if v else 'NOT met'}"
                                     for k, v in verdicts.items()), flush=True)
    harness.write_json(args.json, result)
    return 0


def reaction_verdicts(reaction: dict) -> dict[str, bool]:
    """The bound on the reaction to a level change: median under 5 ms at 200
    reports a second (judged only at that rate: another rate is another experiment)."""
    if abs(reaction["rate_per_s"] - REACTION_RATE) > 0.05 * REACTION_RATE:
        return {}
    return {"reaction_median_under_5ms_at_200_per_s": reaction["median_ms"] < REACTION_BOUND_MS}


if __name__ == "__main__":
    sys.exit(main())
