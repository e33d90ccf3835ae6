"""A registration, a removal or a progress report reconciles incrementally (only the
flows it moved, controller/reconcile.py ``job_added`` / ``job_removed`` / ``moved``); after
any sequence of events the levels and every switch's table equal what a controller that
recomputes everything at each event (today's full reconcile, with nothing cached)
holds."""

from hypothesis import given, settings, strategies as st

from controller.errors import Refused
from support.controller_fakes import make_service
from controller.fake_fabric import bring_up, wiring

HOSTS = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]
MB = 1 << 20


def job_body(i: int, server: int, workers: list[int], total: int, bpb: int) -> dict:
    """Job ``i``: its own ports, so that jobs never collide; workers may share a host
    (their push flows then share one rule key: the most urgent level wins)."""
    return {"id": f"j{i}", "servers": [{"id": "s0", "ip": HOSTS[server], "port": 9000 + 10 * i}],
            "workers": [{"id": f"w{k}", "ip": HOSTS[h], "port": 9001 + 10 * i}
                        for k, h in enumerate(workers)],
            "total_batches": total, "bytes_per_batch": bpb}


jobs = st.builds(job_body, i=st.integers(0, 5), server=st.integers(0, 3),
                 workers=st.lists(st.integers(0, 3), min_size=1, max_size=3),
                 total=st.integers(1, 60), bpb=st.sampled_from([MB, 4 * MB, 16 * MB]))
events = st.lists(st.one_of(
    st.tuples(st.just("register"), jobs),
    st.tuples(st.just("remove"), st.integers(0, 5)),
    st.tuples(st.just("report"), st.integers(0, 5), st.integers(0, 2), st.integers(0, 60)),
    st.tuples(st.just("flap"), st.integers(0, 9))), max_size=30)


def full_only(svc):
    """A service that recomputes every rule from nothing at every event (the reference:
    no rules cached by level, route or switch)."""
    r = svc.reconciler
    full = r.full

    def from_scratch(*args, **kwargs):
        r.flow_rules.clear()
        r._forwarding_of.clear()
        r.fabric_dirty = True
        return full(*args, **kwargs)

    r.full = from_scratch
    r.job_added = lambda job, on_done: from_scratch(on_done=on_done)
    r.job_removed = lambda job, on_done: from_scratch(on_done=on_done)
    r.moved = lambda moved, on_done: None        # the reports' fallback: a full reconcile
    return svc


def apply(svc, event) -> str:
    """One event on one service; what came of it (both services must agree)."""
    kind, *args = event
    try:
        if kind == "register":
            svc.register_job(args[0], "credential")
        elif kind == "remove":
            svc.remove_job(f"j{args[0]}")
        elif kind == "report":
            job, worker, batch = args
            return svc.progress(f"j{job}", {"worker": f"w{worker}", "batch": batch})[0]["result"]
        else:       # a switch's control channel drops and comes back (a full reconcile)
            sw = svc.config.topology.switches[args[0] % len(svc.config.topology.switches)]
            ports = {p: f"{sw.name}-eth{p}" for (n, p) in wiring(svc.config.topology)
                     if n == sw.name}
            svc.switch_down(sw.dpid)
            svc.switch_up(sw.dpid, ports)
    except Refused as err:
        return type(err).__name__
    return "ok"


@settings(max_examples=120, deadline=None)
@given(topology=st.sampled_from(["two-rack", "leaf-spine"]),
       rank=st.sampled_from(["progress", "remaining", "attained"]), levels=st.integers(1, 4),
       enforce=st.sampled_from(["dscp", "queue"]), events=events)
def test_incremental_reconcile_equals_a_full_recompute_after_any_events(topology, rank, levels,
                                                                        enforce, events):
    config = dict(rank=rank, levels=levels, enforce=enforce,
                  attained_base_bytes=8 * MB, attained_factor=2.0)
    incremental = bring_up(make_service(topology, **config))
    reference = full_only(bring_up(make_service(topology, **config)))
    for event in events:
        sent = len(incremental.sink.sent), len(reference.sink.sent)
        assert apply(incremental, event) == apply(reference, event)
        # the same flow mods, no more: one per rule that differs
        assert sorted(map(repr, incremental.sink.sent[sent[0]:])) == \
            sorted(map(repr, reference.sink.sent[sent[1]:]))
        assert incremental.reconciler.levels == reference.reconciler.levels
        assert incremental.installed.rules == reference.installed.rules
        assert incremental.sink.table.rules == reference.sink.table.rules


