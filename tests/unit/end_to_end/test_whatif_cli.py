"""``sluice whatif`` on the command line: the Tiresias 60-job trace through the four arms,
its JSON, its plot and its refusals of bad input."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest

from end_to_end.arms import ARMS
from end_to_end.whatif import offered_load
from job_scheduler.simulation.workloads import SHARED_WORKLOADS
from sluice.cli import main
from support.paths import REPO

WORKLOADS = SHARED_WORKLOADS
if not WORKLOADS.exists():
    WORKLOADS = REPO.parent / "shared" / "workloads"
TIRESIAS = str(WORKLOADS / "tiresias_60_job.csv")
BASE = ["whatif", "--trace", TIRESIAS, "--trace-format", "tiresias", "--topology", "two-rack"]
SHARES = ("gpu_util", "cross_rack_share", "uplink_util_p50", "uplink_util_p99",
          "exchange_share")


def whatif(capsys, *args):
    rc = main([*BASE, *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    """One run of the four arms at load 0.8, two at once, with the plot."""
    plots = tmp_path_factory.mktemp("plots")
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main([*BASE, "--load", "0.8", "--json", "--workers", "2", "--plot", str(plots)])
    assert rc == 0
    return json.loads(out.getvalue()), plots


def test_the_report_has_every_arm_and_the_load_asked(scaled):
    report, _ = scaled
    assert report["load"] == pytest.approx(0.8, abs=1e-6)
    assert report["load_requested"] == 0.8
    assert report["jobs"] == 60 and report["topology"] == "two-rack"
    assert report["exchange"] == "cluster"
    assert report["load_recorded"] != pytest.approx(0.8)      # the arrivals were scaled
    assert set(report["arms"]) == set("abcd")
    for key, arm in report["arms"].items():
        assert arm["title"] == ARMS[key].title
        for name in SHARES:
            assert 0.0 <= arm[name] <= 1.0, (key, name, arm[name])
        assert arm["uplink_util_p50"] <= arm["uplink_util_p99"]
        assert 0 < arm["avg_jct_s"] <= arm["makespan_s"]
        assert arm["p95_jct_s"] <= arm["makespan_s"]
    a, b, c, d = (report["arms"][k] for k in "abcd")
    assert report["b_vs_a"] == pytest.approx(b["avg_jct_s"] / a["avg_jct_s"] - 1)
    assert report["d_vs_c"] == pytest.approx(d["avg_jct_s"] / c["avg_jct_s"] - 1)
    # Slurm's nodes put some jobs across the two racks, and those exchange over the uplinks
    assert a["cross_rack_share"] > 0 and a["uplink_util_p99"] > 0 and a["exchange_share"] > 0


def test_the_plot_is_one_png(scaled):
    _, plots = scaled
    files = list(plots.iterdir())
    assert [f.name for f in files] == ["whatif.png"]
    assert files[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_arm_is_what_the_simulator_gives_its_options(scaled):
    """Arm b alone, in this process, is the simulator run with fifo, Slurm's nodes and
    the controller's rule on the uplinks, on the scaled arrivals."""
    from job_scheduler.core.estimator import Estimator
    from job_scheduler.core.exchange_pricing import ExchangePricing
    from job_scheduler.core.policies import make_policy
    from job_scheduler.simulation.simulator import Simulator
    from job_scheduler.simulation.workloads import load_workload
    from end_to_end.whatif import scale_to_load
    from topologies import load_topology

    topo = load_topology("two-rack")
    jobs, _ = scale_to_load(load_workload(TIRESIAS, trace_format="tiresias"), 16, 0.8)
    assert offered_load(jobs, 16) == pytest.approx(0.8)
    est = Estimator(exchange=ExchangePricing.for_topology(topo))
    res = Simulator(topo, jobs, make_policy("fifo", placement="slurm"), estimator=est,
                    slot=10.0, priority="remaining").run()
    assert scaled[0]["arms"]["b"]["avg_jct_s"] == pytest.approx(res.avg_jct)


