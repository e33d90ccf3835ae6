"""The soak's controller half alone (bench/reliability/soak.py without the scheduler beside it).

    .venv/bin/python -m bench.reliability.soak_controller [--minutes 2] [--rate 2000] [--json OUT.json]

Same controller server (100 jobs x 8 workers on leaf-spine, real HTTP API, in-memory
fabric), same open-loop load (every report ``?wait=1``), same 10 s windows and loss
check as bench/reliability/soak.py; on a host with two cores the scheduler half takes a
core of its own, so this separates what the controller holds from what the two together
hold. Also prints the controller process's CPU time per answered report.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import tempfile
import threading
import time
from pathlib import Path

from bench.reliability import soak
from bench.reliability.soak_analysis import growth_pct, pct, windows

from bench import harness


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("--minutes", type=float, default=2.0)
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--workers", type=int, default=8)
    args = ap.parse_args(argv)
    if args.minutes <= 0 or args.rate <= 0:
        ap.error("--minutes and --rate must be > 0")
    work = Path(tempfile.mkdtemp(prefix="sluice-soak-controller-"))
    seconds = args.minutes * 60
    proc, port, tokens = soak.start_controller(work, args.jobs, args.workers)
    q: mp.Queue = mp.Queue()
    load = mp.Process(target=soak.controller_load,
                      args=(port, tokens, args.workers, [(args.rate, seconds)], q))
    cpu0, t0 = cpu_s(proc.pid), time.monotonic()
    load.start()
    rss: list[tuple[float, float]] = []
    sampling = threading.Event()

    def sample_rss() -> None:
        while not sampling.wait(1.0):
            rss.append((time.monotonic() - t0, soak.rss_mb(proc.pid)))

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    phase = q.get()           # ("controller", rate, records, unsent, seconds)
    acked = q.get()[1]        # ("acked", [[job, worker, batch], ...])
    load.join()
    sampling.set()
    sampler.join()
    cpu = cpu_s(proc.pid) - cpu0
    from controller.client import ControllerClient
    held = {j["id"]: j["batches"] for j in ControllerClient(f"http://127.0.0.1:{port}",
                                                            soak.ADMIN).jobs()}
    missing = sum(1 for j, w, b in acked if held.get(j, {}).get(w, 0) < b)
    proc.terminate()
    records, unsent = phase[2], phase[3]
    ok = [r[1] for r in records if r[2]]
    result = {"offered_per_s": args.rate, "minutes": args.minutes,
              "answered_per_s": round(len(ok) / seconds, 1),
              "p50_ms": pct(ok, 0.5), "p99_ms": pct(ok, 0.99),
              "errors": len(records) - len(ok), "unsent": unsent,
              "acked_batches_missing": missing,
              "reports_lost": len(records) - len(ok) + missing,
              "server_cpu_ms_per_report": round(1000 * cpu / max(1, len(ok)), 3),
              "rss_growth_pct_after_warmup": growth_pct(rss, min(120.0, seconds / 5)),
              "load_avg": os.getloadavg(), "windows": windows(records, seconds, rss)}
    print(json.dumps({k: v for k, v in result.items() if k != "windows"}, indent=1))
    harness.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
