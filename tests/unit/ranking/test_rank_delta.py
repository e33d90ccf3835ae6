"""Incremental re-ranking (pure): after any sequence of reports, the incremental levels
equal a full recompute, and ``update`` returns exactly the levels that moved."""

import pytest
from hypothesis import given, settings, strategies as st

from sluice_common import rank_rules
from sluice_common.job_rank import JobLoad, attained_levels, remaining_levels
from controller.rank_delta import FlowRanker, JobRanker
from controller.ranking import PULL, PUSH, FlowKey, assign_levels

MB = 1 << 20


def flows_of(jobs: int, workers: int) -> list[FlowKey]:
    out = []
    for j in range(jobs):
        for w in range(workers):
            ip_w, ip_s = f"10.0.{j}.{w + 2}", f"10.0.{j}.1"
            out.append(FlowKey(f"j{j}", PUSH, f"w{w}", "s0", ip_w, ip_s, 9000 + j))
            out.append(FlowKey(f"j{j}", PULL, f"w{w}", "s0", ip_s, ip_w, 9100 + w))
    return out


reports = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), st.integers(0, 40)),
                   max_size=60)


@settings(max_examples=150, deadline=None)
@given(levels=st.integers(1, 8), batches=st.lists(st.integers(0, 6), min_size=24,
                                                  max_size=24),
       reports=reports, chunk=st.integers(1, 7))
def test_flow_ranker_matches_full_progress_rule(levels, batches, reports, chunk):
    flows = flows_of(6, 4)
    batch = {(f"j{j}", f"w{w}"): batches[j * 4 + w] for j in range(6) for w in range(4)}

    def state():
        return [(f, batch[(f.job, f.worker)]) for f in flows]

    ranker = FlowRanker(state(), levels)
    assert ranker.levels == assign_levels(state(), levels)
    # reports arrive in groups of ``chunk`` (the controller's group commit)
    for start in range(0, len(reports), chunk):
        moved = set()
        for j, w, b in reports[start:start + chunk]:
            batch[(f"j{j}", f"w{w}")] = b
            moved.add((f"j{j}", f"w{w}"))
        before = dict(ranker.levels)
        changed = ranker.update((f, batch[(f.job, f.worker)]) for f in flows
                                if (f.job, f.worker) in moved)
        full = assign_levels(state(), levels)
        assert ranker.levels == full
        assert changed == {f: lv for f, lv in full.items() if before[f] != lv}


loads = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 300)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(rule=st.sampled_from(["remaining", "aged", "attained"]),
       levels=st.integers(1, 8),
       sizes=st.lists(st.one_of(st.none(), st.tuples(st.integers(1, 300), st.integers(1, 4))),
                      min_size=8, max_size=8),
       reports=loads, chunk=st.integers(1, 5))
def test_job_ranker_matches_full_job_rules(rule, levels, sizes, reports, chunk):
    done = {f"j{i}": 0 for i in range(8)}

    def load(i):
        size = sizes[i]
        total, bpb = (size[0], size[1] * MB) if size else (None, None)
        # registered a minute apart: under aged, ages of the order of the sizes
        return JobLoad(f"j{i}", i, done[f"j{i}"], total, bpb, 0.5 if i % 3 == 0 else 1.0,
                       registered_s=60.0 * i)

    def full():
        all_loads = [load(i) for i in range(8)]
        if rule == "remaining":
            return remaining_levels(all_loads, levels)
        if rule == "aged":
            return rank_rules.job_levels("aged", all_loads, levels)
        return attained_levels(all_loads, levels, base=4 * MB, factor=2.0)

    ranker = JobRanker(rank_rules.rule(rule), [load(i) for i in range(8)], levels, base=4 * MB,
                       factor=2.0)
    assert ranker.levels == full()
    for start in range(0, len(reports), chunk):
        moved = set()
        for i, d in reports[start:start + chunk]:
            done[f"j{i}"] = d
            moved.add(i)
        before = dict(ranker.levels)
        changed = ranker.update(load(i) for i in sorted(moved))
        now = full()
        assert ranker.levels == now
        assert changed == {j: lv for j, lv in now.items() if before[j] != lv}


def test_a_report_that_moves_nobody_changes_nothing():
    loads = [JobLoad(f"j{i}", i, 0, 100 * (i + 1), MB) for i in range(10)]
    ranker = JobRanker(rank_rules.rule("remaining"), loads, 8)
    # j9 (the largest) progresses a little: still last, shares the last level
    assert ranker.update([loads[9]._replace(done_batches=5)]) == {}
    # j9 nearly done: it overtakes everyone; all seven head jobs move down one level
    changed = ranker.update([loads[9]._replace(done_batches=999)])
    assert changed == {"j9": 0, **{f"j{i}": i + 1 for i in range(7)}}


def test_two_jobs_overtaking_at_once_push_a_head_job_onto_the_shared_level():
    # levels 3: a and b have levels 0 and 1; c and d both nearly finish in one group of
    # reports, so b drops two positions, out of the head, to the shared last level
    loads = {j: JobLoad(j, i, 0, 10 * (i + 1), MB) for i, j in enumerate("abcd")}
    ranker = JobRanker(rank_rules.rule("remaining"), loads.values(), 3)
    assert ranker.levels == {"a": 0, "b": 1, "c": 2, "d": 2}
    changed = ranker.update([loads["c"]._replace(done_batches=29),
                             loads["d"]._replace(done_batches=39)])
    assert changed == {"c": 0, "d": 1, "a": 2, "b": 2}