def test_recorded_load_and_the_table(capsys):
    rc, out, err = whatif(capsys, "--load", "recorded", "--arms", "a,c", "--jobs", "30")
    assert rc == 0
    assert "arm" in out and "Slurm today" in out and "sluice's scheduler" in out
    assert "b against a" not in out                  # b did not run
    assert "30 jobs" in err


@pytest.mark.parametrize("args,words", [
    (["--load", "1.5"], ["--load", "(0, 1]"]),
    (["--load", "0"], ["--load", "(0, 1]"]),
    (["--load", "high"], ["--load", "must be a number"]),
    (["--load", "0.5", "--arms", "a,x"], ["--arms", "'x'"]),
    (["--load", "0.5", "--jobs", "1"], ["load", "no arrival window"]),
    (["--load", "0.5", "--topology", "single-gpu-nowhere"], ["single-gpu-nowhere"]),
])
def test_bad_input_exits_2_naming_the_field(capsys, args, words):
    rc, out, err = whatif(capsys, *args)
    assert rc == 2 and out == ""
    for word in words:
        assert word in err


def test_an_unreadable_trace_or_format_exits_2(capsys, tmp_path):
    assert main(["whatif", "--trace", str(tmp_path / "none.csv"), "--load", "0.5"]) == 2
    assert "none.csv" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-03 00:00:00,x,1,1,c\n")
    assert main(["whatif", "--trace", str(bad), "--trace-format", "philly",
                 "--load", "0.5"]) == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and "duration" in err
    with pytest.raises(SystemExit) as exit_:
        main(["whatif", "--trace", str(bad), "--trace-format", "nope", "--load", "0.5"])
    assert exit_.value.code == 2
    assert "--trace-format" in capsys.readouterr().err


def test_a_plot_folder_that_is_a_file_exits_2_before_any_run(capsys, tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("")
    rc, out, err = whatif(capsys, "--load", "0.5", "--plot", str(taken))
    assert rc == 2 and out == ""
    assert "taken" in err and "plot" in err and "not a directory" in err


def test_a_sacct_export_of_the_local_cluster_runs_with_its_account_and_known_error(capsys):
    """The export a real 22.05 cluster wrote (tests/data/slurm): the jobs it kept, those it
    left out and why, the assumptions it used, and the simulator's recorded error."""
    export = REPO / "tests" / "data" / "slurm" / "sacct-22.05.json"
    rc = main(["whatif", "--trace", str(export), "--trace-format", "sacct", "--topology",
               "two-rack", "--load", "recorded", "--json", "--workers", "1"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert set(out["arms"]) == set(ARMS) and out["jobs"] == out["trace_export"]["kept"] > 0
    assert out["trace_export"]["left_out"], out["trace_export"]
    assert sum(out["assumptions"].values()) == out["jobs"]
    assert {"demo", "heavy_tail"} <= set(out["simulator_error"])
    rc = main(["whatif", "--trace", str(export), "--trace-format", "sacct", "--topology",
               "two-rack", "--load", "recorded", "--workers", "1"])
    text, err = capsys.readouterr()
    assert rc == 0 and "left out" in err and "assumed for" in text
    assert "simulator against measured" in text


def test_the_options_defaults_are_the_parsers_and_every_flag_lands_in_its_field():
    from end_to_end.whatif_cli import WhatifOptions, whatif_options
    from sluice.cli import build_parser

    def parsed(*flags):
        parser, _, _, rest = build_parser("whatif", ["--trace", "t.csv", "--load", "0.5",
                                                     *flags])
        return whatif_options(parser.parse_args(rest))

    assert parsed() == WhatifOptions(trace="t.csv", load="0.5")
    opts = parsed("--jobs", "7", "--slot", "5", "--workers", "2", "--json", "--plot", "d",
                  "--exchange", "off", "--seed", "3")
    assert (opts.jobs, opts.slot, opts.workers, opts.json, opts.plot, opts.exchange,
            opts.seed) == (7, 5.0, 2, True, "d", "off", 3)
