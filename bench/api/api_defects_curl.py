"""Each REST API defect the contract tests guard, reproduced with ``curl`` on two trees.

Starts ``sluice scheduler`` and ``sluice controller`` (no switch connected) from a source
tree (``PYTHONPATH=TREE``, run in TREE) with admin tokens on free loopback ports, sends
each request with ``curl`` and records the status, the answer's size, curl's time and the
first ~200 bytes of the answer (or a gist where the answer is long). With ``--before``
and ``--after`` it does so for both trees and prints a Markdown table side by side.

    git worktree add --detach /tmp/wt-before 441f1ab     # a tree without the fixes
    .venv/bin/python -m bench.api.api_defects_curl --before /tmp/wt-before --after .
    git worktree remove --force /tmp/wt-before
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from ps_runtime.ports import free_port

from bench import harness
from bench.harness import ROOT

SCHED_TOKEN = "curl-scheduler-token-0123"
CTL_TOKEN = "curl-controller-token-0123"
BIG = 2 ** 63          # one past the store's (SQLite's) largest integer
JOB = ("{{name: {name}, model: resnet18, dataset_size: {size}, epochs: 1, batch_size: 32, "
       "max_gpus: 1}}")


def registration(i: int, **change) -> dict:
    job = {"id": f"job-{i}", "servers": [{"ip": "10.0.0.3", "port": 10000 + i}],
           "workers": [{"ip": "10.0.0.1", "port": 20000 + i},
                       {"ip": "10.0.0.2", "port": 20000 + i}]}
    job.update(change)
    return job


def alias_bomb(size: int = 600_000) -> str:
    """About ``size`` bytes of YAML: one bad job and a job list of aliases to it."""
    head = f"bad: &b {{name: x, model: nope{'x' * 200}, dataset_size: 1, epochs: 1, " \
           "batch_size: 1, max_gpus: 1}\njobs: ["
    return head + ", ".join(["*b"] * ((size - len(head)) // 4)) + "]\n"


def nested_aliases(levels: int = 12, fan: int = 9) -> str:
    """The "billion laughs": 9^11 references to one job from a few hundred bytes."""
    lines = ["a0: &a0 [{name: x, model: resnet18, dataset_size: 1, epochs: 1, batch_size: 1, "
             "max_gpus: 1}]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * fan) + "]"
              for i in range(1, levels)]
    return "\n".join(lines + [f"jobs: *a{levels - 1}"]) + "\n"


def _started(body: bytes) -> str:
    jobs = json.loads(body)
    jobs = jobs["jobs"] if isinstance(jobs, dict) else jobs
    started = [j["name"] for j in jobs if j.get("started_at")]
    return (f"{len(started)} of {len(jobs)} jobs started 4 s after the submission "
            f"({', '.join(started) or 'none'}); arrivals 0-120 s")


def _schedule(body: bytes) -> str:
    answer = json.loads(body)
    sched = answer.get("schedule")
    if not sched:
        return f"jobs {answer.get('jobs')}, no start-not-before in the answer"
    return "not_before - submission: " + ", ".join(
        f"{s['arrival']:g}" for s in sched) + " s"


def _page(key: str):
    def gist(body: bytes) -> str:
        answer = json.loads(body)
        items = answer if isinstance(answer, list) else answer.get(key, [])
        extra = "" if isinstance(answer, list) else \
            f", next {answer.get('next')!r}, total {answer.get('total')}"
        return f"{len(items)} {key} in one answer{extra}"
    return gist


def _rules_by_level(body: bytes) -> str:
    lines = [ln for ln in body.decode().splitlines() if ln.startswith("sluice_rules_by_level{")]
    return f"{len(lines)} sluice_rules_by_level series: " + ", ".join(
        ln.split("{", 1)[1].split("}")[0] for ln in lines) if lines else \
        "no sluice_rules_by_level series (no rules yet)"


def _spec(body: bytes) -> str:
    schemas = json.loads(body)["components"]["schemas"]
    rule = schemas.get("RankRule", {}).get("properties", {}).get("rule", {})
    ip = schemas.get("Endpoint", {}).get("properties", {}).get("ip", {})
    return f"RankRule.rule enum {rule.get('enum')}; Endpoint.ip format {ip.get('format')}"


def _state_enum(body: bytes) -> str:
    params = json.loads(body)["paths"]["/jobs"]["get"].get("parameters", [])
    state = next((p["schema"] for p in params if p["name"] == "state"), {})
    items = state.get("items") or next((a.get("items") for a in state.get("anyOf", [])
                                        if a.get("type") == "array"), {})
    return f"GET /jobs ?state= items: enum {items.get('enum')}"


# (defect, service, curl arguments after the URL's path, gist of a long answer or None).
# {A} is the admin token's header, {F} a file of this run; a row that is a tuple of rows
# runs them in order (the later ones show the effect).
ROWS = [
    ("`arrival` ignored by the service", "S",
     ["-X", "POST", "{url}/submissions", "{A}", "-H", "Content-Type: application/yaml",
      "-H", "Idempotency-Key: mixed-0001", "--data-binary", "@examples/jobs/mixed.yaml"],
     _schedule),
    ("", "S", ["{url}/jobs"], _started),
    ("GET an id past the store's integers", "S", [f"{{url}}/jobs/{BIG}"], None),
    ("cancel that id", "S", ["-X", "POST", f"{{url}}/jobs/{BIG}/cancel", "{A}", "-d", ""], None),
    ("Idempotency-Key reused with another file", "S",
     ["-X", "POST", "{url}/submissions", "{A}", "-H", "Content-Type: application/yaml",
      "-H", "Idempotency-Key: mixed-0001", "--data-binary", "@examples/jobs/layers.yaml"],
     None),
    ("no bound on `dataset_size`", "S",
     ["-X", "POST", "{url}/submissions", "{A}", "-H", "Content-Type: application/yaml",
      "--data-binary", "jobs:\n  - " + JOB.format(name="huge", size=10 ** 14) + "\n"], None),
    ("cancel without a body", "S", ["-X", "POST", "{url}/jobs/2/cancel", "{A}"], None),
    ("form body (`curl -d`) to the scheduler", "S",
     ["-X", "POST", "{url}/submissions", "{A}", "-d", "jobs: []"], None),
    ("600 KB YAML, one bad job aliased 150,000 times", "S",
     ["-X", "POST", "{url}/submissions", "{A}", "-H", "Content-Type: application/yaml",
      "--data-binary", "@{F}alias_bomb.yaml"], None),
    ("nested aliases (9^11 references, 900 B)", "S",
     ["-X", "POST", "{url}/submissions", "{A}", "-H", "Content-Type: application/yaml",
      "--data-binary", "@{F}nested.yaml"], None),
    ("10,001 jobs (count checked after the parse)", "S",
     ["-X", "POST", "{url}/submissions", "{A}", "-H", "Content-Type: application/yaml",
      "--data-binary", "@{F}many.yaml"], None),
    ("spec: the scheduler's `state` enum", "S", ["{url}/openapi.json"], _state_enum),
    ("metrics: `rules_by_level` without zero levels (1 job)", "C", ["{url}/metrics"],
     _rules_by_level),
    ("form body (`curl -d`) to the controller", "C",
     ["-X", "POST", "{url}/jobs", "{A}", "-d", "id=job-a"], None),
    ("registration: the same endpoint twice", "C",
     ["-X", "POST", "{url}/jobs", "{A}", "-H", "Content-Type: application/json", "-d",
      json.dumps(registration(900, workers=[{"ip": "10.0.0.1", "port": 9001},
                                            {"ip": "10.0.0.1", "port": 9001}]))], None),
    ("registration: port 0", "C",
     ["-X", "POST", "{url}/jobs", "{A}", "-H", "Content-Type: application/json", "-d",
      json.dumps(registration(901, workers=[{"ip": "10.0.0.1", "port": 0}]))], None),
    ("registration: the PS equal to a worker", "C",
     ["-X", "POST", "{url}/jobs", "{A}", "-H", "Content-Type: application/json", "-d",
      json.dumps(registration(902, servers=[{"ip": "10.0.0.1", "port": 9001}],
                              workers=[{"ip": "10.0.0.1", "port": 9001}]))], None),
    ("`GET /jobs` unpaged (300 jobs registered)", "C", ["{url}/jobs"], _page("jobs")),
    ("`GET /flows` unpaged (300 jobs, 1,200 flows)", "C", ["{url}/flows"], _page("flows")),
    ("spec: rank rule enum, `ip` format", "C", ["{url}/openapi.json"], _spec),
    ("spec: `Allow` of OPTIONS", "C", ["-i", "-X", "OPTIONS", "{url}/jobs"], None),
    ("spec: `batch` 4126.0 (integral) / 4126.5", "C",
     ["-X", "POST", "{url}/jobs/job-0/progress", "{J}", "-H", "Content-Type: application/json",
      "-d", '{"worker": "w0", "batch": 4126.0}'], None),
    ("", "C",
     ["-X", "POST", "{url}/jobs/job-0/progress", "{J}", "-H", "Content-Type: application/json",
      "-d", '{"worker": "w0", "batch": 4126.5}'], None),
]


def start(tree: Path, args: list[str], env: dict, port: int, log: Path,
          new_session: bool = False) -> subprocess.Popen:
    """``sluice ARGS`` from ``tree``, once it answers /health; ``new_session``: in a
    process group of its own (with the children it starts, ended by ``os.killpg``)."""
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "sluice", *args], cwd=tree,
                                env={**env, "PYTHONPATH": str(tree)},
                                stdout=out, stderr=out, start_new_session=new_session)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{args[0]} exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"{args[0]} did not start: {log.read_text()[-2000:]}")


def curl(args: list[str], work: Path) -> dict:
    out = work / "answer"
    cmd = ["curl", "-s", "-o", str(out), "-w", "%{http_code} %{size_download} %{time_total}",
           "--max-time", "120", *args]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
    code, size, secs = (res.stdout.split() + ["0", "0", "0"])[:3]
    body = out.read_bytes() if out.exists() else b""
    out.unlink(missing_ok=True)
    return {"status": int(code), "bytes": int(size), "s": float(secs), "body": body}


def shown(args: list[str], service: str) -> str:
    """The command as a user would type it ($S/$C the service, $T its admin token)."""
    words = []
    for a in args:
        if a in ("{A}", "{J}"):
            words += ["-H", "'Authorization: Bearer " + ("$T'" if a == "{A}" else "$JOB_TOKEN'")]
            continue
        a = a.replace("{url}", f"${service}").replace("{F}", "")
        if len(a) > 70:
            a = a[:67] + "..."
        if "\n" in a:
            words.append("$'" + a.replace("\n", "\\n").replace("'", "\\'") + "'")
        elif a and all(c.isalnum() or c in "-/$:.@_" for c in a):
            words.append(a)
        else:
            words.append("'" + a.replace("'", "'\\''") + "'")
    return "curl " + " ".join(words)


def run_tree(tree: Path) -> list[dict]:
    """Every row of ROWS against the services of ``tree``."""
    work = Path(tempfile.mkdtemp(prefix="sluice-defects-"))
    (work / "alias_bomb.yaml").write_text(alias_bomb())
    (work / "nested.yaml").write_text(nested_aliases())
    (work / "many.yaml").write_text("jobs:\n" + "".join(
        "  - " + JOB.format(name="j", size=1000) + "\n" for _ in range(10_001)))
    env = {k: v for k, v in os.environ.items()
           if k not in ("SLUICE_SCHEDULER_TOKEN", "SLUICE_ADMIN_TOKEN", "PYTHONPATH")}
    sp, cp = free_port(), free_port()
    procs = []
    results = []
    try:
        procs.append(start(tree, ["scheduler", "--listen", f"127.0.0.1:{sp}", "--db",
                                  str(work / "jobs.db"), "--slot", "0.2"],
                           {**env, "SLUICE_SCHEDULER_TOKEN": SCHED_TOKEN}, sp,
                           work / "scheduler.log"))
        procs.append(start(tree, ["controller", "--api", f"127.0.0.1:{cp}", "--ofp-port",
                                  str(free_port()), "--state-file", str(work / "ctl.json")],
                           {**env, "SLUICE_ADMIN_TOKEN": CTL_TOKEN}, cp,
                           work / "controller.log"))
        urls = {"S": f"http://127.0.0.1:{sp}", "C": f"http://127.0.0.1:{cp}"}
        tokens = {"S": SCHED_TOKEN, "C": CTL_TOKEN}
        registered: list = []

        def register(upto: int) -> None:     # job-0 ... job-(upto-1), 4 flows each
            for i in range(len(registered), upto):
                res = curl(["-X", "POST", f"{urls['C']}/jobs", "-H",
                            f"Authorization: Bearer {CTL_TOKEN}", "-H",
                            "Content-Type: application/json", "-d",
                            json.dumps(registration(i))], work)
                assert res["status"] in (200, 201), res
                registered.append(json.loads(res["body"]).get("token"))
        register(1)
        job_token = registered[0]
        submitted = None
        for defect, service, args, gist in ROWS:
            if "unpaged" in defect:
                register(300)
            if args == ["{url}/jobs"] and service == "S":
                time.sleep(max(0.0, submitted + 4.0 - time.time()))
            real = [a.replace("{url}", urls[service]).replace("{F}", f"{work}/")
                    for a in args]
            real = [x for a in real for x in (
                ["-H", f"Authorization: Bearer {tokens[service]}"] if a == "{A}" else
                ["-H", f"Authorization: Bearer {job_token}"] if a == "{J}" else [a])]
            res = curl(real, work)
            if "Idempotency-Key: mixed-0001" in args and submitted is None:
                submitted = time.time()
            body = res.pop("body")
            try:
                res["gist"] = gist(body) if gist and res["status"] in (200, 201) else None
            except (ValueError, KeyError, TypeError) as err:
                res["gist"] = f"(unreadable: {err})"
            head = body[:200].decode("ascii", errors="backslashreplace")
            res["head"] = " ".join(head.split())
            res["defect"], res["curl"] = defect, shown(args, service)
            res["alive"] = all(p.poll() is None for p in procs)
            results.append(res)
            print(f"{tree}: {defect or '  (same)'}: {res['status']} {res['bytes']} B "
                  f"{res['s']:.3f} s {res['gist'] or res['head'][:120]}", flush=True)
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)
    return results


def token_rule(tree: Path) -> list[dict]:
    """Each service started with a one-character admin token: exit status, last line."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SLUICE_SCHEDULER_TOKEN", "SLUICE_ADMIN_TOKEN")}
    rows = []
    work = Path(tempfile.mkdtemp(prefix="sluice-token-"))
    for var, args in (("SLUICE_SCHEDULER_TOKEN", ["scheduler", "--listen",
                                                  f"127.0.0.1:{free_port()}", "--db",
                                                  str(work / "j.db")]),
                      ("SLUICE_ADMIN_TOKEN", ["controller", "--api",
                                              f"127.0.0.1:{free_port()}", "--ofp-port",
                                              str(free_port())])):
        proc = subprocess.Popen([sys.executable, "-m", "sluice", *args], cwd=tree,
                                env={**env, var: "x", "PYTHONPATH": str(tree)},
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _, err = proc.communicate(timeout=15)
            what = f"exit {proc.returncode}: " + (err.strip().splitlines() or [""])[-1]
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            what = "still serving after 15 s (the token was taken)"
        rows.append({"defect": "admin token of 1 character" if not rows else "",
                     "curl": f"{var}=x sluice {args[0]} ...", "status": proc.returncode,
                     "bytes": 0, "s": 0.0, "gist": what, "head": "", "alive": True})
    shutil.rmtree(work, ignore_errors=True)
    return rows


def cell(res: dict) -> str:
    what = res["gist"] or res["head"]
    if len(what) > 110:
        what = what[:107] + "..."
    size = f"{res['bytes'] / 1e6:.1f} MB" if res["bytes"] > 100_000 else f"{res['bytes']} B"
    if not res["bytes"] and not res["head"]:         # a service's start, not a request
        return what.replace("|", "\\|").replace("`", "'")
    return (f"**{res['status']}** ({size}, {res['s']:.2f} s) "
            + what.replace("|", "\\|").replace("`", "'"))


def main() -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--before", type=Path, default=None, help="tree before the fixes")
    parser.add_argument("--after", type=Path, default=ROOT, help="tree with the fixes")
    args = parser.parse_args()
    runs = {"after": run_tree(args.after.resolve()) + token_rule(args.after.resolve())}
    if args.before:
        runs["before"] = run_tree(args.before.resolve()) + token_rule(args.before.resolve())
    harness.write_json(args.json, runs)
    cols = ["before", "after"] if args.before else ["after"]
    print("\n| defect | curl | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for k, row in enumerate(runs["after"]):
        cmd = row["curl"].replace("|", "\\|")
        print(f"| {row['defect'] or '(then)'} | `{cmd}` | "
              + " | ".join(cell(runs[c][k]) for c in cols) + " |")
    bad = [r["defect"] or r["curl"] for r in runs["after"]
           if r["status"] >= 500 or not r["alive"]]
    print(f"\nafter: no 5xx, services alive: {not bad}" + (f" ({bad})" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