def test_flow_ranker_moves_only_the_reporting_workers_flows():
    flows = flows_of(3, 2)
    state = [(f, 1) for f in flows]
    ranker = FlowRanker(state, 8)
    mine = [f for f in flows if (f.job, f.worker) == ("j0", "w0")]
    changed = ranker.update((f, 2) for f in mine)
    # batch 2 is a new, less urgent urgency: only j0/w0's two flows move
    assert set(changed) == set(mine)
    assert {changed[f] for f in mine} == {2, 3}


# ---------------------------------------------------------------- in the controller --
def _controller(rank, enforce, sizes):
    from support.controller_fakes import ADMIN, make_service, northbound
    from controller.fake_fabric import bring_up

    svc = bring_up(make_service("leaf-spine", rank=rank, enforce=enforce))
    stamps = iter(range(0, 4000, 40))      # registrations 40 s apart, the same in every run
    svc.shared.wall_clock = lambda: float(next(stamps))
    tokens = {}
    for j in range(4):
        # workers 0 and 1 share a host: their push flows share one rule (the most
        # urgent level wins), the case the incremental rule diff must get right
        ips = [f"10.0.0.{2 + (j + w // 2) % 7}" for w in range(3)]
        body = {"id": f"j{j}", "servers": [{"id": "s0", "ip": "10.0.0.1", "port": 9000 + j}],
                "workers": [{"id": f"w{w}", "ip": ip, "port": 9100 + 10 * j + w}
                            for w, ip in enumerate(ips)]}
        if sizes[j]:
            body.update(total_batches=sizes[j], bytes_per_batch=(j + 1) << 20)
        tokens[f"j{j}"] = northbound(svc).register_job(ADMIN, body)["token"]
    return svc, tokens


@settings(max_examples=40, deadline=None)
@given(rank=st.sampled_from(["progress", "remaining", "aged", "attained"]),
       enforce=st.sampled_from(["dscp", "queue"]),
       sizes=st.lists(st.one_of(st.none(), st.integers(1, 120)), min_size=4, max_size=4),
       reports=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(1, 60)),
                        min_size=1, max_size=25))
def test_controller_after_reports_equals_a_full_recompute(rank, enforce, sizes, reports):
    """Reports go through the incremental path; a second controller given only the final
    batches computes everything in full. Both must hold the same switch tables."""
    from support.controller_fakes import northbound

    svc, tokens = _controller(rank, enforce, sizes)
    for j, w, b in reports:
        northbound(svc).progress(f"j{j}", tokens[f"j{j}"], {"worker": f"w{w}", "batch": b})
    fresh, fresh_tokens = _controller(rank, enforce, sizes)
    for job in svc.registry.jobs.values():
        for worker, batch in job.batches.items():
            fresh.registry.report(job.id, worker, batch)
    fresh.reconciler.full()
    assert svc.reconciler.levels == fresh.reconciler.levels
    assert svc.sink.table.rules == fresh.sink.table.rules
    assert svc.installed.rules == fresh.installed.rules
    # and a full reconcile of the incremental controller has nothing left to send
    assert svc.reconciler.full() == []


# ---------------------------------------------------------------- jobs coming and going --
membership = st.lists(st.tuples(st.booleans(), st.integers(0, 7), st.integers(0, 40)),
                      max_size=40)


@settings(max_examples=150, deadline=None)
@given(levels=st.integers(1, 8), events=membership)
def test_flow_ranker_add_and_remove_match_the_full_progress_rule(levels, events):
    """Jobs registered (their flows added at a batch) and removed in any order: the levels
    equal assign_levels over the flows present, and add/remove return exactly the moves."""
    flows = flows_of(8, 2)
    present: dict = {}
    ranker = FlowRanker([], levels)
    for add, j, b in events:
        mine = [f for f in flows if f.job == f"j{j}"]
        before = dict(ranker.levels)
        if add and mine[0] not in present:
            present.update({f: b for f in mine})
            changed = ranker.add((f, b) for f in mine)
        elif not add and mine[0] in present:
            for f in mine:
                del present[f]
            changed = ranker.remove(mine)
        else:
            continue
        full = assign_levels(list(present.items()), levels)
        assert ranker.levels == full
        assert changed == {f: lv for f, lv in full.items() if before.get(f) != lv}


@settings(max_examples=150, deadline=None)
@given(rule=st.sampled_from(["remaining", "aged", "attained"]),
       levels=st.integers(1, 8), events=membership)
def test_job_ranker_add_and_remove_match_the_full_job_rules(rule, levels, events):
    present: dict[str, JobLoad] = {}
    ranker = JobRanker(rank_rules.rule(rule), [], levels, base=4 * MB, factor=2.0)
    for add, j, done in events:
        job = f"j{j}"
        before = dict(ranker.levels)
        if add and job not in present:
            present[job] = JobLoad(job, j, done, 40 + 7 * j, (j % 3 + 1) * MB, 1.0,
                                   registered_s=100.0 * j)
            changed = ranker.add(present[job])
        elif not add and job in present:
            del present[job]
            changed = ranker.remove(job)
        else:
            continue
        full = (attained_levels(present.values(), levels, base=4 * MB, factor=2.0)
                if rule == "attained" else rank_rules.job_levels(rule, present.values(), levels))
        assert ranker.levels == full
        assert changed == {jb: lv for jb, lv in full.items() if before.get(jb) != lv}


def test_adding_a_ranked_job_again_is_refused():
    load = JobLoad("a", 1, 0, 10, MB)
    with pytest.raises(KeyError):
        JobRanker(rank_rules.rule("remaining"), [load], 4).add(load)
