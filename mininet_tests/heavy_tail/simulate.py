"""The heavy-tail mix in the discrete-event simulator (``job_scheduler.simulation.
simulator``): each mode's mean JCT as the simulator gives it on a seed's mix, beside the
measured one in the simulator's trust check (``mininet_tests.heavy_tail_trust``).

The jobs are the mix's (:mod:`mininet_tests.heavy_tail.mix`): each states its own batch
(``Estimator``'s own figures: the bytes its worker pushes and pulls on the fabric, the
compute it sleeps, ps-lite's ``KEYS`` keys with ``PIPELINE_KEYS`` in flight) and one
batch more than it trains, ``kv.init``'s exchange before its first batch (priced as one
of its batches: its compute, a few ms, is left in). They are placed as the experiment
places them (``fabric_setup.placement_step``, here :class:`MixPlacement`): the PS on a
rack-1 host, the lone worker on a rack-2 host with a free GPU, in arrival order, so that
every push and pull crosses both rack uplinks. The fabric is the experiment's two-rack
topology scaled to its uplink rate, priced by the exchange model on the emulated fabric
(``ExchangePricing.for_topology(emulated=True)``, the committed constants, never fitted
to these runs), the scheduling slot the run's (``predict.SLOT_S``), and the simulator
set to price the exchange as that model does: each job's first start held for the model's
start-up (``Simulator(startup=True)``), an uplink's rate shared among the senders busy at
once (``share="senders"``: the model's processor sharing, in which a job waiting in a
queue leaves the link to the others), a round's queueing counted once per egress pair,
the more urgent classes' queue drained at the link's rate
(``ExchangePricing(waits="pair")``, as the model's queue constants were calibrated), and
the levels of a rule recomputed every slot (``rerank=True``: the controller re-ranks as
batches are reported). The hosts' congestion control sets how full the senders keep a
FIFO: the calibrated share under BBR (the constants were fitted with it), and under a
loss-based control (CUBIC, Reno) the mean of its sawtooth between a drop's
multiplicative decrease and the full buffer (``exchange_waits.standing_fill``). A bulk
flow's round (every mix job's: its window of keys is more than one burst) waits the
backlog its senders keep where nothing drops them, the deep FIFO's
(``ExchangePricing(bulk_backlog_bytes=...)``): in its own bucket on the fair queue, and
at a shallow FIFO, where what does not fit is dropped and resent, unless the hosts back
off on loss (``exchange_waits.backs_off_on_loss``: CUBIC and Reno shrink their windows,
so the shallow FIFO bounds their backlog); a start-up's control messages are sparse.

A mode is a ranking rule (strict priority on the uplinks, ``priority=RULE``) on a switch
queue (:func:`mode_pricing`): ``off``, the deep FIFO, and ``off-shallow``, the FIFO at the
run's depth, as the pricing's FIFO waits at that depth; ``off-fair``, per-flow fair
queueing, as the pricing's fair queue (``queue="fair"``: the link shared as with a FIFO,
a sparse message waiting behind a burst of its own flow and not the whole queue, a bulk
flow's behind its own bucket's share of the backlog). ``pias`` (the
hosts tag each connection by the bytes it has sent, the switches keep strict priority on
the tag) as the exchange model's prediction takes it (``predict.model_jobs``): the
``attained`` rule at PIAS's thresholds for the mix's size distribution and load
(``Simulator(attained_thresholds=...)``; a connection carries one direction of a batch,
so its attained bytes are the job's batches times its bytes per batch), on the
baseline's FIFO leaves.
"""

from __future__ import annotations

from dataclasses import replace

from job_scheduler.core.estimator import (OWN_BYTES, OWN_COMPUTE, OWN_KEYS, OWN_WINDOW,
                                          Estimator, nominal_bandwidth)
from job_scheduler.core.exchange_pricing import ExchangePricing
from job_scheduler.core.policies.base import Policy
from mininet_fabric import baselines as bl
from mininet_tests.heavy_tail.fabric_setup import PS_HOSTS, WORKER_HOSTS, experiment_topology
from mininet_tests.heavy_tail.mix import MixJob
from mininet_tests.heavy_tail.predict import (BATCH_SIZE, KEYS, PIAS_MODEL_RULE, PIPELINE_KEYS,
                                             SLOT_S)
from sluice_common import rank_rules
from sluice_common.exchange import MTU_BYTES
from sluice_common.exchange_waits import backs_off_on_loss, standing_fill
from sluice_common.jobspec import JobSpec
from sluice_common.placement import Placement

# each switch queue the simulator has a model of: the exchange pricing's discipline
QUEUES = {"off": "fifo", "off-shallow": "fifo", "off-fair": "fair", "pias": "fifo"}


