"""The short FIFO's depth by a sweep (mininet_tests.calibration.fifo_depth): each depth a
baseline for the run, the fastest one chosen, a finished sweep read again."""

from __future__ import annotations

import pytest

from mininet_fabric import baselines as bl
from mininet_tests.calibration import fifo_depth


def test_the_fifo_sweep_registers_each_depth_and_picks_the_fastest():
    name = fifo_depth.register_depth(7)
    try:
        assert name == "fifo-7" and any("limit 7" in line
                                        for line in bl.egress_tree(name, "s1-eth1", 12.0))
        summary = {"modes": {
            "off": {"mean_jct_s": 8.0, "mean_jct_change_pct": 0.0, "p95_jct_s": 20.0},
            "fifo-7": {"mean_jct_s": 9.5, "mean_jct_change_pct": 18.0, "p95_jct_s": 25.0,
                       "tcp_retrans_segs": 900}}}
        rows = fifo_depth.table(summary, [7])
        assert [r["depth_packets"] for r in rows] == [7, 200]
        assert fifo_depth.best_depth(rows) == 200
        summary["modes"]["fifo-7"]["mean_jct_s"] = 7.0
        assert fifo_depth.best_depth(fifo_depth.table(summary, [7])) == 7
        with pytest.raises(ValueError, match="fifo-9"):
            fifo_depth.table(summary, [9])
    finally:
        bl.unregister(name)


def _summary(tmp_path, modes):
    import json

    (tmp_path / "summary.json").write_text(json.dumps({
        "load": 0.7, "host_cc": "bbr", "seeds": [1, 2],
        "modes": {m: {"mean_jct_s": jct, "mean_jct_change_pct": 0.0, "p95_jct_s": 2 * jct}
                  for m, jct in modes.items()}}))


def test_a_finished_sweep_is_read_again_and_its_best_depth_recorded(tmp_path, capsys):
    from mininet_fabric.fifo_depths import load_depths

    _summary(tmp_path, {"off": 8.0, "fifo-25": 7.0, "fifo-50": 7.5})
    data = tmp_path / "depths.yaml"
    data.write_text("# the sweeps' depths\n")
    out = tmp_path / "sweep.json"
    assert fifo_depth.sweep((25, 50, 200), 0.7, (1, 2), "machine", tmp_path, "RESULTS, a section",
                            True, str(out), data_file=data) == 0
    assert "best FIFO depth at load 0.7, cc bbr: 25 packets" in capsys.readouterr().out
    (entry,) = load_depths(data)
    assert (entry.load, entry.cc, entry.depth_packets, entry.seeds) == (0.7, "bbr", 25, (1, 2))
    assert entry.sweep == "RESULTS, a section"
    assert data.read_text().startswith("# the sweeps' depths\n")
    import json

    assert json.loads(out.read_text())["best_depth_packets"] == 25
    assert "fifo-25" not in bl.names()            # the swept depths were registered for the run only


def test_a_sweep_read_again_names_what_its_summary_lacks(tmp_path):
    from sluice_common.errors import InputError

    with pytest.raises(InputError, match="summary.json: cannot read"):
        fifo_depth.sweep((25,), 0.7, (1,), "machine", tmp_path, None, True, None)
    _summary(tmp_path, {"off": 8.0, "fifo-25": 7.0})
    with pytest.raises(InputError) as err:
        fifo_depth.sweep((11, 25), 0.7, (1,), "machine", tmp_path, None, True, None)
    assert err.value.field == "modes" and "fifo-11" in err.value.reason
    (tmp_path / "summary.json").write_text('{"modes": {}}')
    with pytest.raises(InputError) as err:
        fifo_depth.read_summary(tmp_path / "summary.json")
    assert err.value.field == "load"