def test_a_registration_sends_only_its_own_rules_and_those_it_moved():
    """With several jobs in place, registering one more sends a handful of flow mods,
    not the whole table again (what made the level-change p99 long at 2,048 workers)."""
    svc = bring_up(make_service("two-rack", rank="remaining", levels=4))
    for i in range(4):
        svc.register_job(job_body(i, i % 4, [(i + 1) % 4, (i + 2) % 4], 50 + i, MB), "c")
    def no_full(*args, **kwargs):
        raise AssertionError("a full reconcile: the incremental path was not taken")

    svc.reconciler.full = no_full
    sent = len(svc.sink.sent)
    svc.register_job(job_body(4, 0, [2, 3], 1, MB), "c")   # the shortest job: level 0
    new_mods = svc.sink.sent[sent:]
    job4 = svc.registry.jobs["j4"]
    assert any(m.rule.cookie == job4.cookie for m in new_mods)
    # only PS-flow rules (data and ACK directions): no forwarding, admission or base rule
    # was sent again
    assert new_mods and all(m.rule.priority in (200, 199) for m in new_mods)
    assert len(new_mods) < len(svc.installed.rules) / 2
    # and a removal likewise deletes its own rules and moves the others back
    sent = len(svc.sink.sent)
    svc.remove_job("j4")
    gone = svc.sink.sent[sent:]
    assert gone and all(m.rule.priority in (200, 199) for m in gone)
    assert any(m.command == "delete" and m.rule.cookie == job4.cookie for m in gone)
    assert all(r.cookie != job4.cookie for r in svc.installed.rules.values())


def _restored(tmp_path, name):
    """A controller restarted from a state file that knows the fabric and 4 jobs of 8
    (bench_scale's cluster of 32 workers), no switch connected yet."""
    import json

    from bench.controller import scale_cluster as C
    from controller.service import ControllerService
    from controller.sinks import TableSink
    from controller.config import ControllerConfig

    topo = C.load(C.topology_dict(32))
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(C.state_file(topo, C.initial_jobs(topo, 32, 8, 1),
                                            "remaining", 0.0)))
    svc = ControllerService(ControllerConfig(topology=topo, state_file=path), sink=TableSink())
    ports = {s.dpid: {p: f"{s.name}-eth{p}" for (n, p) in wiring(topo) if n == s.name}
             for s in topo.switches}
    return svc, ports


def test_switches_joining_together_get_what_joining_one_by_one_gives(tmp_path):
    one, ports = _restored(tmp_path, "one")
    for dpid, p in ports.items():
        one.switch_up(dpid, p, [])
    together, _ = _restored(tmp_path, "together")
    sent = len(together.sink.sent)
    together.switches_up([(dpid, p, []) for dpid, p in ports.items()])
    assert together.installed.rules == one.installed.rules
    assert together.sink.table.rules == one.sink.table.rules
    assert together.reconciler.levels == one.reconciler.levels
    assert any(r.priority == 200 for r in together.installed.rules.values())
    # one reconcile: each rule sent once, where one by one re-sent the rerouted ones
    assert len(together.sink.sent) - sent == len(together.installed.rules)


def test_a_switch_that_went_down_before_its_turn_does_not_join(tmp_path):
    svc, ports = _restored(tmp_path, "svc")
    gone = min(ports)
    svc.switches_up([(dpid, p, None) for dpid, p in ports.items()],
                    alive=lambda dpid: dpid != gone)
    assert gone not in svc.shared.fabric.connected
    assert set(ports) - {gone} <= svc.shared.fabric.connected
    assert not any(r.dpid == gone for r in svc.installed.rules.values())


def test_switches_going_down_together_get_what_one_by_one_gives(tmp_path):
    one, ports = _restored(tmp_path, "one")
    together, _ = _restored(tmp_path, "together")
    for svc in (one, together):
        svc.switches_up([(dpid, p, []) for dpid, p in ports.items()])
    down = sorted(ports)[:3]                 # two ToRs and a spine drop, the first returns
    for dpid in down:
        one.switch_down(dpid)
    one.switch_up(down[0], ports[down[0]], None)
    together.switches_changed([("down", d, None, None) for d in down]
                              + [("up", down[0], ports[down[0]], None)])
    assert together.shared.fabric.connected == one.shared.fabric.connected
    assert together.installed.rules == one.installed.rules
    assert together.sink.table.rules == one.sink.table.rules
    assert not any(r.dpid in down[1:] for r in together.installed.rules.values())
