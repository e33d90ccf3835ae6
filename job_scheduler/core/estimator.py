"""Job-time estimates: the Proteus paper's eq. 1, 4 and 5, refined with placement bandwidth.

Units: seconds, Mbit/s (1 Mbit = 10^6 bit), parameters as counts.

- ``cost_bat(job, b) = alpha(b) * Cost_bat(1)`` (eq. 1), from the device profile.
- ``cost(job, n) = Cost_bat(b) * e * m / (b * n)`` (eq. 4): the job's compute time on n GPUs.
- ``comm(job, n, bw) = (m / (n * b)) * e * bits / bw`` (eq. 5) with
  ``bits = params * 4 bytes * 8 * 2``: the factor 2 counts BOTH the push (gradients,
  worker -> server) and the pull (parameters, server -> worker) of every iteration. They
  are sequential in synchronous PS training (the pull waits for the aggregate), so a
  full-duplex link does not overlap them. This is a deliberate refinement of the paper's
  eq. 5 (which counts params once); docs/design.md's measurement (2 workers, 1 server, 8 MB
  key, 100 Mbit/s: 3.2 s per push+pull; 2x predicts 2.56 s, 1x 1.28 s) supports it.
  ``comm(job, 1, .) = 0`` (a single GPU holds the model itself), and an infinite
  bandwidth (everything on one host) costs no time either.
- With an ``exchange`` pricing (:mod:`job_scheduler.core.exchange_pricing`, the exchange
  model, the same model and the same committed constants as the demo's
  predictions, ``end_to_end/predict.py``) every job also pays, per batch, the exchange's
  fixed time (the batch's overhead, ps-lite's per-key messages and the round trips) over
  its placement's path (``path``: :func:`exchange_path`; None: a cross-rack path; one GPU:
  its PS on its own host, as ps-lite runs it), counted with the compute so that Comm
  stays proportional to 1/bw; its bytes move at the model's calibrated ``efficiency``,
  and a PS and worker on one host exchange over the bus the model gives that host
  (``bus_mbps``: the emulated fabric's loopback, or the host's ``intra_bw`` on a
  described cluster). The queueing at shared uplinks is the simulator's to add.
- ``server_per_worker_s`` (the run's estimator: the PS runtime's, measured on the demo's
  runs, ``ps_runtime.calibration``): the server takes its workers' pushes in turn, so a
  batch of n workers waits ``n * server_per_worker_s`` at the server less what their
  bytes' time on the wire hides (:meth:`Estimator.server_s`); the job pays it once per
  worker-batch whatever its GPU count, so it bounds how far a job on one PS scales.
- ``C(job, n, bw) = cost + comm``; ``cost1(job) = cost(job, 1)`` is Cost_i(1), the work
  that the Lyapunov queues count.

Jobs with their own batch (``extra`` keys ``OWN_BYTES``, ``OWN_COMPUTE``, ``OWN_KEYS``,
``OWN_WINDOW``: synthetic jobs such as the Mininet heavy-tail mix's, whose workers move
and compute what they are told, not what a model needs): ``bytes_per_batch`` is what one
batch pushes (and pulls) on the fabric the job runs on (described bytes: divided by the
exchange pricing's ``scale``), ``compute_s`` the seconds one batch computes, ``keys`` and
``window`` how ps-lite cuts and sends it; each replaces the model's figure where given.
Such a job trains through its parameter server on one GPU too
(:meth:`Estimator.exchanges_alone`): a lone worker whose PS is on another host pays its
exchange over the path between them (the bandwidth and path its placement gives, as a
job of n workers does), where a model's one-GPU job holds the model itself and pays none.

Trace-driven jobs (``trace_gpus`` and ``trace_duration`` set): the trace fixes how long
the job took on its recorded GPU count but not how much data it processed. Cost and
Comm are both proportional to the amount of work e*m, so the estimator solves for the
work: ``scale = trace_duration / C_model(trace_gpus, nominal_bw)`` and multiplies every
Cost/Comm of that job by it. Then ``C(trace_gpus, nominal_bw) == trace_duration``
exactly, and C(n) for any other n (or another bandwidth) follows the same model: the
model's compute/communication split decides how well the job scales.
``nominal_bw_mbps`` is the bandwidth a job sees alone on the fabric: by default 10,000
(10 Gbit/s host links); ``nominal_bandwidth(topology)`` gives it for a topology.

Models missing from the profile (custom ``layers:`` jobs, a model the profile lacks):
the profiled model with the nearest parameter count (in log scale) stands in, its
Cost_bat(1) scaled by the parameter ratio; alpha(b) is taken unchanged. Crude: compute
follows FLOPs, not parameters. Profile the model for a real figure.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from sluice_common.exchange import key_times, server_wait_s
from sluice_common.jobspec import JobSpec
from sluice_common.models import BYTES_PER_PARAM, params_of
from sluice_common.profile import DeviceProfile, Profile, load_profile

if TYPE_CHECKING:
    from job_scheduler.core.exchange_pricing import ExchangePricing

COMM_DIRECTIONS = 2            # push + pull per iteration, see the module docstring
# a job's own batch, in its ``extra`` (module doc)
OWN_BYTES, OWN_COMPUTE, OWN_KEYS, OWN_WINDOW = "bytes_per_batch", "compute_s", "keys", "window"
DEFAULT_NOMINAL_BW_MBPS = 10_000.0


class Estimator:
    def __init__(self, profile: Profile | str | Path | None = None, device: str | None = None,
                 nominal_bw_mbps: float = DEFAULT_NOMINAL_BW_MBPS, startup_s: float = 0.0,
                 sync_s: float = 0.0, link_efficiency: float = 1.0,
                 exchange: "ExchangePricing | None" = None, server_per_worker_s: float = 0.0):
        if not isinstance(profile, Profile):
            profile = load_profile(profile)
        if not nominal_bw_mbps > 0:
            raise ValueError(f"nominal_bw_mbps must be > 0, got {nominal_bw_mbps}")
        self.profile = profile
        self.device_profile: DeviceProfile = profile.device(device)
        self.nominal_bw_mbps = float(nominal_bw_mbps)
        if not 0 < link_efficiency <= 1 or sync_s < 0 or startup_s < 0 or \
                server_per_worker_s < 0:
            raise ValueError("need 0 < link_efficiency <= 1, sync_s >= 0, startup_s >= 0, "
                             "server_per_worker_s >= 0")
        self.startup_s = float(startup_s)   # launch -> first batch, not part of C(n)
        # Terms of a real PS runtime that the paper's model leaves out (0 and 1 there):
        # sync_s, the fixed time of one push + pull round through the PS (messages, the
        # server's own work, the wait for the slowest worker), paid every iteration by
        # every job that runs through a PS, one GPU included; link_efficiency, the share
        # of a link's rate that the push/pull payload gets (TCP/IP headers, ACKs, shaping).
        self.sync_s = float(sync_s)
        # server_per_worker_s: the PS takes each worker's push and answers its pull in
        # turn, so a batch of n workers waits n times it; in total the job pays it once
        # per worker-batch, however many GPUs it has (ps_runtime.calibration)
        self.server_per_worker_s = float(server_per_worker_s)
        self.link_efficiency = float(link_efficiency)
        # the exchange model's pricing (module doc), or None: eq. 5 alone
        self.exchange = exchange
        if exchange is not None:
            if exchange.window != 0:        # eq. 5's 2 directions are window 0's key-times
                raise ValueError("the estimator prices window 0 (every key pushed at once)")
            self.link_efficiency = exchange.constants.efficiency
        self._scale: dict[JobSpec, float] = {}

    @property
    def device(self) -> str:
        return self.device_profile.device

    # ---- model facts ---------------------------------------------------------------
    def exchanges_alone(self, job: JobSpec) -> bool:
        """Does the job train through its PS on one GPU too (it states its own bytes per
        batch, module doc)? A model's job on one GPU holds the model itself."""
        return OWN_BYTES in job.extra

    def rule_bytes(self, job: JobSpec) -> int:
        """Bytes per batch the fabric's ranking rules count: the job's own, as its workers
        report them on the fabric it runs on, else the model's parameters."""
        own = job.extra.get(OWN_BYTES)
        return int(own) if own is not None else int(self.params(job) * BYTES_PER_PARAM)

    def one_way_share(self, job: JobSpec) -> float:
        """The share of a batch's exchange time one direction is busy: its keys over its
        key-times (``sluice_common.exchange.key_times``): 1/2 when every key is pushed at
        once (one direction busy at a time), more when a window lets pulls overlap later
        pushes; 1/2 without an exchange pricing (eq. 5's push, then pull)."""
        if self.exchange is None:
            return 1.0 / COMM_DIRECTIONS
        own_keys, own_window = self._keys_window(job)
        keys = self.exchange.keys(self.batch_bytes(job), own_keys)
        window = self.exchange.window if own_window is None else own_window
        return keys / key_times(keys, window)

    def _keys_window(self, job: JobSpec) -> tuple[int | None, int | None]:
        return job.extra.get(OWN_KEYS), job.extra.get(OWN_WINDOW)

    def params(self, job: JobSpec) -> int:
        try:
            return params_of(job.model, job.layers)
        except ValueError as err:
            raise ValueError(f"job '{job.name}': {err}") from None

    # ---- eq. 1, 4, 5 -----------------------------------------------------------------
    def cost_bat(self, job: JobSpec, b: float | None = None) -> float:
        """Eq. 1: seconds per batch of b samples (default: the job's batch size) on one GPU."""
        if OWN_COMPUTE in job.extra:
            return float(job.extra[OWN_COMPUTE])
        b = job.batch_size if b is None else b
        own = None if job.layers is not None else job.model
        dp = self.device_profile
        return dp.cost_bat(own, b, None if own in dp.models else self.params(job))

    def _iterations_per_worker(self, job: JobSpec, n: int) -> float:
        return job.epochs * job.dataset_size / (job.batch_size * n)

    def iterations(self, job: JobSpec, n: int) -> float:
        """Batches each of n workers trains (the work scale of a trace job included)."""
        _check_n(n)
        return self._iterations_per_worker(job, n) * self.work_scale(job)

    def batch_bytes(self, job: JobSpec) -> float:
        """Bytes one batch pushes (and pulls): the model's float32 parameters, or the job's
        own (module doc), at described scale."""
        own = job.extra.get(OWN_BYTES)
        if own is not None:
            return float(own) / (self.exchange.scale if self.exchange is not None else 1.0)
        return float(self.params(job) * BYTES_PER_PARAM)

    def fixed_s(self, job: JobSpec, n: int, path: tuple[float, ...] | None = None) -> float:
        """The exchange's fixed seconds per batch on ``path`` (module doc; 0 without an
        exchange pricing). One GPU exchanges with its PS on its own host (path ``()``)."""
        if self.exchange is None:
            return 0.0
        alone = n <= 1 and not self.exchanges_alone(job)
        return self.exchange.fixed_s(self.batch_bytes(job), () if alone else path,
                                     *self._keys_window(job))

    def _raw_cost(self, job: JobSpec, n: int, path: tuple[float, ...] | None = None) -> float:
        # sync_s and the exchange's fixed time are paid per iteration whatever the
        # bandwidth: they sit with the compute, so that Comm stays exactly proportional to
        # 1/bw (the simulator relies on that).
        fixed = self.fixed_s(job, n, path) + self.server_s(job, n, path)
        return (self.cost_bat(job) + self.sync_s + fixed) * self._iterations_per_worker(job, n)

    def server_s(self, job: JobSpec, n: int, path: tuple[float, ...] | None = None) -> float:
        """The server's time per batch that its workers' bytes on the wire do not hide
        (:func:`sluice_common.exchange.server_wait_s`) over ``path`` (``()``: one host;
        None: a cross-rack path)."""
        if not self.server_per_worker_s:
            return 0.0
        wire = 0.0
        if self.exchange is not None and path != () and (n > 1 or self.exchanges_alone(job)):
            wire = self.exchange.transfer_s(self.batch_bytes(job), path, max(1, job.num_ps),
                                            *self._keys_window(job))
        return server_wait_s(n, self.server_per_worker_s, wire)

    def _raw_comm(self, job: JobSpec, n: int, bw_mbps: float) -> float:
        if (n <= 1 and not self.exchanges_alone(job)) or math.isinf(bw_mbps):
            return 0.0
        bits = self.wire_bytes(job) * 8
        return self._iterations_per_worker(job, n) * bits / (bw_mbps * 1e6 * self.link_efficiency)

    def wire_bytes(self, job: JobSpec) -> float:
        """Bytes one batch moves through its bottleneck: push + pull of the parameters
        (``COMM_DIRECTIONS``), or the exchange model's (``ExchangePricing.wire_bytes``)."""
        if self.exchange is not None:
            return self.exchange.wire_bytes(self.batch_bytes(job), max(1, job.num_ps),
                                            *self._keys_window(job))
        return self.batch_bytes(job) * COMM_DIRECTIONS

    def work_scale(self, job: JobSpec) -> float:
        """1 for described jobs; trace_duration / C_model(trace_gpus) for trace jobs."""
        if job.trace_gpus is None or job.trace_duration is None:
            return 1.0
        if job not in self._scale:
            g = job.trace_gpus
            model_c = self._raw_cost(job, g) + self._raw_comm(job, g, self.nominal_bw_mbps)
            self._scale[job] = job.trace_duration / model_c
        return self._scale[job]

    def cost(self, job: JobSpec, n: int, path: tuple[float, ...] | None = None) -> float:
        """Eq. 4: compute seconds of the whole job on n GPUs (with the exchange's fixed
        time per batch over ``path``, under an exchange pricing)."""
        _check_n(n)
        return self._raw_cost(job, n, path) * self.work_scale(job)

    def comm(self, job: JobSpec, n: int, bw_mbps: float) -> float:
        """Eq. 5 (push + pull): communication seconds of the whole job on n GPUs when each
        worker gets ``bw_mbps`` to the parameter servers (see ``effective_bandwidth``)."""
        _check_n(n)
        if not bw_mbps > 0:
            raise ValueError(f"bandwidth must be > 0 Mbit/s, got {bw_mbps}")
        return self._raw_comm(job, n, bw_mbps) * self.work_scale(job)

    def C(self, job: JobSpec, n: int, bw_mbps: float | None = None,
          path: tuple[float, ...] | None = None) -> float:
        """C(n) = Cost(n) + Comm(n); ``bw_mbps`` None means the nominal bandwidth;
        ``path``: the placement's :func:`exchange_path` (None: a cross-rack one)."""
        bw = self.nominal_bw_mbps if bw_mbps is None else bw_mbps
        return self.cost(job, n, path) + self.comm(job, n, bw)

    def run_time(self, job: JobSpec, n: int, bw_mbps: float | None = None,
                 path: tuple[float, ...] | None = None) -> float:
        """Predicted start -> finish of a job that starts now: start-up (``startup_s`` and
        ``kv.init``'s exchange, :meth:`init_s`) + C(n)."""
        return self.startup_s + self.init_s(job, n, bw_mbps, path) + self.C(job, n, bw_mbps, path)

    def init_s(self, job: JobSpec, n: int, bw_mbps: float | None = None,
               path: tuple[float, ...] | None = None) -> float:
        """``kv.init``: before its first batch a PS job pushes and pulls every key once,
        an exchange without compute (the exchange model's start-up,
        ``sluice_common.exchange``). 0 without an exchange pricing (the paper's model)."""
        if self.exchange is None:
            return 0.0
        bw = self.nominal_bw_mbps if bw_mbps is None else bw_mbps
        per_batch = self._raw_comm(job, n, bw) / self._iterations_per_worker(job, n)
        return self.fixed_s(job, n, path) + per_batch

    def bus_mbps(self, host) -> float:
        """Mbit/s of ``host``'s in-host exchange (a PS and its workers on one host): the
        exchange pricing's (:meth:`ExchangePricing.bus_mbps`), else ``host.intra_bw``."""
        return self.exchange.bus_mbps(host) if self.exchange is not None else host.intra_bw

    def cost1(self, job: JobSpec) -> float:
        """Cost_i(1): the job's work in GPU-seconds, what the Lyapunov queues count."""
        return self.cost(job, 1)


