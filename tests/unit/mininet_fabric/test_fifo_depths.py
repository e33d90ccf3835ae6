"""The short FIFO's depth chosen by a sweep: the data file, its lookup,
and the ``off-shallow`` baseline that takes it for one run."""

import pytest

from mininet_fabric import baselines as bl
from mininet_fabric import fifo_depths
from mininet_fabric.fifo_depths import SweptDepth, parse_depths, swept_depth

ENTRY = {"load": 0.7, "cc": "bbr", "depth_packets": 25, "sweep": "RESULTS, the sweep",
         "seeds": [1, 2, 3, 4, 5]}


def test_the_shipped_file_parses_and_names_its_sweeps():
    for d in fifo_depths.load_depths():
        assert d.depth_packets >= 1 and d.sweep and d.seeds


def test_lookup_by_load_and_congestion_control():
    depths = parse_depths([ENTRY, ENTRY | {"cc": "cubic", "depth_packets": 50}])
    assert swept_depth(0.7, "bbr", depths).depth_packets == 25
    assert swept_depth(0.7, "cubic", depths).depth_packets == 50
    assert swept_depth(0.9, "bbr", depths) is None
    assert depths[0] == SweptDepth(0.7, "bbr", 25, "RESULTS, the sweep", (1, 2, 3, 4, 5))


@pytest.mark.parametrize("bad, says", [
    ([ENTRY | {"depth_packets": 0}], "depth_packets"),
    ([ENTRY | {"depth_packets": 2.5}], "depth_packets"),
    ([{k: v for k, v in ENTRY.items() if k != "sweep"}], "entry 0"),
    ([ENTRY | {"extra": 1}], "entry 0"),
    ([ENTRY | {"load": 1.5}], "load"),
    ([ENTRY, ENTRY], "twice"),
])
def test_bad_entries_are_refused_naming_the_entry(bad, says):
    with pytest.raises(ValueError, match=says):
        parse_depths(bad, "depths.yaml")


def test_off_shallow_takes_the_swept_depth_for_the_block_only(monkeypatch):
    default = bl.queue_bytes("off-shallow", 12, 0.001)
    assert default == bl.shallow_limit_packets(12, 0.001) * bl.MTU_BYTES
    monkeypatch.setattr(fifo_depths, "load_depths", lambda path=None: parse_depths([ENTRY]))
    order = bl.names()
    with bl.swept_shallow(0.7, "bbr") as swept:
        assert swept.depth_packets == 25
        assert bl.queue_bytes("off-shallow", 12, 0.001) == 25 * bl.MTU_BYTES
        tree = "\n".join(bl.egress_tree("off-shallow", "s1-eth1", 12.0))
        assert "limit 25" in tree
        assert bl.names() == order                  # the same modes, in the same order
    assert bl.queue_bytes("off-shallow", 12, 0.001) == default
    with pytest.raises(RuntimeError):
        with bl.swept_shallow(0.7, "bbr"):
            raise RuntimeError("a run failed")
    assert bl.queue_bytes("off-shallow", 12, 0.001) == default     # put back on failure too
    with bl.swept_shallow(0.9, "bbr") as swept:                     # no sweep there
        assert swept is None and bl.queue_bytes("off-shallow", 12, 0.001) == default


def test_a_recorded_depth_replaces_the_one_of_its_load_and_cc(tmp_path):
    from mininet_fabric.fifo_depths import load_depths, record_depth

    path = tmp_path / "depths.yaml"
    path.write_text("# a comment that stays\n[]\n")
    record_depth(SweptDepth(0.7, "bbr", 25, "first", (1, 2)), path)
    record_depth(SweptDepth(0.9, "bbr", 11, "other", (1,)), path)
    record_depth(SweptDepth(0.7, "bbr", 50, "second", (3,)), path)
    got = load_depths(path)
    assert [(d.load, d.cc, d.depth_packets, d.sweep) for d in got] == [
        (0.7, "bbr", 50, "second"), (0.9, "bbr", 11, "other")]
    assert path.read_text().startswith("# a comment that stays\n")
