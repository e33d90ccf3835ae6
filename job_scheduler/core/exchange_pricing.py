"""The exchange model (:mod:`sluice_common.exchange`) as the scheduler prices a job, on a
topology the scheduler plans for (one model for the estimator, the
simulator, the fluid model and the policies).

With an :class:`ExchangePricing` (``sluice simulate --exchange``, and the estimator of
every ``sluice run`` / ``sluice demo``, ``end_to_end.run.run_estimator``: the constants
of the demo's predictions), a job pays per batch, beyond its bytes over its bandwidth
(the bytes the model puts through the bottleneck, :meth:`ExchangePricing.wire_bytes`, at
the model's ``efficiency``):

- the batch's fixed exchange time over its placement's path
  (``job_scheduler.core.estimator.exchange_path``; a cross-rack path of the topology
  where no placement is known; none on one GPU, whose PS is on its host),
  :func:`~sluice_common.exchange.fixed_batch_s`: the batch's overhead, each key's ps-lite
  messages, ``R`` message rounds of one round trip each and the store-and-forward fill;
- at every shared rack uplink, each message round's wait behind the queue the jobs in its
  priority class and the more urgent ones keep there
  (:func:`~sluice_common.exchange_waits.fifo_round_wait_s`: the standing queue, and what
  drops cost a round when the FIFO is shallow), which the simulator works out from the
  jobs sharing each uplink (``Simulator``; a policy's look at an unstarted placement
  leaves it out, as it leaves out the sharing).

``queue`` names the egress's discipline within a priority class: ``"fifo"`` (the
default; ``buffer_bytes`` deep, a shallow FIFO drops) or ``"fair"``, per-flow fair
queueing (the fabric's ``off-fair`` leaves): the link's rate is shared as the simulator
shares it under a FIFO (per flow, or per sender busy at once), but a sparse flow's message
no longer waits behind the whole standing queue of its class, only behind its own flow's
bucket (``buffer_bytes``: about a burst) and one round of every other busy flow
(:func:`~sluice_common.exchange_waits.fair_round_wait_s`); behind the more urgent classes it
still waits what they keep queued (``urgent_bytes``, the FIFO leaf's depth), drained at
the link's full rate: the exchange model's fair-queued leaves
(``sluice_common.exchange.egress_state``).

``bulk_backlog_bytes`` (None: off) prices a bulk flow apart: one with more than a burst
in flight (a job's window of keys, :meth:`ExchangePricing.window_bytes`, over
``burst_bytes``; a start-up's control messages and a small job's keys are sparse). Its
own bytes are in the backlog the senders keep, so its round waits that whole backlog
wherever it sits: on fair leaves in its own bucket, which DRR drains at its share ``C /
n`` (its own queued bytes at ``C / n`` are the class's standing queue at ``C`` when
every sender keeps its share); at a FIFO shorter than the backlog, dropped and resent
from its sender, when the senders do not back off on loss (BBR paces to the delivery
rate). A bulk round waits ``bulk_backlog_bytes`` (the deep FIFO leaf's depth: the
backlog the senders keep where nothing drops them) as a FIFO round does, plus the
drops of the leaf's own depth (:meth:`ExchangePricing.bulk_round`). The calibration's
own queue mix (bench/results/exchange-calibration-2026-11-28.json and
-backlog-stage.json, BBR) shows both: its bulk jobs take 18.96 s on the fair queue and
19.17 s on a 50-packet FIFO against 18.44 s on the deep one, while its small probes take
0.94 s and 2.28 s against 4.02 s.

``waits`` says how a message round's queueing is counted. ``"uplinks"`` (the default):
at every shared rack uplink its path crosses (the simulator sums them), behind the jobs of
its class and of the more urgent ones alike, drained at its class's rate. ``"pair"``: as
the exchange model counts it (``sluice_common.exchange.egress_state``, whose constants
were calibrated so): once per egress pair, the two directions of one shaped path (a
cross-rack job's push leaves by its worker's rack uplink and its pull by its server's, so
a round waits the mean of the two uplinks' waits, not their sum), and in a FIFO class
first behind the more urgent classes' queue, which the link drains at its full rate, then
behind its own class's at its class's rate.

A job may state its own batch (``Estimator``: its bytes, keys and window, the Mininet
mix's synthetic jobs): ``keys`` and ``window`` given to :meth:`ExchangePricing.fixed_s`,
:meth:`~ExchangePricing.wire_bytes` and :meth:`~ExchangePricing.rounds` replace the
``KEY_BYTES`` buckets and the pricing's own window for that batch.

The host-software constants (``overhead_s``, ``per_key_s``, ``queue_fill``,
``efficiency``) are the calibrated ones. The per-hop forwarding time ``hop_s`` is a
property of the fabric: the calibrated value (0.33 ms) is the emulated fabric's
userspace Open vSwitch and veth pairs, so a topology described at its real rates (what
``sluice simulate`` plans for) gets a hardware switch's instead, ``HARDWARE_HOP_S`` (an
assumption: cut-through data-centre switches forward in well under 1 us, store and
forward adds the frame's serialisation, which the model counts apart).

On the emulated fabric (``emulated=True``: what ``sluice run`` and the Mininet experiments
run on) every link runs at ``bw * emulation_bw_scale`` and the emulated workers move
their bytes times the same scale, so eq. 5's Comm is the same as on the described
cluster; what differs is the fixed terms (the userspace datapath's hops, the keys of the
scaled bytes) and the queues (a 200-packet FIFO at the scaled rate waits far longer).
``scale`` carries that: the pricing's keys and queue rates are the scaled ones. A PS and
its workers on one host exchange over the loopback there, unshaped, at the model's
``local_Bps`` (:meth:`ExchangePricing.bus_mbps`); on a described cluster over the host's
``intra_bw``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

from sluice_common.exchange import (MTU_BYTES, ExchangeConstants, burst_credit,
                                    default_constants, fixed_batch_s, rounds, startup_time,
                                    transfer_s, wire_key_bytes)
from sluice_common.exchange_waits import (backlog_bytes, fair_round_wait_s, fifo_round_wait_s,
                                          fifo_wait_of_sums, fifo_wait_of_sums_at,
                                          loss_wait_s, queue_wait_s)

HARDWARE_HOP_S = 1e-6              # forwarding per hop in a real switch (module doc)
KEY_BYTES = 4 * 2 ** 20            # the worker's bucket: ps_runtime's default bucket_mb, 4
BUFFER_PACKETS = 200               # per-port FIFO per class, as on the emulated fabric
QUEUES = ("fifo", "fair")          # an egress class's discipline (module doc)
WAITS = ("uplinks", "pair")        # how a round's queueing is counted (module doc)


@dataclass(frozen=True)
class ExchangePricing:
    """The exchange model's terms on one fabric: ``constants`` (hop_s set for it),
    ``path`` the link rates (bytes/s) of a worker-to-PS path across racks, ``buffer_bytes``
    each shared egress's FIFO per class; every key pushed at once (``window`` 0, as
    MXNet's workers send them)."""
    constants: ExchangeConstants
    path: tuple[float, ...]
    buffer_bytes: float = BUFFER_PACKETS * MTU_BYTES
    window: int = 0
    scale: float = 1.0         # the fabric's rates and a batch's bytes over the described ones
    emulated: bool = False     # priced on the emulated fabric (in-host: its loopback)
    queue: str = "fifo"        # each class's discipline: "fifo" or "fair" (module doc)
    waits: str = "uplinks"     # how a round's queueing is counted: "uplinks" or "pair"
    urgent_bytes: float | None = None   # "fair": what the more urgent classes keep queued
    bulk_backlog_bytes: float | None = None   # what a bulk flow's round waits (module doc)
    # fixed_s's answers by its arguments: a simulation asks the same few paths per job
    # size again at every re-timing (not a field of the pricing: no compare, no repr)
    _fixed_memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        if any(not r > 0 for r in self.path) or self.buffer_bytes < 0 or self.window < 0:
            raise ValueError("need link rates > 0, buffer_bytes >= 0 and window >= 0")
        if not self.scale > 0:
            raise ValueError(f"scale must be > 0, got {self.scale}")
        if self.queue not in QUEUES:
            raise ValueError(f"queue must be one of {', '.join(QUEUES)}, got {self.queue!r}")
        if self.waits not in WAITS:
            raise ValueError(f"waits must be one of {', '.join(WAITS)}, got {self.waits!r}")
        if self.urgent_bytes is not None and not self.urgent_bytes >= 0:
            raise ValueError(f"urgent_bytes must be >= 0, got {self.urgent_bytes}")
        if self.bulk_backlog_bytes is not None and not self.bulk_backlog_bytes >= 0:
            raise ValueError(f"bulk_backlog_bytes must be >= 0, got {self.bulk_backlog_bytes}")

    @classmethod
    def for_topology(cls, topology, emulated: bool = False,
                     constants: ExchangeConstants | None = None) -> "ExchangePricing":
        """The pricing on ``topology``: at its described rates with ``HARDWARE_HOP_S``
        (``emulated=False``), or at its emulated rates (``bw * emulation_bw_scale``) with
        the calibrated ``hop_s``."""
        c = constants or default_constants()
        scale = topology.emulation_bw_scale if emulated else 1.0
        if not emulated:
            c = replace(c, hop_s=HARDWARE_HOP_S)
        return cls(c, tuple(mbps * scale * 1e6 / 8 for mbps in cross_rack_rates(topology)),
                   scale=scale, emulated=emulated)

    def keys(self, bytes_per_batch: float, keys: int | None = None) -> int:
        """The batch's keys: ``keys`` when the job states them, else its bytes (as the
        fabric carries them, times ``scale``) in buckets of ``KEY_BYTES``."""
        if keys is not None:
            return keys
        return max(1, math.ceil(bytes_per_batch * self.scale / KEY_BYTES))

    def _window(self, window: int | None) -> int:
        return self.window if window is None else window

    def rounds(self, bytes_per_batch: float, keys: int | None = None,
               window: int | None = None) -> int:
        """Message rounds on the batch's critical path."""
        return rounds(self.keys(bytes_per_batch, keys), self._window(window))

    def fixed_s(self, bytes_per_batch: float, path: tuple[float, ...] | None = None,
                keys: int | None = None, window: int | None = None) -> float:
        """The batch's fixed exchange time (module doc) over ``path``, described link rates
        in Mbit/s (``job_scheduler.core.estimator.exchange_path``; ``()``: PS and workers
        on one host), or over the cross-rack path (None)."""
        key = (bytes_per_batch, None if path is None else tuple(path), keys, window)
        got = self._fixed_memo.get(key)
        if got is None:
            got = self._fixed_memo[key] = fixed_batch_s(
                self.keys(bytes_per_batch, keys), self._rates(path), self._window(window),
                self.constants)
        return got

    def _rates(self, path: tuple[float, ...] | None) -> tuple[float, ...]:
        """``path``'s described rates (Mbit/s) as the emulated bytes/s the model takes; the
        cross-rack path for None."""
        return self.path if path is None else tuple(m * self.scale * 1e6 / 8 for m in path)

    def transfer_s(self, bytes_per_batch: float, path: tuple[float, ...] | None = None,
                   servers: int = 1, keys: int | None = None, window: int | None = None
                   ) -> float:
        """Seconds one worker-server pair's share of a batch takes on the wire alone over
        ``path`` (as :meth:`fixed_s` takes it), the model's ``X`` term."""
        return transfer_s(bytes_per_batch * self.scale / servers,
                          self.keys(bytes_per_batch, keys), self._rates(path),
                          self._window(window), self.constants)

    def wire_bytes(self, bytes_per_batch: float, servers: int = 1, keys: int | None = None,
                   window: int | None = None) -> float:
        """Bytes (described scale) one batch puts through its bottleneck alone: its push and
        pull in the order ps-lite sends them (``key_times``), less the idle shaper's burst
        each way, the model's ``X`` term times the bottleneck's rate and ``efficiency``.
        With ``servers`` PS each worker-server pair moves ``1/servers`` of the bytes and
        gets its own burst."""
        b = bytes_per_batch * self.scale / servers
        wire = (wire_key_bytes(b, self.keys(bytes_per_batch, keys), self._window(window))
                - burst_credit(b, self.path, self.constants))
        return servers * max(0.0, wire) / self.scale

    def bus_mbps(self, host) -> float:
        """The in-host exchange's Mbit/s at described scale: on the emulated fabric the
        loopback the model is calibrated on (``local_Bps``, moving bytes ``scale`` times
        the described ones: unshaped, as fast as the host's CPUs copy them); on a
        described cluster the host's own bus, ``intra_bw``."""
        if self.emulated:
            return self.constants.local_Bps * 8 / 1e6 / self.scale
        return host.intra_bw

    def window_bytes(self, bytes_per_batch: float, servers: int = 1, keys: int | None = None,
                     window: int | None = None) -> float:
        """Bytes (on the fabric, times ``scale``) one worker-server flow of the batch has in
        flight at once: its window of keys (every key with window 0), its share of them
        with ``servers`` PS."""
        k = self.keys(bytes_per_batch, keys)
        w = self._window(window)
        held = w if 0 < w < k else k
        return bytes_per_batch * self.scale / max(1, servers) * held / k

    def round_wait_s(self, ahead: list[float], class_rate_mbps: float,
                     urgent: list[float] = (), capacity_mbps: float | None = None,
                     in_flight_bytes: float | None = None) -> float:
        """One message round's wait at a shared egress whose class gets
        ``class_rate_mbps`` (described, times ``scale`` on the fabric), behind jobs sending
        shares ``ahead`` of their iterations. ``urgent``: those of ``ahead`` in more urgent
        classes, on a link of ``capacity_mbps``; a FIFO class waits behind all of
        ``ahead`` alike, a fair one (``queue="fair"``, module doc) tells them apart.
        ``in_flight_bytes``: what the round's own flow has in flight at once
        (:meth:`window_bytes`; None: a control message), which with
        ``bulk_backlog_bytes`` makes it a bulk round (:meth:`bulk_round`, module doc)."""
        rate = class_rate_mbps * self.scale * 1e6 / 8
        c = self.constants
        bulk = self.bulk_round(in_flight_bytes)
        if self.queue == "fifo" and not bulk and (self.waits == "uplinks" or not urgent):
            return fifo_round_wait_s(ahead, rate, self.buffer_bytes, c)
        if bulk:
            held = max(self.bulk_backlog_bytes, backlog_bytes(self.buffer_bytes, c))
            drops = self.buffer_bytes if self.queue == "fifo" else held
            if self.waits == "uplinks" or not urgent:
                return queue_wait_s(ahead, rate, held, c) + loss_wait_s(ahead, drops, c)
        same = list(ahead)
        for share in urgent:
            same.remove(share)
        cap = (class_rate_mbps if capacity_mbps is None else capacity_mbps) * self.scale * 1e6 / 8
        if bulk:                        # "pair": the urgent classes' backlog at the link's rate
            return (queue_wait_s(list(urgent), cap, held, c) + queue_wait_s(same, rate, held, c)
                    + loss_wait_s(same, drops, c))
        if self.queue == "fifo":        # "pair": the urgent classes' queue at the link's rate
            return (queue_wait_s(list(urgent), cap, backlog_bytes(self.buffer_bytes, c), c)
                    + fifo_round_wait_s(same, rate, self.buffer_bytes, c))
        wait = queue_wait_s(same, rate, self.buffer_bytes, c) + fair_round_wait_s(same, rate, c)
        if urgent:
            wait += queue_wait_s(list(urgent), cap, self.urgent_bytes or 0.0, c)
        return wait

    def waits_on_sums(self, in_flight_bytes: float | None) -> bool:
        """Does a round of a flow with ``in_flight_bytes`` in flight wait only on the busy
        share and the sum of the senders ahead (a FIFO class, not a bulk round, each
        uplink counted on its own), so that :meth:`round_wait_of_sums` prices it?"""
        return (self.queue == "fifo" and self.waits == "uplinks"
                and not self.bulk_round(in_flight_bytes))

    def round_wait_of_sums(self, busy: float, senders: float,
                           class_rate_mbps: float) -> float:
        """:meth:`round_wait_s` where :meth:`waits_on_sums` holds, of ``busy =
        busy_share(ahead)`` and ``senders = sum(ahead)``."""
        rate = class_rate_mbps * self.scale * 1e6 / 8
        return fifo_wait_of_sums(busy, senders, rate, self.buffer_bytes, self.constants)

    def round_wait_of_sums_fn(self) -> Callable[[float, float, float], float]:
        """:meth:`round_wait_of_sums` as one function of its three figures, the pricing's
        constants read once (:func:`~sluice_common.exchange_waits.fifo_wait_of_sums_at`):
        the same floats, for a simulation that asks at every uplink of every re-timing."""
        return fifo_wait_of_sums_at(self.buffer_bytes, self.constants, self.scale)

    def bulk_round(self, in_flight_bytes: float | None) -> bool:
        """Is a round of a flow with ``in_flight_bytes`` in flight a bulk one (module
        doc)? With ``bulk_backlog_bytes`` set, when the flow holds more than one burst
        (``burst_bytes``: what a host's shaper or TCP's window releases back to back, what
        the fair leaf's own bucket is priced at for a sparse flow)."""
        return (self.bulk_backlog_bytes is not None and in_flight_bytes is not None
                and in_flight_bytes > self.constants.burst_bytes)

    def startup_s(self, round_wait_s: float, priority: bool = False,
                  alone_s: float | None = None) -> float:
        """A job's start-up beyond its ``kv.init`` batch when each of its message rounds
        waits ``round_wait_s`` (:func:`~sluice_common.exchange.startup_time`: the process
        hand-over, ps-lite's rendezvous and barriers; with ``priority`` its registration
        with the controller too). ``alone_s``: its start-up and close alone where it was
        measured on the runs being modelled (``ps_runtime.calibration.runtime_terms``),
        in place of the constants' own, measured on one calibration job."""
        c = self.constants if alone_s is None else replace(self.constants, startup_s=alone_s)
        return startup_time(round_wait_s, c, priority)


def cross_rack_rates(topology) -> list[float]:
    """Link rates (Mbit/s) of the path from the first host of the first rack to the first
    host of the last rack (one rack: to its second host; one host: no links)."""
    hosts = [topology.hosts_by_rack[r.name][0].name for r in topology.racks
             if topology.hosts_by_rack[r.name]]
    a, b = hosts[0], hosts[-1]
    if a == b:
        rack = topology.hosts_by_rack[topology.racks[0].name]
        if len(rack) < 2:
            return []
        b = rack[1].name
    p = topology.path(a, b)
    return [float(topology.graph.edges[u, v]["bw"]) for u, v in zip(p, p[1:])]
