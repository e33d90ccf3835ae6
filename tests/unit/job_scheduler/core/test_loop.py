"""The scheduling loop (job_scheduler.core.loop) on a virtual clock with a fake executor:
jobs train a fixed number of seconds after a start-up, a suspension takes a fixed time
to stop; no processes, no sleeping."""

from __future__ import annotations

import math

import pytest

from job_scheduler.core.decisions import SlotPlan, StartDecision, Suspend
from job_scheduler.core.estimator import Estimator
from job_scheduler.core.live_view import LiveView
from job_scheduler.core.loop import (Ended, Progress, SchedulingLoop, TraceAdmission,
                                     VirtualClock, WallClock)
from job_scheduler.core.policies import make_policy
from sluice_common.jobspec import JobSpec
from sluice_common.placement import Placement
from topologies import parse_topology

TOPO = parse_topology({
    "name": "two-hosts",
    "switches": [{"name": "t1", "role": "tor"}, {"name": "t2", "role": "tor"},
                 {"name": "s1", "role": "spine"}],
    "racks": [{"name": "r1", "tor": "t1"}, {"name": "r2", "tor": "t2"}],
    "hosts": [{"name": "h1", "rack": "r1", "gpus": 1, "bw": 10000},
              {"name": "h2", "rack": "r2", "gpus": 1, "bw": 10000}],
    "links": [{"a": "t1", "b": "s1", "bw": 1000}, {"a": "t2", "b": "s1", "bw": 1000}]})


class FakeExecutor:
    """A job trains ``work[name]`` seconds after ``startup_s``; a suspension stops it
    ``stop_s`` later with its progress kept."""

    def __init__(self, work: dict[str, float], startup_s: float = 0.5, stop_s: float = 0.3):
        self.work, self.startup_s, self.stop_s = work, startup_s, stop_s
        self.loop: SchedulingLoop | None = None
        self.done: dict[int, float] = {}             # seconds trained before this run
        self.runs: dict[int, tuple[float, float]] = {}   # job -> (launched, training since)
        self.stopping: dict[int, float] = {}
        self.log: list[tuple[float, str, str]] = []
        self.now = 0.0

    def _name(self, j):
        return self.loop.name(j)

    def admit(self, j, spec):
        self.log.append((self.now, "admit", spec.name))

    def observe(self, view, now):
        self.now = now

    def launch(self, d: StartDecision, packed_with):
        self.runs[d.job_id] = (self.now, self.now + self.startup_s)
        self.log.append((self.now, "launch", self._name(d.job_id)))

    def suspend(self, j, why):
        self.stopping[j] = self.now + self.stop_s
        self.log.append((self.now, f"suspend ({why})", self._name(j)))

    def _trained(self, j, now):
        return self.done.get(j, 0.0) + max(0.0, now - self.runs[j][1])

    def progress(self, j, now):
        if now < self.runs[j][1]:
            return None
        return Progress(min(self._trained(j, now) / self.work[self._name(j)], 1.0), self.runs[j][1])

    def training(self, j):
        pass

    def poll(self, now):
        self.now = now
        out = []
        for j in list(self.runs):
            if self._trained(j, now) >= self.work[self._name(j)] - 1e-9:
                out.append(Ended(j))
            elif j in self.stopping and now >= self.stopping[j] - 1e-9:
                out.append(Ended(j, suspended=True))
        return out

    def ended(self, e: Ended):
        j = e.job_id
        self.done[j] = self._trained(j, self.now) if e.suspended else self.work[self._name(j)]
        self.stopping.pop(j, None)
        del self.runs[j]
        self.log.append((self.now, "suspended" if e.suspended else "finished", self._name(j)))

    def turn(self, loop, now, slotted):
        pass

    def next_event(self, now):
        ahead = [t for t in self.stopping.values() if t > now]
        for j, (_, since) in self.runs.items():
            ahead += [since] if since > now else []
            ahead.append(now + self.work[self._name(j)] - self._trained(j, now))
        return min([t for t in ahead if t > now + 1e-9], default=math.inf)


def _loop(jobs, policy, work, **kw):
    view = LiveView(TOPO, Estimator(), 1.0)
    ex = FakeExecutor(work, **kw)
    plans = []
    loop = SchedulingLoop(TraceAdmission(jobs), policy, view, ex, VirtualClock(),
                          on_plan=lambda t, p: plans.append((t, p)))
    ex.loop = loop
    return loop, ex, plans


def _job(name, arrival=0.0, gpus=1):
    return JobSpec(name=name, model="resnet18", dataset_size=640, epochs=1, batch_size=32,
                   max_gpus=gpus, arrival=arrival)


