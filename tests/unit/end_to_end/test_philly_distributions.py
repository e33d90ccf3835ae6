"""The distributions file the demo carries, written from a Philly CSV."""

from end_to_end.philly_distributions import distributions, gpu_class, quantiles
from end_to_end.philly_distributions_cli import main
from end_to_end.workload_draw import load_distributions

HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def test_distributions_of_a_small_trace():
    jobs = [(0.0, 1, 10.0), (5.0, 2, 20.0), (7.0, 4, 40.0), (17.0, 16, 80.0)]
    d = distributions(jobs)
    assert d["gpu_counts"] == {1: 1, 2: 1, 4: 1, 16: 1}
    assert d["durations"][8][0] == 80.0 and d["durations"][2][100] == 20.0
    assert d["interarrivals"][0] == 2.0 and d["interarrivals"][100] == 10.0
    assert gpu_class(3) == 2 and gpu_class(16) == 8
    assert quantiles([3.0, 1.0, 2.0])[50] == 2.0


def test_the_command_writes_a_file_the_draw_reads(tmp_path, capsys):
    trace = tmp_path / "philly.csv"
    rows = ["2017-10-01 00:00:00,60.0,1,60.0,c1", "2017-10-01 00:00:10,600.0,2,1200.0,c1",
            "2017-10-01 00:01:10,6000.0,4,24000.0,c2", "2017-10-01 00:01:11,60.0,8,480.0,c2"]
    trace.write_text(HEADER + "\n".join(rows) + "\n")
    out = tmp_path / "d.yaml"
    assert main([str(trace), "--out", str(out)]) == 0
    d = load_distributions(out)
    assert d["gpu_counts"] == {1: 1, 2: 1, 4: 1, 8: 1}
    assert d["interarrivals"][0] == 1.0 and d["interarrivals"][100] == 60.0
    assert d["durations"][4][50] == 6000.0


def test_a_bad_trace_exits_2_naming_the_file_and_writes_nothing(tmp_path, capsys):
    trace = tmp_path / "bad.csv"
    trace.write_text(HEADER + "2017-10-01 00:00:00,sixty,1,60.0,c1\n")
    out = tmp_path / "d.yaml"
    assert main([str(trace), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and "duration" in err
    assert not out.exists()
