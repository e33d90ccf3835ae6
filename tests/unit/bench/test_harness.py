"""bench/: one harness (arguments, JSON output, figure lines), scripts in folders by area,
each run as ``python -m bench.<area>.<script>`` from the repository root."""

from __future__ import annotations

import json
import subprocess
import sys

from bench import harness, run_all

from support.paths import REPO as ROOT
AREAS = {"scheduler", "fabric", "controller", "ps_runtime", "end_to_end", "reliability",
         "slurm", "api"}


def test_figure_line_and_its_dict(capsys):
    fig = harness.figure("decide per call", 7.0, "us", baseline=0.5, note="(bare min())")
    assert capsys.readouterr().out == ("FIGURE decide per call: 7 us (baseline 0.5 us, "
                                       "ratio 14) (bare min())\n")
    assert fig == {"name": "decide per call", "value": 7.0, "unit": "us", "baseline": 0.5,
                   "ratio": 14.0, "note": "(bare min())"}
    harness.figure("rate", 12345.6, "/s")
    assert capsys.readouterr().out == "FIGURE rate: 12,346 /s\n"


def test_json_option_to_stdout_or_a_file(tmp_path, capsys):
    ap = harness.parser("Title line.\n\nmore", quick="short form")
    assert ap.description == "Title line."
    assert ap.parse_args([]).json is None and not ap.parse_args([]).quick
    assert ap.parse_args(["--json"]).json == "-"
    assert ap.parse_args(["--json", "x.json", "--quick"]).quick
    harness.write_json("-", {"a": 1})
    assert json.loads(capsys.readouterr().out) == {"a": 1}
    harness.write_json(str(tmp_path / "o.json"), [1, 2])
    assert json.loads((tmp_path / "o.json").read_text()) == [1, 2]
    harness.write_json(None, {"a": 1})
    assert capsys.readouterr().out == ""
    assert "--json" not in harness.parser(__doc__, json_out=False).format_help()


def test_every_benchmark_lives_in_an_area_and_none_edits_sys_path():
    assert not list((ROOT / "bench").glob("bench_*.py"))      # nothing left at the top
    assert {p.parent.name for p in (ROOT / "bench").glob("*/__init__.py")} == AREAS
    found = run_all.scripts([])      # the soak (reliability/soak.py, 10 min) runs on its own
    assert {s.parent.name for s in found} == AREAS - {"reliability"}
    assert run_all.scripts(["slurm"]) == sorted((ROOT / "bench" / "slurm").glob("bench_*.py"))
    for script in (ROOT / "bench").rglob("*.py"):
        assert "sys.path.insert" not in script.read_text(), script


def test_a_benchmark_runs_as_a_module_with_the_harness(tmp_path):
    out = tmp_path / "figures.json"
    r = subprocess.run([sys.executable, "-m", "bench.scheduler.bench_scheduler_core", "--quick",
                        "--json", str(out)], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert [f["name"].split(" (")[0] for f in figures][:2] == ["philly load+validate",
                                                               "estimator C(n) evaluations"]
    assert r.stdout.count("FIGURE ") == len(figures) == 5
    assert figures[0]["baseline"] > 0 and figures[0]["ratio"] > 1
