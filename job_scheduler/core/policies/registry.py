"""The one list of policies: name -> factory and a one-line description. ``make_policy``,
``parse_policy_names``, the command line (``sluice simulate --policies``, ``sluice run
--policy``, ``sluice scheduler --policy``), the scheduler service and the docs read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from job_scheduler.core.placement import DEFAULT_LAMBDA
from job_scheduler.core.policies import fifo, las, lyapunov, random, single, sluice, tetris
from job_scheduler.core.policies.base import Policy, PolicyOptions
from job_scheduler.core.policies.las import DEFAULT_LAS_THRESHOLDS
from job_scheduler.core.policies.lyapunov import DEFAULT_EPS, DEFAULT_K, DEFAULT_V
from sluice_common import rank_rules
from sluice_common.errors import InputError, option_error


@dataclass(frozen=True)
class PolicyEntry:
    name: str
    make: Callable[[PolicyOptions], Policy]
    description: str
    preemptive: bool = False    # suspends running jobs (with a checkpoint, to resume)
    fixed_count: bool = False   # runs every job at its requested GPU count


REGISTRY: dict[str, PolicyEntry] = {e.name: e for e in (
    PolicyEntry("lyapunov", lyapunov.make, "FIFO head of line, Proteus drift-plus-penalty "
                "GPU count, Liquid best fit (+ group GA for a slot's batch)"),
    PolicyEntry("single", single.make, "FIFO head of line, 1 GPU per job, Liquid best fit"),
    PolicyEntry("random", random.make, "FIFO head of line, GPU count uniform in "
                "[1, max_gpus] (seeded), Liquid best fit"),
    PolicyEntry("fifo", fifo.make, "FIFO head of line, the requested GPU count, first fit",
                fixed_count=True),
    PolicyEntry("tetris", tetris.make, "packing with backfill, the requested GPU count, "
                "Tetris cosine placement", fixed_count=True),
    PolicyEntry("las", las.make, "Tiresias 2D-LAS priority, the requested GPU count, "
                "preemptive, first fit", preemptive=True, fixed_count=True),
    PolicyEntry("sluice", sluice.make, "shortest predicted remaining work, drift-plus-"
                "penalty count with the queue's GPU time priced, preemptive at a cost, "
                "Liquid best fit", preemptive=True),
)}

POLICY_NAMES = tuple(REGISTRY)
# the policies that can price a placement with the fabric's priority (price_priority)
PRICES_PRIORITY = ("sluice",)
# the policies that never suspend a running job
NON_PREEMPTIVE = tuple(n for n, e in REGISTRY.items() if not e.preemptive)


def _unknown(name: str, field: str = "policy") -> InputError:
    return option_error(field, f"unknown policy {name!r} (known: {', '.join(POLICY_NAMES)})")


def make_policy(name: str, *, seed: int = 0, V: float = DEFAULT_V, eps: float = DEFAULT_EPS,
                lam: float = DEFAULT_LAMBDA, ga: bool = True,
                las_thresholds: tuple[float, ...] = DEFAULT_LAS_THRESHOLDS,
                placement: str | None = None, k: str = DEFAULT_K,
                estimate_error: float = 0.0, price_priority: str | None = None) -> Policy:
    """A fresh policy object (policies keep per-run state: make one per run).
    ``placement`` swaps the policy's own placement for another (Blox-style), e.g. fifo
    with Liquid best fit to separate the effect of ordering from that of placement.
    ``price_priority``: sluice prices placements under this rule of
    ``sluice_common.rank_rules`` (None: the fair share); another policy refuses it."""
    entry = REGISTRY.get(name)
    if entry is None:
        raise _unknown(name)
    check_price_priority(price_priority, name)
    return entry.make(PolicyOptions(seed=seed, lam=lam, placement=placement, V=V, eps=eps,
                                    k=k, ga=ga, las_thresholds=las_thresholds,
                                    estimate_error=estimate_error,
                                    price_priority=price_priority))


def check_price_priority(rule: str | None, policy: str | None = None) -> None:
    """``rule`` is a ranking rule (or None), and ``policy`` (when named) prices with it:
    else the option error of field ``price_priority`` (its flag: ``--price-priority``)."""
    if rule is None:
        return
    if rule not in rank_rules.names():
        raise option_error("price_priority", f"unknown rule {rule!r} (known: "
                           f"{', '.join(rank_rules.names())})")
    if policy is not None and policy not in PRICES_PRIORITY:
        raise option_error("price_priority", f"policy {policy!r} does not price placements "
                           f"with priority (only {', '.join(PRICES_PRIORITY)} does)")


def parse_policy_names(text: str) -> list[str]:
    """``"lyapunov,fifo"`` -> names, rejecting unknown or empty ones before any run."""
    names = [n.strip() for n in text.split(",")]
    if not names or any(not n for n in names):
        raise option_error("policies", f"empty policy name in {text!r}")
    for n in names:
        if n not in REGISTRY:
            raise _unknown(n, "policies")
    return list(dict.fromkeys(names))


def policy_table() -> str:
    """The registry as a text table (``sluice simulate --help``, the docs)."""
    width = max(map(len, REGISTRY))
    return "\n".join(f"{e.name:<{width}}  {e.description}" for e in REGISTRY.values())