def batches_for(spec: JobSpec, n: int, override: int | None = None) -> int:
    """Batches each of n workers trains: the job's data split over its workers,
    ``ceil(epochs * dataset_size / (batch_size * n))``, unless ``override`` says."""
    if override:
        return override
    return max(1, math.ceil(spec.epochs * spec.dataset_size / (spec.batch_size * n)))


def _check_n(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"GPU count must be an integer >= 1, got {n!r}")


# ---- bandwidth from placement ------------------------------------------------------------

def effective_bandwidth(topology, ps_hosts: Iterable[str], worker_hosts: Iterable[str],
                        in_host: bool = True, bus: Callable | None = None) -> float:
    """Per-worker bandwidth (Mbit/s) to the parameter servers for one placement.

    ``ps_hosts`` / ``worker_hosts``: one host name per PS / worker (repeat a host for
    several on it). Every (worker, PS) pair on different hosts is one flow on
    ``topology.path``; a pair on one host is one flow over that host's exchange bus
    (``Host.intra_bw``, PCIe- or NVLink-class, or ``bus(host)``: ``Estimator.bus_mbps``,
    the exchange model's; ``in_host=False`` makes it free). A link's
    (or bus's) bandwidth is split equally among the job's flows crossing it; a flow gets
    the smallest share along its path. A worker exchanges 1/P of the parameters with each
    of the P servers in parallel, so the job waits for the slowest flow: the result is ``P * min(flow share)`` — a bandwidth to plug into
    ``Estimator.comm`` for the whole parameter volume. If no pair needs a path (every
    pair on one host and ``in_host=False``) the result is ``inf`` (no comm time).

    Example: 4 workers behind one 5 Gbit/s uplink, 1 PS in another rack -> 1,250;
    4 workers and their PS on one host with a 100 Gbit/s bus -> 25,000 (on the emulated
    fabric the exchange model's bus is the loopback: far more).
    """
    ps_hosts, worker_hosts = list(ps_hosts), list(worker_hosts)
    if not ps_hosts or not worker_hosts:
        raise ValueError("a PS job needs at least one PS host and one worker host")
    g = topology.graph
    for h in ps_hosts + worker_hosts:
        if h not in topology.host_by_name:
            raise ValueError(f"unknown host {h!r} in topology '{topology.name}'")
    paths = []
    load: Counter = Counter()
    capacity: dict = {}
    pair_edges: dict = {}       # a host holds several workers: each pair's path found once
    for w in worker_hosts:
        for p in ps_hosts:
            if w == p:
                if not in_host:
                    continue
                edges = [("bus", w)]           # the host's own exchange bus
                host = topology.host_by_name[w]
                capacity[edges[0]] = host.intra_bw if bus is None else bus(host)
            else:
                edges = pair_edges.get((w, p))
                if edges is None:
                    path = topology.path(w, p)
                    edges = pair_edges[(w, p)] = [frozenset(e) for e in zip(path, path[1:])]
                    capacity.update((e, g.edges[tuple(e)]["bw"]) for e in edges)
            paths.append(edges)
            load.update(edges)
    if not paths:
        return math.inf
    slowest = min(capacity[e] / load[e] for edges in paths for e in edges)
    return len(ps_hosts) * slowest


