"""bench.end_to_end.arm_b_model: which of a pass's jobs share a link while both run (pure)."""

from bench.end_to_end.arm_b_model import job_links, parse_seeds, sharing_pairs, summary
from topologies import load_topology

TOPO = load_topology("two-rack-100g")


def rec(name, ps, workers, start):
    return {"name": name, "ps_hosts": ps, "worker_hosts": workers, "start": start}


def test_a_job_inside_its_servers_host_crosses_no_link():
    assert job_links(TOPO, rec("x", ["h1"], ["h1", "h1"], 0.0)) == frozenset()


def test_a_job_split_over_racks_crosses_both_uplinks():
    links = job_links(TOPO, rec("x", ["h1"], ["h1", "h3"], 0.0))
    assert links == {("h3", "tor2"), ("spine1", "tor2"), ("spine1", "tor1"), ("h1", "tor1")}


def test_two_jobs_share_a_link_only_while_both_run():
    x = rec("x", ["h1"], ["h2"], 0.0)        # h2 -> tor1 -> h1
    y = rec("y", ["h3"], ["h2"], 1.0)        # h2 -> tor1 -> spine -> tor2 -> h3
    z = rec("z", ["h4"], ["h4"], 0.5)        # inside h4: no link
    both = sharing_pairs(TOPO, [x, y, z], {"x": 5.0, "y": 9.0, "z": 9.0})
    assert [(a, b) for a, b, _ in both] == [("x", "y")]
    assert both[0][2] == {("h2", "tor1")}
    apart = sharing_pairs(TOPO, [x, y], {"x": 1.0, "y": 9.0})   # x ends as y starts
    assert apart == []


def test_summary_counts_the_draws_at_the_bound_and_those_without_a_shared_link():
    rows = [{"b_vs_a_pct": -20.0, "sharing_pairs": 2}, {"b_vs_a_pct": 1.0, "sharing_pairs": 0},
            {"b_vs_a_pct": -3.0, "sharing_pairs": 1}]
    text = summary(rows)
    assert "median -3.0 %" in text and "in 1 of 3" in text
    assert "no two jobs sharing a link while both run in 1 of 3" in text


def test_seeds_as_a_range_or_a_list():
    assert parse_seeds("2000-2003") == [2000, 2001, 2002, 2003]
    assert parse_seeds("5,9") == [5, 9]
