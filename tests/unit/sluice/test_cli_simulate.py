"""`sluice simulate` and `sluice validate`, run as the user runs them (subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from job_scheduler.simulation.workloads import SHARED_WORKLOADS

from support.paths import REPO as ROOT
SLUICE = [sys.executable, "-m", "sluice"]
TIRESIAS = SHARED_WORKLOADS / "tiresias_60_job.csv"
if not TIRESIAS.exists():
    TIRESIAS = ROOT.parent / "shared" / "workloads" / "tiresias_60_job.csv"

JOBS_YAML = """\
jobs:
  - {name: a, model: resnet18, dataset_size: 20000, epochs: 1, batch_size: 32, max_gpus: 4}
  - {name: b, model: vgg16, dataset_size: 10000, epochs: 2, batch_size: 32, max_gpus: 8,
     arrival: 30}
  - {name: c, model: googlenet, dataset_size: 30000, epochs: 1, batch_size: 64, max_gpus: 2,
     arrival: 45}
"""


def sluice(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([*SLUICE, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture()
def jobs_file(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.yaml"
    path.write_text(JOBS_YAML)
    return path


def test_simulate_json_is_exactly_one_object_with_every_policy(jobs_file: Path):
    r = sluice("simulate", "--workload", str(jobs_file), "--topology", "two-rack",
               "--policies", "lyapunov,single,random,fifo,tetris,las", "--json", "--seed", "4")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)                  # the whole stdout is one JSON document
    assert set(out) == {"policies", "workload", "topology", "seed", "device_profile",
                        "network_model"}
    assert out["topology"] == "two-rack" and out["seed"] == 4
    assert list(out["policies"]) == ["lyapunov", "single", "random", "fifo", "tetris", "las"]
    for name, m in out["policies"].items():
        assert set(m) == {"avg_jct", "median_jct", "p95_jct", "avg_wait", "makespan",
                          "gpu_util", "jobs", "job_results"}, name
        assert m["jobs"] == 3 and 0 < m["gpu_util"] <= 1
        assert m["median_jct"] <= m["p95_jct"] and m["avg_jct"] > 0 and m["avg_wait"] >= 0


def test_simulate_takes_every_registered_placement_slurm_too(jobs_file: Path):
    """--placement offers every placement the policies know (the registry), so the
    demo's arm a (FIFO on Slurm's nodes) can be simulated too."""
    from job_scheduler.core.policies.base import PLACEMENTS
    assert "slurm" in PLACEMENTS
    r = sluice("simulate", "--workload", str(jobs_file), "--topology", "two-rack",
               "--policies", "fifo", "--placement", "slurm", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["policies"]["fifo"]["jobs"] == 3


def test_simulate_accepts_a_topology_yaml_path(jobs_file: Path, tmp_path: Path):
    topo = ROOT / "topologies" / "builtin" / "single-rack.yaml"
    r = sluice("simulate", "--workload", str(jobs_file), "--topology", str(topo),
               "--policies", "fifo,lyapunov", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["topology"] == "single-rack"


def test_simulate_tiresias_trace_table_and_plots(tmp_path: Path):
    plots = tmp_path / "plots"
    r = sluice("simulate", "--workload", str(TIRESIAS), "--trace-format", "tiresias",
               "--jobs", "20", "--policies", "lyapunov,las", "--slot", "5", "--plot", str(plots))
    assert r.returncode == 0, r.stderr
    assert "avg JCT" in r.stdout and "lyapunov" in r.stdout and "las" in r.stdout
    pngs = sorted(p.name for p in plots.glob("*.png"))
    assert pngs == ["avg_jct.png", "jct_cdf.png", "lyapunov_queues.png"]
    for p in plots.glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000


def test_simulate_scenario_is_seeded(tmp_path: Path):
    args = ["simulate", "--workload", "proteus-big-concentrated", "--jobs", "15",
            "--policies", "random,lyapunov", "--json"]
    a = json.loads(sluice(*args, "--seed", "1").stdout)
    b = json.loads(sluice(*args, "--seed", "1").stdout)
    c = json.loads(sluice(*args, "--seed", "2").stdout)
    assert a["policies"] == b["policies"] and a["policies"] != c["policies"]


@pytest.mark.parametrize("args, needle", [
    (["--policies", "lyapunov,bogus"], "unknown policy 'bogus'"),
    (["--slot", "0"], "slot"),
    (["--V", "-1"], "argument --V"),
    (["--topology", "no-such-topology"], "no-such-topology"),
])
def test_simulate_bad_arguments_exit_2(jobs_file: Path, tmp_path: Path, args, needle):
    plots = tmp_path / "plots"
    r = sluice("simulate", "--workload", str(jobs_file), "--json", "--plot", str(plots), *args)
    assert r.returncode == 2
    assert needle in r.stderr and r.stdout == ""
    assert not plots.exists()                    # nothing half-done


def test_simulate_job_too_big_for_a_fixed_count_policy(tmp_path: Path):
    path = tmp_path / "big.yaml"
    path.write_text("jobs:\n  - {name: huge, model: resnet18, dataset_size: 1000, epochs: 1,"
                    " batch_size: 32, max_gpus: 64}\n")
    r = sluice("simulate", "--workload", str(path), "--policies", "fifo")
    assert r.returncode == 2 and "job 'huge'" in r.stderr and "max_gpus" in r.stderr
    ok = sluice("simulate", "--workload", str(path), "--policies", "lyapunov", "--json")
    assert ok.returncode == 0, ok.stderr         # lyapunov gives it what the cluster has


def test_simulate_bad_workload_files_exit_2(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("jobs:\n  - {name: a, model: resnet18, dataset_size: -5, epochs: 1,"
                   " batch_size: 32, max_gpus: 2}\n")
    r = sluice("simulate", "--workload", str(bad), "--policies", "fifo")
    assert r.returncode == 2 and str(bad) in r.stderr and "dataset_size" in r.stderr
    csv = tmp_path / "trace.csv"
    csv.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                   "0,two,0,10,vgg16,100,1\n")
    r = sluice("simulate", "--workload", str(csv), "--trace-format", "tiresias")
    assert r.returncode == 2 and "num_gpu" in r.stderr


SACCT_EXPORT = """\
JobID|JobName|Partition|Submit|Start|End|State|AllocTRES
5|first|gpu|2024-05-01T10:00:00|2024-05-01T10:00:10|2024-05-01T10:10:10|COMPLETED|gres/gpu=1
5.batch|batch||2024-05-01T10:00:10|2024-05-01T10:00:10|2024-05-01T10:10:10|COMPLETED|gres/gpu=1
6|wait|gpu|2024-05-01T10:01:00|Unknown|Unknown|PENDING|
7|bert-1|gpu|2024-05-01T10:02:00|2024-05-01T10:02:30|2024-05-01T10:12:30|FAILED|gres/gpu=2
"""


def test_simulate_a_sacct_export_states_what_it_left_out_and_assumed(tmp_path: Path):
    export = tmp_path / "site.sacct"
    export.write_text(SACCT_EXPORT)
    rules = tmp_path / "assume.yaml"
    rules.write_text('assumptions:\n  - {name: "bert-*", model: resnet50, batch_size: 64}\n')
    args = ["simulate", "--workload", str(export), "--trace-format", "sacct",
            "--trace-assumptions", str(rules), "--policies", "fifo"]
    r = sluice(*args)
    assert r.returncode == 0, r.stderr
    assert "2 job(s) kept, 1 left out" in r.stdout and "1 step line(s) skipped" in r.stdout
    assert "left out 1: never started" in r.stdout and "(job 6)" in r.stdout
    assert "1 job(s) by name=bert-*: model resnet50 x1; batch_size 64 x1" in r.stdout
    assert "1 job(s) by default (Philly rule: GPU-time)" in r.stdout
    out = json.loads(sluice(*args, "--json").stdout)
    assert out["trace"]["left_out"] == {"never_started": 1} and out["trace"]["kept"] == 2
    assert out["assumptions"] == {"name=bert-*": 1, "default (Philly rule: GPU-time)": 1}
    assert [(j["name"], j["gpus"]) for j in out["policies"]["fifo"]["job_results"]] == \
        [("sacct-5", 1), ("sacct-7", 2)]
    rules.write_text("- {name: x, model: nosuch}\n")
    r = sluice(*args)
    assert r.returncode == 2 and str(rules) in r.stderr and "field 'model'" in r.stderr
    export.write_text("JobID|Submit|Start|End\n1|1|2|3\n")
    r = sluice(*args[:-4], "--policies", "fifo")
    assert r.returncode == 2 and str(export) in r.stderr and "field 'AllocTRES'" in r.stderr
    r = sluice("simulate", "--workload", "proteus-small-dispersed", "--trace-assumptions",
               str(rules))
    assert r.returncode == 2 and "argument --trace-assumptions" in r.stderr


def test_validate_good_and_bad_files(jobs_file: Path, tmp_path: Path):
    r = sluice("validate", str(jobs_file))
    assert r.returncode == 0, r.stderr
    assert "3 job(s) OK" in r.stdout and "vgg16" in r.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("jobs:\n  - {name: a, model: nosuchnet, dataset_size: 10, epochs: 1,"
                   " batch_size: 32, max_gpus: 2}\n")
    r = sluice("validate", str(bad))
    assert r.returncode == 2 and str(bad) in r.stderr and "model" in r.stderr
    r = sluice("validate", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2
    # a one-host, 4-GPU topology: job 'b' (8 GPUs) cannot fit; 'a' (4) can
    r = sluice("validate", str(jobs_file), "--topology", "leaf-spine:leaves=1,spines=1,hosts_per_leaf=1")
    assert r.returncode == 2 and "job 'b'" in r.stderr and "max_gpus" in r.stderr


def test_simulate_k_reading_reaches_the_lyapunov_policy():
    """--k picks the reading of k in k*Cost_i(1); on a Proteus scenario the two readings
    give different schedules (k = n can pick slower, host-crossing counts), and a bad
    value is refused with exit status 2 before anything runs."""
    args = ["simulate", "--workload", "proteus-small-dispersed", "--jobs", "40",
            "--policies", "lyapunov", "--json"]
    job = json.loads(sluice(*args, "--k", "job").stdout)["policies"]["lyapunov"]
    gpus = json.loads(sluice(*args, "--k", "gpus").stdout)["policies"]["lyapunov"]
    default = json.loads(sluice(*args).stdout)["policies"]["lyapunov"]
    assert job["avg_jct"] != gpus["avg_jct"]
    assert default == job                       # "job" is the default reading
    bad = sluice(*args, "--k", "n")
    assert bad.returncode == 2 and "--k" in bad.stderr and not bad.stdout


def test_simulate_sluice_on_a_bursty_trace_with_estimate_error(capsys):
    from sluice.cli import main as sluice_main
    assert sluice_main(["simulate", "--workload", "bursty-moderate", "--jobs", "20",
                        "--policies", "sluice,las", "--no-network", "--estimate-error", "0.5",
                        "--trace-caps", "paper", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["policies"]) == {"sluice", "las"}
    assert all(p["jobs"] == 20 for p in out["policies"].values())
    assert sluice_main(["simulate", "--workload", "bursty-moderate",
                        "--estimate-error", "-1"]) == 2


# ---- what simulate says it used, its legend, its per-job results --------------------------------

def test_simulate_names_its_profile_and_network_model_and_explains_its_columns(capsys):
    from sluice.cli import main as sluice_main
    from job_scheduler.core.estimator import Estimator

    assert sluice_main(["simulate", "--workload", "proteus-small-dispersed", "--jobs", "5",
                        "--policies", "fifo", "--profile", "p100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"device profile: {Estimator('p100').device} " \
                       f"({Estimator('p100').profile.path})"
    assert lines[1].startswith("network model: eq. 5") and "fair share" in lines[1]
    head = next(i for i, line in enumerate(lines) if line.startswith("policy"))
    legend = " ".join(lines[head + 3:])                    # head, rule, one row, legend
    for column in ("avg JCT", "median", "p95", "avg wait", "makespan", "GPU util", "jobs"):
        assert column in lines[head] and f"{column}:" in legend.replace(" / ", ": "), column
    assert sluice_main(["simulate", "--workload", "proteus-small-dispersed", "--jobs", "5",
                        "--policies", "fifo", "--no-network", "--priority", "remaining"]) == 0
    out = capsys.readouterr().out
    assert "network model: none" in out


def test_simulate_json_carries_each_jobs_result_per_policy(capsys):
    from sluice.cli import main as sluice_main
    from job_scheduler.simulation.workloads import load_workload
    from topologies import load_topology

    assert sluice_main(["simulate", "--workload", "proteus-small-dispersed", "--jobs", "8",
                        "--policies", "fifo,lyapunov", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["device_profile"] and out["network_model"].startswith("eq. 5")
    jobs = load_workload("proteus-small-dispersed", jobs=8)
    rack_of = {h.name: h.rack for h in load_topology("two-rack").hosts}
    for name, policy in out["policies"].items():
        records = policy["job_results"]
        assert [r["name"] for r in records] == [j.name for j in jobs], name
        for r, job in zip(records, jobs):
            p = r["placement"]
            assert sum(p["gpus_by_host"].values()) == r["gpus"] >= 1
            hosts = set(p["gpus_by_host"]) | set(p["ps_hosts"])
            assert p["racks"] == sorted({rack_of[h] for h in hosts})
            assert r["arrival"] == pytest.approx(job.arrival, abs=1e-3)
            assert r["arrival"] <= r["start"] < r["end"]
            assert r["jct"] == pytest.approx(r["end"] - job.arrival, abs=2e-3)
        mean = sum(r["jct"] for r in records) / len(records)
        assert mean == pytest.approx(policy["avg_jct"], abs=1e-2)


def test_simulate_finds_a_trace_in_SLUICE_WORKLOADS(tmp_path, monkeypatch, capsys):
    from sluice.cli import main as sluice_main

    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "tiny.csv").write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
        "0,1,0,606,vgg19,164,30\n1,2,30,133,vgg11,147,23\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLUICE_WORKLOADS", str(folder))
    assert sluice_main(["simulate", "--workload", "tiny.csv", "--policies", "fifo",
                        "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["policies"]["fifo"]["jobs"] == 2
    assert sluice_main(["simulate", "--workload", "absent.csv", "--policies", "fifo"]) == 2
    err = capsys.readouterr().err
    assert str(folder) in err and str(tmp_path / "absent.csv") in err


# ---- validate --cap-gpus ---------------------------------------------------------------------

BEYOND = ("jobs:\n  - {name: v, model: vgg16, dataset_size: 1000, epochs: 1, batch_size: 32,"
          " max_gpus: 8}\n  - {name: g, model: googlenet, dataset_size: 1000, epochs: 1,"
          " batch_size: 32, max_gpus: 1}\n")


def test_cap_gpus_writes_only_a_valid_job_file_to_stdout(tmp_path, capsys):
    from sluice.cli import main as sluice_main
    from sluice_common.jobspec import load_jobs

    f = tmp_path / "jobs.yaml"
    f.write_text(BEYOND)
    assert sluice_main(["validate", "--cap-gpus", str(f)]) == 0
    out = capsys.readouterr()
    capped = tmp_path / "capped.yaml"
    capped.write_text(out.out)
    jobs = {j.name: j for j in load_jobs(capped)}           # the project's own loader
    assert set(jobs) == {"v", "g"} and jobs["v"].max_gpus < 8 and jobs["g"].max_gpus == 1
    assert "job(s) OK" in out.err and "Cost(1) s" in out.err     # the table: stderr
    assert "job(s) OK" not in out.out
    two = tmp_path / "two.yaml"
    two.write_text(BEYOND)
    assert sluice_main(["validate", "--cap-gpus", str(f), str(two)]) == 2
    assert "--cap-gpus" in capsys.readouterr().err


def test_validate_warnings_name_their_file_and_the_table_has_a_legend(tmp_path, capsys):
    from sluice.cli import main as sluice_main

    f = tmp_path / "jobs.yaml"
    f.write_text(BEYOND)
    assert sluice_main(["validate", str(f)]) == 0
    out = capsys.readouterr()
    warning, = [line for line in out.err.splitlines() if "diminishing returns" in line]
    assert warning.startswith(f"{f}: ") and "job 'v'" in warning
    for column in ("params:", "m: dataset_size", "e: epochs", "b: batch_size", "Cost(1) s:"):
        assert column in out.out, column
