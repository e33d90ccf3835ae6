"""One model of a PS job's exchange: how long a batch's push + pull takes, alone on its
path and sharing shaped egresses with other jobs. Pure apart from
:func:`load_constants` / :func:`save_constants`, which read and write the calibrated data
file (``sluice_common/data/exchange_constants.yaml``, written by
``sluice calibrate exchange --write``).

Units: seconds, bytes, bytes/s. A *path* is the list of link rates (bytes/s) a message
crosses from worker to server, one per hop (host link, ToR uplink, ...); the reverse
direction crosses the same rates. An empty path is an in-host exchange (loopback).

**Alone** (:func:`batch_exchange_s`), one batch of ``B`` bytes cut into ``K`` equal keys,
at most ``w`` keys in flight (0: all pushed at once)::

    T(B, K, w, path) = overhead_s + K * per_key_s + R(K, w) * rtt(path) + F(path) + X

- ``overhead_s``: the batch's fixed cost (the worker's call into MXNet, the final
  ``waitall``, the server's summation loop);
- ``per_key_s``: each key's ps-lite messages (push, ack, pull request, response), their
  (de)serialisation and ZeroMQ hand-over in the worker and server processes;
- ``R(K, w) = 2 * ceil(K / w)`` (``w = 0``: 2) message rounds on the critical path: a
  key's pull request leaves only once its push is acknowledged, and with a window the
  key ``k + w`` waits for key ``k``'s pull;
- ``rtt(path) = 2 * sum_h (hop_s + CTRL / rate_h)``: each hop's forwarding (``hop_s``:
  the userspace OVS datapath and veth, a constant per hop) and serialisation of a
  control message (``CTRL`` = 120 bytes), both ways;
- ``F(path) = 2 * (sum_h MTU / rate_h - MTU / min(path))``: store and forward, the data's
  pipeline fill at the hops other than the bottleneck, each direction;
- ``X = (key_times(K, w) / K * B - 2 * min(burst_bytes, B)) / (efficiency * min(path))``:
  the bytes at the bottleneck in the order ps-lite sends them (:func:`key_times`:
  pushes and pulls share a connection each way; with every key pushed at once one
  direction is busy at a time, 2 key-times a key), less one HTB burst each way that an
  idle shaper lets through at once (``efficiency``: the payload's share of the shaped
  rate). In-host: ``key_times(K, w) / K * B / local_Bps``.
- TCP after an idle gap (:func:`idle_restart_s`): with ``slow_start_after_idle`` a
  connection idle for longer than its RTO (at least ``rto_min_s``) restarts from the
  initial window (10 packets): a key larger than that needs ``ceil(log2(key / (10 MTU)
  + 1))`` extra round trips, but only while the path's bandwidth-delay product exceeds
  the initial window (on the emulated fabric only when a queue inflates the RTT).

The constants ``overhead_s``, ``per_key_s``, ``hop_s``, ``1/efficiency`` and
``1/local_Bps`` enter linearly: the calibration fits them by least squares from jobs run
alone over an in-host, an in-rack and a cross-rack path (``burst_bytes`` is the fabric's
HTB burst, set, not fitted).

**Sharing** (:func:`share_egress`; the wait terms are in :mod:`sluice_common.exchange_waits`): jobs whose paths cross one shaped egress pair
(capacity ``C`` each direction, FIFO buffer ``Q`` bytes per class), each with compute
``c_j`` per batch and a priority class (``None`` for all: one FIFO class, priority off).
A fixed point over the jobs' iteration times ``I_j``:

- ``rho_i = B_i / (efficiency * r_i * I_i)``: the share of its iteration job ``i``
  occupies one direction (a batch moves ``B`` each way: push one way, pull the other);
- the capacity left to class ``k``: ``C_k = C * (1 - priority_cost * sum_{i in classes
  before k} u_i)``, ``u_i = B_i / (efficiency * C * I_i)`` the link share job ``i`` uses,
  at least ``min_share``; ``priority_cost`` (1 with one class) is what each share a more
  urgent class uses costs the classes below: their TCP flows, stopped by its bursts, do
  not take the gaps between them at once (fitted on the calibration's priority stage);
- job ``j``'s rate while it moves bytes: ``r_j = min(path_j, C_k / (1 + sum_{i != j in
  k} rho_i))`` (processor sharing with the same-class jobs busy at the same time);
- ``busy_j = 1 - prod_{i != j in classes <= k} (1 - rho_i)``: someone ahead of it is
  sending. Each of its ``R`` message rounds waits the standing queue of its class's FIFO,
  ``wait_j = busy * fill(m_j) * Q' / C_k`` (``busy``, ``m_j``: over the others of its
  class), after the more urgent classes' queue, ``busy * fill(m) * Q' / C`` over theirs
  (the link drains it at its full rate); ``Q' = max(Q, backlog_bytes)``: a FIFO shorter
  than the senders' backlog drops the rest, which waits at the senders to be resent, still
  ahead of the round (fitted on a mid-depth FIFO); ``m`` is how many send at once and
  ``fill(m) = min(1, queue_fill +
  queue_fill_per_sender * max(0, m - 1))`` the share of the FIFO they keep full (one
  TCP sender, BBR here, keeps little queue; every further one adds its own), and it gets
  the shaper's burst only when the link is idle (``1 - busy_j``);
- a shallow FIFO drops (:func:`loss_wait_s`): each round that meets the egress busy
  loses the share ``overflow = max(0, 1 - Q / ((1 + m_j) * burst_bytes))`` of what
  arrives at once (every sender one burst) and pays ``loss_timeouts`` retransmission
  timeouts of ``rto_min_s`` for it, ``loss_j = busy_j * overflow * loss_timeouts *
  rto_min_s`` (0 on the deep FIFO), a batch's rounds times ``tail``, the chance that a
  drop in one of its keys needs a timeout, not a fast retransmit (:func:`tail_share`);
  ``queue_j = wait_j + loss_j`` (:func:`fifo_round_wait_s`);
- ``I_j = c_j + T_j`` with ``X`` at ``r_j`` + ``R_j * queue_j``. Priority off is the same
  with every job in one class.

**Fair-queued leaves** (``urgent_bytes`` given): each class's leaf is per-flow DRR, so
within its own class a message waits behind its own flow's bytes in its bucket
(``buffer_bytes``: about a burst) and one DRR round of every other flow of its class
that has bytes queued, ``sum(rho_i) * fair_round_bytes / C_k`` (:func:`fair_round_wait_s`,
the per-flow fair-share term), not the others' whole queue; but behind the more urgent classes it waits what they keep
queued, ``busy_urgent * fill * urgent_bytes / C`` (the link drains them at its full
rate), plus the own-class term. That queue
is set by the urgent senders, not by how their leaf orders them: the egress backlog
measured in the heavy-tail experiment is the same with the rule on 100-packet fair
leaves as on the 200-packet FIFO leaves (28-52 and 29-47 ms, six runs), so the caller
passes the FIFO leaf's depth.

**Start-up** (:func:`startup_time`): a job's launch until its first batch (process
hand-over, ps-lite's rendezvous and start barrier, ``kv.init``'s push and first pull of
every key) plus its closing barrier. Alone it takes ``startup_s`` and one batch more
(``kv.init``'s exchange, which shares the egress as a batch does, but with every key
pushed at once and then pulled, window 0, and no compute: the emulated worker's
``kv.init`` and first ``kv.pull``); its rendezvous
messages wait behind the standing queue as a batch's rounds do::

    S = startup_s + startup_rounds * wait_j (+ startup_priority_s with priority on)

``wait_j`` is the job's queue wait per round (:func:`egress_state`) when it arrives, in
its class, so priority shortens an urgent job's start-up as it shortens its batches.
With priority on, a job is registered with the controller, its rules in place, before it
starts: ``startup_priority_s`` more. ``startup_s`` and ``startup_priority_s`` are measured
on jobs alone, ``startup_rounds`` on small jobs arriving while six bulk jobs fill the FIFO
(the calibration); ``loss_timeouts``, ``backlog_bytes`` and ``fair_round_bytes`` on the
same small jobs among the same bulk jobs on the short FIFO, a mid-depth one, the fair queue.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from sluice_common.exchange_waits import (backlog_bytes, busy_share, fair_round_wait_s,
                                          fifo_round_wait_s, queue_wait_s)

MTU_BYTES = 1514                # a full Ethernet frame on the emulated fabric
CTRL_BYTES = 120                # one ps-lite control message (ack, pull request) on the wire
INIT_CWND_PACKETS = 10          # Linux's initial congestion window
DATA_FILE = Path(__file__).parent / "data" / "exchange_constants.yaml"
FITTED = ("overhead_s", "per_key_s", "hop_s", "efficiency", "local_Bps")


@dataclass(frozen=True)
class ExchangeConstants:
    """The model's constants (see the module doc); ``provenance``: how they were measured."""
    overhead_s: float = 0.004
    per_key_s: float = 0.001
    hop_s: float = 0.0002
    efficiency: float = 0.8
    local_Bps: float = 200e6
    queue_fill: float = 0.5
    queue_fill_per_sender: float = 0.0
    rto_min_s: float = 0.2
    slow_start_after_idle: bool = True
    min_share: float = 0.02
    burst_bytes: float = 15360.0
    startup_s: float = 0.5
    startup_rounds: float = 0.0
    startup_priority_s: float = 0.0
    loss_timeouts: float = 0.0
    fair_round_bytes: float = 0.0
    priority_cost: float = 1.0
    backlog_bytes: float = 0.0
    provenance: Mapping[str, object] = field(default_factory=dict, compare=False)

    def __post_init__(self):
        for name in ("overhead_s", "per_key_s", "hop_s", "rto_min_s", "startup_s",
                     "startup_rounds", "startup_priority_s", "queue_fill_per_sender",
                     "loss_timeouts", "fair_round_bytes", "backlog_bytes"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0 < self.efficiency <= 1:
            raise ValueError(f"efficiency must be in (0, 1], got {self.efficiency}")
        if not self.local_Bps > 0:
            raise ValueError(f"local_Bps must be > 0, got {self.local_Bps}")
        if not 0 <= self.queue_fill <= 1 or not 0 < self.min_share <= 1:
            raise ValueError("need 0 <= queue_fill <= 1 and 0 < min_share <= 1")
        if not self.priority_cost > 0:
            raise ValueError(f"priority_cost must be > 0, got {self.priority_cost}")


def load_constants(path: str | Path | None = None) -> ExchangeConstants:
    """The calibrated constants (default: the shipped data file)."""
    import yaml

    data = yaml.safe_load(Path(path or DATA_FILE).read_text(encoding="utf-8")) or {}
    known = {f for f in ExchangeConstants.__dataclass_fields__}
    extra = set(data) - known
    if extra:
        raise ValueError(f"{path or DATA_FILE}: unknown constants {sorted(extra)}")
    return ExchangeConstants(**data)


def save_constants(constants: ExchangeConstants, path: str | Path | None = None,
                   comment: str = "") -> Path:
    import yaml

    path = Path(path or DATA_FILE)
    data = asdict(constants)
    data["provenance"] = dict(constants.provenance)
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    path.write_text(head + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@lru_cache(maxsize=1)
def default_constants() -> ExchangeConstants:
    return load_constants()


# ---- one batch alone -------------------------------------------------------------------

@lru_cache(maxsize=None)
def key_times(keys: int, window: int = 0) -> float:
    """Key-transfer times one batch of ``keys`` equal keys takes, push and pull, with at
    most ``window`` keys in flight (0: all at once); control messages free (they are the
    ``R * rtt`` and ``per_key_s`` terms). An event model: ps-lite carries a worker's pushes
    and pull requests on one connection (worker -> server) and the acks and pull
    responses on the other, each in order; a key's pull request leaves once its push is
    acknowledged, so with every key pushed at once the pulls start when the pushes end."""
    if keys < 1 or window < 0:
        raise ValueError(f"keys must be >= 1 and window >= 0, got {keys}, {window}")
    events: list = []
    order = itertools.count()
    free_at = {"fwd": 0.0, "rev": 0.0}
    arrived: set[int] = set()
    issued = 0
    end = 0.0

    def send(link: str, now: float, size: float, kind: str, key: int) -> None:
        start = max(now, free_at[link])
        free_at[link] = start + size
        heapq.heappush(events, (free_at[link], next(order), link, kind, key))

    def issue(now: float) -> None:
        nonlocal issued
        while issued < keys and (window == 0 or issued < window or issued - window in arrived):
            send("fwd", now, 1.0, "push", issued)
            issued += 1

    issue(0.0)
    while events:
        now, _, link, kind, key = heapq.heappop(events)
        if kind == "push":                       # at the server: acknowledge it
            send("rev", now, 0.0, "ack", key)
        elif kind == "ack":                      # at the worker: the pull may go out
            send("fwd", now, 0.0, "request", key)
        elif kind == "request":                  # at the server: send the sum back
            send("rev", now, 1.0, "response", key)
        else:                                    # the key's sum has arrived
            arrived.add(key)
            end = now
            issue(now)
    return end


def rounds(keys: int, window: int = 0) -> int:
    """Message rounds on a batch's critical path: ``2 * ceil(keys / window)`` (0: 2)."""
    if keys < 1 or window < 0:
        raise ValueError(f"keys must be >= 1 and window >= 0, got {keys}, {window}")
    return 2 if window == 0 or window >= keys else 2 * math.ceil(keys / window)


def path_rtt_s(path: Sequence[float], c: ExchangeConstants) -> float:
    """One control message's round trip over ``path``:
    ``2 * sum_h (hop_s + CTRL / rate_h)``."""
    return 2.0 * sum(c.hop_s + CTRL_BYTES / rate for rate in path)


def wire_key_bytes(bytes_per_batch: float, keys: int, window: int = 0) -> float:
    """The batch's bytes in key-time order: ``key_times(K, w) / K * B`` (what the
    bottleneck must carry back to back, push and pull as ps-lite orders them)."""
    return key_times(keys, window) / keys * bytes_per_batch


def burst_credit(bytes_per_batch: float, path: Sequence[float], c: ExchangeConstants) -> float:
    """Bytes that pass at once through an idle shaped path: one bucket, each direction."""
    return 2.0 * min(c.burst_bytes, bytes_per_batch) if path else 0.0


def transfer_s(bytes_per_batch: float, keys: int, path: Sequence[float], window: int,
               c: ExchangeConstants, rate: float | None = None, credit: float = 1.0) -> float:
    """The ``X`` term: the batch's bytes at ``rate`` (default: the path's bottleneck),
    less ``credit`` times the idle path's burst."""
    wire = wire_key_bytes(bytes_per_batch, keys, window)
    if not path:
        return wire / c.local_Bps
    r = min(path) if rate is None else min(rate, min(path))
    return max(0.0, wire - credit * burst_credit(bytes_per_batch, path, c)) / (c.efficiency * r)


def server_wait_s(workers: int, per_worker_s: float, wire_s: float) -> float:
    """What a batch waits on its parameter server beyond the exchange: the server takes
    its ``workers``' pushes in turn, ``per_worker_s`` each (the PS runtime's, measured on
    the demo's runs: ``ps_runtime.calibration``), while their bytes arrive over ``wire_s``
    (one worker-server pair's :func:`transfer_s` alone; 0 on one host), so only the work
    past the wire adds to the batch."""
    return max(0.0, workers * per_worker_s - wire_s)


def features(bytes_per_batch: float, keys: int, path: Sequence[float], window: int = 0,
             burst_bytes: float = 0.0) -> tuple[float, float, float, float, float]:
    """The linear terms of :func:`batch_exchange_s` (what the calibration fits): its time
    is ``dot(features, (overhead_s, per_key_s, hop_s, 1/efficiency, 1/local_Bps)) +
    fixed(...)``."""
    r = rounds(keys, window)
    wire = wire_key_bytes(bytes_per_batch, keys, window)
    shaped = max(0.0, wire - 2.0 * min(burst_bytes, bytes_per_batch))
    return (1.0, float(keys), 2.0 * r * len(path),
            shaped / min(path) if path else 0.0, 0.0 if path else wire)


def fixed_s(keys: int, path: Sequence[float], window: int = 0) -> float:
    """The part of a batch's time with no constant in it: each round's control messages
    serialised at every hop, ``R * 2 * sum_h CTRL / rate_h``, and the store-and-forward
    fill of the data in each direction, ``2 * (sum_h MTU / rate_h - MTU / min(path))``."""
    if not path:
        return 0.0
    ctrl = rounds(keys, window) * 2.0 * sum(CTRL_BYTES / rate for rate in path)
    return ctrl + 2.0 * (sum(MTU_BYTES / rate for rate in path) - MTU_BYTES / min(path))


def batch_exchange_s(bytes_per_batch: float, keys: int, path: Sequence[float],
                     window: int = 0, c: ExchangeConstants | None = None) -> float:
    """One batch's push + pull alone over ``path`` (see the module doc for the formula)."""
    c = c or default_constants()
    if bytes_per_batch < 0:
        raise ValueError(f"bytes per batch must be >= 0, got {bytes_per_batch}")
    if any(not rate > 0 for rate in path):
        raise ValueError(f"link rates must be > 0, got {list(path)}")
    return fixed_batch_s(keys, path, window, c) + transfer_s(bytes_per_batch, keys, path, window, c)


def fixed_batch_s(keys: int, path: Sequence[float], window: int = 0,
                  c: ExchangeConstants | None = None) -> float:
    """The part of a batch's time alone that does not grow with its bytes: ``overhead_s +
    K * per_key_s + R * rtt(path) + F(path)`` (the scheduler's per-batch exchange term)."""
    c = c or default_constants()
    fill = 2.0 * (sum(MTU_BYTES / rate for rate in path) - MTU_BYTES / min(path)) if path else 0.0
    return c.overhead_s + keys * c.per_key_s + rounds(keys, window) * path_rtt_s(path, c) + fill


def idle_restart_s(bytes_per_batch: float, keys: int, path: Sequence[float], gap_s: float,
                   rtt_s: float, c: ExchangeConstants | None = None) -> float:
    """Extra time a batch pays when its connections restart from the initial window after
    ``gap_s`` idle (``slow_start_after_idle``, idle > RTO = max(rto_min_s, rtt)): extra
    round trips ``ceil(log2(key / (10 MTU) + 1))`` while the window is below the path's
    bandwidth-delay product; 0 when the gap is short or the initial window fills the pipe."""
    c = c or default_constants()
    if not path or not c.slow_start_after_idle or gap_s <= max(c.rto_min_s, rtt_s):
        return 0.0
    init = INIT_CWND_PACKETS * MTU_BYTES
    bdp = min(path) * rtt_s
    if bdp <= init:
        return 0.0
    key = bytes_per_batch / keys
    needed = math.ceil(math.log2(min(key, bdp) / init + 1))
    return 2 * needed * rtt_s        # push and pull connections each restart


# ---- jobs sharing a shaped egress ------------------------------------------------------

@dataclass(frozen=True)
class Sharer:
    """One job at a shared egress: its batch, its path, its compute gap and class
    (smaller = more urgent; ``None`` when priority is off)."""
    name: str
    bytes_per_batch: float
    keys: int
    path: tuple[float, ...]
    compute_s: float = 0.0
    window: int = 0
    cls: int | None = None

    def alone_s(self, c: ExchangeConstants) -> float:
        """Iteration alone: compute + exchange (+ the idle restart, if the gap allows)."""
        rtt = path_rtt_s(self.path, c)
        return (self.compute_s + batch_exchange_s(self.bytes_per_batch, self.keys, self.path,
                                                  self.window, c)
                + idle_restart_s(self.bytes_per_batch, self.keys, self.path, self.compute_s, rtt, c))


def _one_way_s(j: Sharer, c: ExchangeConstants, rate: float) -> float:
    """Time the job's bytes occupy one direction of the egress per batch."""
    if not j.path:
        return 0.0
    return j.bytes_per_batch / (c.efficiency * min(rate, min(j.path)))


def share_egress(jobs: Iterable[Sharer], capacity: float, buffer_bytes: float,
                 c: ExchangeConstants | None = None, iterations: int = 200,
                 urgent_bytes: float | None = None) -> dict[str, float]:
    """Each job's iteration (compute + exchange + queueing) while all of ``jobs`` share one
    shaped egress of ``capacity`` bytes/s with ``buffer_bytes`` of FIFO per class (module
    doc: the fixed point). Jobs whose ``cls`` is None share one class. ``urgent_bytes``:
    the leaves are fair-queued, ``buffer_bytes`` is then a message's wait in its own
    class and ``urgent_bytes`` the queue the more urgent classes keep (module doc)."""
    return egress_state(jobs, capacity, buffer_bytes, c, iterations, urgent_bytes)[0]


def egress_state(jobs: Iterable[Sharer], capacity: float, buffer_bytes: float,
                 c: ExchangeConstants | None = None, iterations: int = 200,
                 urgent_bytes: float | None = None
                 ) -> tuple[dict[str, float], dict[str, float]]:
    """:func:`share_egress`'s fixed point: (each job's iteration, each job's ``wait_j``,
    what one of its control message rounds waits in the queue of its class, drops
    included: what a start-up's rounds wait)."""
    c = c or default_constants()
    jobs = list(jobs)
    if not capacity > 0 or buffer_bytes < 0 or (urgent_bytes is not None and urgent_bytes < 0):
        raise ValueError("capacity must be > 0, buffer_bytes and urgent_bytes >= 0")
    if len({j.name for j in jobs}) != len(jobs):
        raise ValueError("job names must be unique")
    if not jobs:
        return {}, {}
    classes = sorted({j.cls for j in jobs}, key=lambda k: (k is None, k))
    rank = {k: i for i, k in enumerate(classes)}
    alone = {j.name: j.alone_s(c) for j in jobs}
    it = dict(alone)
    rate = {j.name: min(j.path) if j.path else math.inf for j in jobs}
    wait_of = {j.name: 0.0 for j in jobs}
    for _ in range(iterations):
        # per direction: a job moves B (not the key-time-ordered bytes) each way per batch
        rho = {j.name: min(1.0, _one_way_s(j, c, rate[j.name]) / it[j.name]) for j in jobs}
        use = {j.name: j.bytes_per_batch / (c.efficiency * capacity * it[j.name]) for j in jobs}
        new = {}
        for j in jobs:
            k = rank[j.cls]
            before = c.priority_cost * sum(use[i.name] for i in jobs if rank[i.cls] < k)
            left = capacity * max(c.min_share, 1.0 - before)
            same_class = [rho[i.name] for i in jobs if i is not j and rank[i.cls] == k]
            r = min(min(j.path) if j.path else math.inf, left / (1.0 + sum(same_class)))
            # the urgent classes' standing queue goes first, at the link's full rate
            upper = [rho[i.name] for i in jobs if rank[i.cls] < k]
            busy = busy_share(upper + same_class)       # someone ahead of j is sending
            key = j.bytes_per_batch / j.keys
            if urgent_bytes is None:        # FIFO leaves: one FIFO per class
                # a batch's rounds carry its keys; wait_of (start-up) control messages
                above = queue_wait_s(upper, capacity, backlog_bytes(buffer_bytes, c), c)
                wait = above + fifo_round_wait_s(same_class, left, buffer_bytes, c, key)
                control_wait = above + fifo_round_wait_s(same_class, left, buffer_bytes, c)
            else:                           # fair leaves: a DRR round in its own class
                wait = (queue_wait_s(same_class, left, buffer_bytes, c)
                        + fair_round_wait_s(same_class, left, c)
                        + queue_wait_s(upper, capacity, urgent_bytes, c))
                control_wait = wait
            x = transfer_s(j.bytes_per_batch, j.keys, j.path, j.window, c)
            t = (alone[j.name] - x + rounds(j.keys, j.window) * wait
                 + transfer_s(j.bytes_per_batch, j.keys, j.path, j.window, c, r, 1.0 - busy))
            new[j.name] = t
            rate[j.name] = r
            wait_of[j.name] = control_wait
        delta = max(abs(new[n] - it[n]) / it[n] for n in it)
        it = {n: 0.5 * it[n] + 0.5 * new[n] for n in it}      # damped: the map may oscillate
        if delta < 1e-6:
            break
    return it, wait_of


def startup_time(wait_s: float, c: ExchangeConstants | None = None,
                 priority: bool = False) -> float:
    """A job's start-up and closing beyond its ``kv.init`` batch (module doc):
    ``startup_s + startup_rounds * wait_s`` (+ ``startup_priority_s`` with priority on)."""
    c = c or default_constants()
    if wait_s < 0:
        raise ValueError(f"wait must be >= 0 seconds, got {wait_s}")
    return c.startup_s + c.startup_rounds * wait_s + (c.startup_priority_s if priority else 0.0)


def with_fit(c: ExchangeConstants, values: Mapping[str, float],
             provenance: Mapping[str, object]) -> ExchangeConstants:
    """``c`` with the fitted constants (``FITTED`` names) and provenance replaced."""
    return replace(c, **{k: float(v) for k, v in values.items() if k in FITTED},
                   provenance=dict(provenance))


# ---- jobs over several shaped links ----------------------------------------------------

@dataclass(frozen=True)
class LinkJob:
    """A job whose workers and servers sit on several hosts: ``path`` is the path of its
    slowest worker-server pair with each rate divided by the job's own flows on that link
    (its workers share it); ``links``: shaped link -> (rate, the job's flows on it)."""
    name: str
    bytes_per_batch: float
    keys: int
    path: tuple[float, ...]
    links: Mapping[str, tuple[float, int]]
    compute_s: float = 0.0
    window: int = 0
    cls: int | None = None

    def sharer(self, flows: int = 1) -> Sharer:
        """The job at one link carrying ``flows`` of its flows: ``flows`` times the bytes
        over a path ``flows`` times as fast (the same time alone)."""
        return Sharer(self.name, self.bytes_per_batch * flows, self.keys,
                      tuple(r * flows for r in self.path), self.compute_s, self.window, self.cls)


def share_links(jobs: Iterable[LinkJob], buffer_bytes: float,
                c: ExchangeConstants | None = None) -> dict[str, float]:
    """Each job's iteration when ``jobs`` run at once: on every link two or more of them
    cross, :func:`share_egress` among those (each with its flows' bytes); a job's
    iteration is its batch alone plus the most that sharing one of its links adds."""
    c = c or default_constants()
    jobs = list(jobs)
    out = {j.name: j.sharer().alone_s(c) for j in jobs}
    users: dict[str, list[LinkJob]] = {}
    for j in jobs:
        for link in j.links:
            users.setdefault(link, []).append(j)
    for link, js in users.items():
        if len(js) < 2:
            continue
        rate = js[0].links[link][0]
        sharers = [j.sharer(j.links[link][1]) for j in js]
        got = share_egress(sharers, rate, buffer_bytes, c)
        for sh in sharers:          # what sharing this link adds to the job's batch
            alone = sh.alone_s(c)
            out[sh.name] = max(out[sh.name], out[sh.name] + got[sh.name] - alone)
    return out
