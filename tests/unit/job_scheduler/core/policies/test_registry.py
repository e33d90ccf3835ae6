"""The policy registry: one list that make_policy, the command line, the service and the
docs read, and every policy in it keeps the Policy protocol the loops drive."""

from __future__ import annotations

import argparse
import math
import re
from types import SimpleNamespace

import pytest

from end_to_end import cli as e2e_cli
from job_scheduler.simulation import cli as sim_cli
from job_scheduler.service import cli as service_cli
from job_scheduler.core.estimator import Estimator
from job_scheduler.core.policies import (NON_PREEMPTIVE, POLICY_NAMES, REGISTRY, Policy,
                                         make_policy, parse_policy_names)
from job_scheduler.service.policy_step import SERVICE_POLICIES
from job_scheduler.service.policy_step import make_policy_step as service_policy
from sluice_common.errors import InputError
from topologies import load_topology
from support.paths import REPO

DESIGN = REPO / "docs" / "design.md"
TWO_RACK = load_topology("two-rack")


def _help_of(configure, dest: str) -> str:
    parser = argparse.ArgumentParser()
    configure(parser)
    (action,) = [a for a in parser._actions if a.dest == dest]
    return action.help


def _names_in(text: str) -> list[str]:
    """The comma-separated list of names in a help text."""
    (names,) = re.findall(r"[a-z]+(?:, ?[a-z]+)+", text)
    return re.split(r", ?", names)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_registered_policy_keeps_the_protocol(name):
    policy = make_policy(name, seed=1)
    assert isinstance(policy, Policy)
    assert policy.name == name
    # a fresh object per call: policies keep per-run state
    assert make_policy(name, seed=1) is not policy


def test_every_hook_is_declared_on_the_base_with_a_no_op_default():
    """The loops call every hook without probing: a policy that overrides only
    ``step`` still answers them all, and not deriving from Policy is not a policy."""
    class OnlyStep(Policy):
        name = "x"

        def step(self, sim):
            sim.stepped = True

    p, sim = OnlyStep(), SimpleNamespace(stepped=False)
    p.on_arrival(sim, 0), p.idle(sim, 3), p.on_complete(sim, 0), p.on_leave(sim, 0)
    p.regrow(sim), p.forget(0), p.on_requeue(sim, 0), p.on_packed(sim, 0)
    assert (p.wants_slot(sim), p.next_wakeup(sim), p.needs(sim, 0)) == (False, math.inf, 1)
    assert p.shares_gpus and list(p.trace) == []
    p.step(sim)
    assert sim.stepped
    # las time-shares by its own preemption: it refuses the sharing mechanisms
    assert not make_policy("las").shares_gpus and make_policy("sluice").shares_gpus

    class NoBase:
        name = "x"

        def step(self, sim): ...

    assert not isinstance(NoBase(), Policy)


def test_cli_choices_are_the_registry():
    assert POLICY_NAMES == tuple(REGISTRY) and len(POLICY_NAMES) == 7
    assert _names_in(_help_of(sim_cli.configure_simulate, "policies")) == list(POLICY_NAMES)
    assert parse_policy_names(",".join(POLICY_NAMES)) == list(POLICY_NAMES)
    with pytest.raises(InputError, match="unknown policy 'nope'"):
        parse_policy_names("nope")
    # the scheduler service and sluice run have them all, the preemptive ones included
    # (they suspend and resume real jobs: end_to_end.suspend, service.suspending)
    preemptive = [n for n, e in REGISTRY.items() if e.preemptive]
    assert preemptive == ["las", "sluice"]
    assert SERVICE_POLICIES == POLICY_NAMES
    assert NON_PREEMPTIVE == tuple(n for n in POLICY_NAMES if n not in preemptive)
    assert _names_in(_help_of(e2e_cli.configure_run, "policy")) == list(POLICY_NAMES)
    assert _names_in(_help_of(service_cli.configure_scheduler, "policy")) == list(POLICY_NAMES)


def test_the_service_builds_every_policy_and_refuses_an_unknown_one():
    est = Estimator()
    for name in POLICY_NAMES:
        step = service_policy(name, TWO_RACK, est)
        assert step.policy.name == name and step.preemptive == REGISTRY[name].preemptive
    with pytest.raises(InputError, match="unknown policy 'nope'"):
        service_policy("nope", TWO_RACK, est)


def test_the_design_document_lists_the_registry():
    rows = re.findall(r"^\| `([a-z]+)` \| (.+) \|$", DESIGN.read_text(encoding="utf-8"), re.M)
    assert rows == [(e.name, e.description) for e in REGISTRY.values()]