def test_fifo_queues_on_the_slot_grid_and_starts_each_job_when_gpus_free():
    """Two GPUs, three one-GPU jobs: the third waits for the first to end, then starts
    at the first slot after it (the loop decides on the grid; it sees ends at once)."""
    jobs = [_job("a"), _job("b", 0.2), _job("c", 0.4)]
    loop, ex, plans = _loop(jobs, make_policy("fifo"), {"a": 2.0, "b": 5.0, "c": 1.0})
    loop.run()
    launch = {name: t for t, kind, name in ex.log if kind == "launch"}
    finish = {name: t for t, kind, name in ex.log if kind == "finished"}
    # a at 0; b and c arrive between slots: they join at 1.0; c waits for a's GPU
    assert launch == {"a": 0.0, "b": 1.0, "c": 3.0}
    assert finish == {"a": pytest.approx(2.5), "b": pytest.approx(6.5),
                      "c": pytest.approx(4.5)}
    assert [(t, [s.job_id for s in p.starts]) for t, p in plans] == \
        [(0.0, [0]), (1.0, [1]), (3.0, [2])]
    assert not loop.busy and loop.state.total_free == 2 and not loop.view.running


def test_las_suspends_a_served_job_and_its_gpu_waits_until_it_has_stopped():
    """One GPU: the long job is suspended once it has attained the threshold (counted
    from its training start), the short one is planned onto its GPU at once but launched
    only when the long one has stopped; the long one resumes after and finishes with
    the work it had left."""
    one = parse_topology({"name": "one", "switches": [{"name": "t1", "role": "tor"}],
                          "racks": [{"name": "r1", "tor": "t1"}],
                          "hosts": [{"name": "h1", "rack": "r1", "gpus": 1, "bw": 10000}],
                          "links": []})
    jobs = [_job("long"), _job("short", 4.0)]
    view = LiveView(one, Estimator(), 1.0)
    ex = FakeExecutor({"long": 10.0, "short": 1.0}, startup_s=0.5, stop_s=0.3)
    loop = SchedulingLoop(TraceAdmission(jobs), make_policy("las", las_thresholds=(2.0,)),
                          view, ex, VirtualClock())
    ex.loop = loop
    loop.run()
    log = [(round(t, 3), kind, name) for t, kind, name in ex.log]
    assert (4.0, "suspend (las)", "long") in log
    assert (4.3, "suspended", "long") in log and (4.3, "launch", "short") in log
    finished = {name: t for t, kind, name in log if kind == "finished"}
    assert finished["short"] == pytest.approx(5.8)
    # long: 3.8 s trained before it stopped (it trains while it stops), the other 6.2 s
    # after its relaunch at the 6.0 slot and its start-up
    relaunch = [t for t, kind, name in log if kind == "launch" and name == "long"]
    assert relaunch == [0.0, 6.0]
    assert finished["long"] == pytest.approx(6.5 + 6.2)
    assert not loop.asked and not loop.deferred and loop.state.total_free == 1


def test_a_suspend_planned_before_the_launch_drops_the_start():
    """A Suspend of a job whose start is still deferred removes the start; one of a job
    already asked to stop is not asked twice."""
    jobs = [_job("a")]
    loop, ex, _ = _loop(jobs, make_policy("fifo"), {"a": 5.0})
    j = loop.admit(jobs[0])
    d = StartDecision(j, Placement("a", ("h1",), ("h1",)))
    loop.state.allocate(Placement("other", ("h1",), ("h1",)))    # h1's GPU is taken
    loop.carry_out(SlotPlan([d]))
    assert loop.deferred == [d] and not loop.launched
    loop.carry_out(SlotPlan([Suspend(j)]))
    assert loop.deferred == [] and not any(kind.startswith("suspend") for _, kind, _ in ex.log)


class HeldAdmission:
    """Lets every job in at once, at slot ``at`` (an admission of its own)."""

    def __init__(self, jobs, at):
        self.jobs, self.at = list(jobs), at

    @property
    def pending(self):
        return self.jobs

    def due(self, tick):
        if tick < self.at:
            return []
        out, self.jobs = self.jobs, []
        return out


def test_the_admission_is_a_piece_of_its_own():
    """The trace's admission lets a job in at the first slot at or after its arrival
    (keys in admission order); another admission, the same loop otherwise."""
    jobs = [_job("b", 0.5), _job("a", 0.5), _job("c", 2.0)]
    trace = TraceAdmission(jobs)
    assert [j.name for j in trace.due(0.0)] == []
    assert [j.name for j in trace.due(1.0)] == ["a", "b"]
    assert [j.name for j in trace.pending] == ["c"]
    view = LiveView(TOPO, Estimator(), 1.0)
    ex = FakeExecutor({"a": 1.0, "b": 1.0, "c": 1.0})
    loop = SchedulingLoop(HeldAdmission(jobs, 3.0), make_policy("fifo"), view, ex,
                          VirtualClock())
    ex.loop = loop
    loop.run()
    admitted = [(t, name) for t, kind, name in ex.log if kind == "admit"]
    assert admitted == [(3.0, "b"), (3.0, "a"), (3.0, "c")]
    assert {loop.name(j) for j in range(3)} == {"a", "b", "c"} and not loop.busy


def test_the_clocks():
    v = VirtualClock()
    v.wait_until(3.0)
    v.wait_until(1.0)                 # never back
    assert v.now() == 3.0
    with pytest.raises(RuntimeError):
        v.wait_until(math.inf)
    w = WallClock()
    w.start()
    a = w.now()
    w.wait_until(a + 0.01)
    assert w.now() >= a + 0.01