def exchange_path(topology, ps_hosts: Iterable[str], worker_hosts: Iterable[str]
                  ) -> tuple[float, ...]:
    """The path whose fixed exchange time a placement pays per batch (the exchange model's
    ``R * rtt + F``; ``end_to_end/predict.py`` takes its slowest worker-server pair): the
    described rates (Mbit/s) of its worker-server pair with the most hops, each divided by
    the job's own flows on that link, the smaller share first among pairs of as many
    hops; ``()`` when every pair is on one host."""
    found: dict = {}            # a host holds several workers: each pair's path found once

    def path_of(w: str, p: str) -> list[str]:
        got = found.get((w, p))
        if got is None:
            got = found[w, p] = topology.path(w, p)
        return got
    pairs = [path_of(w, p) for w in worker_hosts for p in ps_hosts if w != p]
    if not pairs:
        return ()
    load = Counter(frozenset(e) for path in pairs for e in zip(path, path[1:]))
    g = topology.graph
    shared = [tuple(g.edges[e]["bw"] / load[frozenset(e)] for e in zip(path, path[1:]))
              for path in pairs]
    return max(shared, key=lambda rates: (len(rates), -min(rates)))


def nominal_bandwidth(topology) -> float:
    """The bandwidth one job sees alone: the slowest host link (Mbit/s)."""
    return min(h.bw for h in topology.hosts)