def mix_jobs(mix: list[MixJob]) -> list[JobSpec]:
    """The mix's jobs as the simulator takes them (module doc): one worker each, its own
    batch, one batch more for ``kv.init``."""
    return [JobSpec(name=j.name, model="resnet18", dataset_size=BATCH_SIZE * (j.batches + 1),
                    epochs=1, batch_size=BATCH_SIZE, max_gpus=1, arrival=float(j.arrival),
                    extra={OWN_BYTES: j.bytes_per_batch, OWN_COMPUTE: j.compute_s,
                           OWN_KEYS: KEYS, OWN_WINDOW: PIPELINE_KEYS})
            for j in mix]


class MixPlacement(Policy):
    """The experiment's placement (``fabric_setup.placement_step``): in arrival order,
    job ``i``'s PS on ``PS_HOSTS[i % 2]`` and its worker on the first rack-2 host with a
    free GPU from ``WORKER_HOSTS[i % 2]`` on; the queue waits when none is free."""
    name = "fixed"

    def __init__(self, names: list[str]):
        self.index = {n: i for i, n in enumerate(names)}

    def step(self, sim) -> None:
        for j in list(sim.waiting):
            name = sim.jobs[j].name
            i = self.index[name]
            order = WORKER_HOSTS[i % 2:] + WORKER_HOSTS[:i % 2]
            host = next((h for h in order if sim.state.free[sim.state.index[h]] > 0), None)
            if host is None:
                return
            sim.start(j, Placement(name, (PS_HOSTS[i % 2],), (host,)))


def mode_pricing(topology, mode: str, uplink_mbps: float, rtt_s: float | None,
                 shallow_packets: int | None, workload: bl.Workload | None = None,
                 host_cc: str | None = None
                 ) -> tuple[str | None, ExchangePricing, tuple[int, ...] | None] | None:
    """(the mode's rule or None, the exchange pricing of its switch queue, the demotion
    thresholds its hosts tag at or None), or None when the simulator has no model of the
    mode. ``shallow_packets``: the depth the run's ``off-shallow`` had (None: the
    baseline's own); ``workload``: the size distribution and load a host-tagging baseline
    derives its thresholds from (without it, such a mode has no model); ``host_cc``: the
    hosts' congestion control, which sets how full the senders keep a FIFO
    (``exchange_waits.standing_fill``; None: the machine's)."""
    rule, baseline = bl.split_mode(mode, rank_rules.names())
    queue = QUEUES.get(baseline)
    if queue is None:
        return None
    thresholds = None
    if bl.baseline(baseline).host_rules is not None:
        if workload is None or rule is not None:
            return None          # the hosts' tags are the whole rule: no model without them
        rule, thresholds = PIAS_MODEL_RULE, bl.pias_thresholds(workload)
    if baseline == "off-shallow" and shallow_packets:
        depth = shallow_packets * MTU_BYTES
    else:
        depth = bl.queue_bytes(baseline, uplink_mbps, rtt_s)
    base = ExchangePricing.for_topology(topology, emulated=True)
    constants = replace(base.constants,
                        queue_fill=standing_fill(host_cc, base.constants.queue_fill))
    # a bulk flow's round waits the backlog its senders keep where nothing drops them (the
    # deep FIFO's), unless the hosts back off on loss and a shallow FIFO bounds it
    bulk = (None if queue == "fifo" and backs_off_on_loss(host_cc)
            else bl.queue_bytes("off", uplink_mbps, rtt_s))
    pricing = replace(base, constants=constants, buffer_bytes=depth, queue=queue,
                      urgent_bytes=bl.urgent_bytes(baseline), waits="pair",
                      bulk_backlog_bytes=bulk)
    return rule, pricing, thresholds


def simulated_mean_jct(mix: list[MixJob], mode: str, uplink_mbps: float,
                       rtt_s: float | None = None, shallow_packets: int | None = None,
                       workload: bl.Workload | None = None, host_cc: str | None = None
                       ) -> float | None:
    """The simulator's mean JCT (s) of ``mix`` under ``mode`` on the experiment's fabric
    at ``uplink_mbps`` (module doc); None when it has no model of the mode."""
    from job_scheduler.simulation.simulator import Simulator

    topology, _ = experiment_topology(uplink_mbps)
    priced = mode_pricing(topology, mode, uplink_mbps, rtt_s, shallow_packets, workload,
                          host_cc)
    if priced is None:
        return None
    rule, pricing, thresholds = priced
    estimator = Estimator(nominal_bw_mbps=nominal_bandwidth(topology), exchange=pricing)
    jobs = mix_jobs(mix)
    sim = Simulator(topology, jobs, MixPlacement([j.name for j in jobs]), estimator=estimator,
                    slot=SLOT_S, priority=rule, startup=True, share="senders",
                    rerank=True, attained_thresholds=thresholds)
    return sim.run().avg_jct
