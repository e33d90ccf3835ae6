"""The scheduler's estimator and the demo's predictions are one exchange model with one
set of constants: the same job on the same placement, priced by the
estimator of a run (``end_to_end.run.run_estimator``: what the ``lyapunov`` and ``sluice``
policies, the dry run and the run loop price with) and by the predictions
(``end_to_end.predict.predict_pass``), agrees in-host, in-rack and across racks; and a
4-GPU alexnet-like job on one host is priced, and given, below one GPU's time as the
model says (an estimator apart from the model can price it at 8x the model)."""

from __future__ import annotations

import pytest

from end_to_end.predict import exchange_facts, predict_pass, wire_bytes_of
from end_to_end.run import run_estimator
from job_scheduler.core.estimator import (Estimator, batches_for, effective_bandwidth,
                                          exchange_path)
from job_scheduler.core.exchange_pricing import ExchangePricing
from job_scheduler.core.policies import make_policy
from job_scheduler.simulation.simulator import Simulator
from ps_runtime.launcher import WorkerOptions
from sluice_common.exchange import default_constants
from sluice_common.jobspec import JobSpec
from topologies import load_topology

TOPO = load_topology("two-rack-100g")
EST = run_estimator(TOPO, "emulated")
PLACEMENTS = {                                 # (PS hosts, one host per worker)
    "in-host": (["h1"], ["h1"] * 4),
    "in-rack": (["h1"], ["h1", "h1", "h2", "h2"]),
    "cross-rack": (["h3"], ["h1"] * 4),
    "8 over two racks": (["h1"], ["h1"] * 4 + ["h3"] * 4),
    "two PS": (["h1", "h3"], ["h1", "h2", "h3", "h4"]),
}
MODELS = [("alexnet", 256), ("resnet18", 64), ("vgg16", 32), ("vgg16", 256)]


def _spec(model: str, batch: int, n: int, servers: int = 1) -> JobSpec:
    return JobSpec(name=f"{model}-{n}", model=model, dataset_size=batch * n * 40, epochs=1,
                   batch_size=batch, max_gpus=n, num_ps=servers)


def predicted_jct(spec: JobSpec, ps: list[str], workers: list[str]) -> float:
    """The demo's prediction of the job alone, arriving and starting at 0."""
    options = WorkerOptions(compute="emulated", bw_scale=TOPO.emulation_bw_scale)
    record = {"name": spec.name, "arrival": 0.0, "start": 0.0, "ps_hosts": ps,
              "worker_hosts": workers, "batches": batches_for(spec, len(workers)),
              **exchange_facts(EST, spec, options, wire_bytes_of(EST, spec, options))}
    return predict_pass(TOPO, [record], None, EST.startup_s,
                        server_per_worker_s=EST.server_per_worker_s)[spec.name]


def estimated_jct(spec: JobSpec, ps: list[str], workers: list[str]) -> float:
    """The scheduler's price of the same job on the same placement (start-up + C(n))."""
    bw = effective_bandwidth(TOPO, ps, workers, bus=EST.bus_mbps)
    return EST.run_time(spec, len(workers), bw, exchange_path(TOPO, ps, workers))


@pytest.mark.parametrize("where", list(PLACEMENTS))
@pytest.mark.parametrize("model,batch", MODELS)
def test_estimator_prices_a_placement_as_the_predictions_do(where, model, batch):
    ps, workers = PLACEMENTS[where]
    spec = _spec(model, batch, len(workers), len(ps))
    assert estimated_jct(spec, ps, workers) == pytest.approx(
        predicted_jct(spec, ps, workers), rel=0.02)


def test_the_server_s_time_per_worker_shows_on_one_host_and_hides_behind_a_slow_wire():
    assert EST.server_per_worker_s > 0            # the run's estimator prices it
    spec = _spec("resnet18", 64, 4)
    ps, workers = PLACEMENTS["in-host"]
    assert EST.server_s(spec, 4, ()) == pytest.approx(4 * EST.server_per_worker_s)
    assert EST.server_s(spec, 2, ()) == pytest.approx(2 * EST.server_per_worker_s)
    # alexnet's bytes take longer on a cross-rack link than the server's turns
    big = _spec("alexnet", 256, 4)
    assert EST.server_s(big, 4, exchange_path(TOPO, ["h3"], ["h1"] * 4)) == 0.0
    # and the estimator without it prices the one-host batch that much lower
    plain = Estimator(EST.profile, nominal_bw_mbps=EST.nominal_bw_mbps,
                      startup_s=EST.startup_s, exchange=EST.exchange)
    bw = effective_bandwidth(TOPO, ps, workers, bus=EST.bus_mbps)
    per_batch = (EST.C(spec, 4, bw, ()) - plain.C(spec, 4, bw, ())) / EST.iterations(spec, 4)
    assert per_batch == pytest.approx(4 * EST.server_per_worker_s)


def test_one_gpu_is_priced_as_the_predictions_price_it():
    spec = _spec("alexnet", 256, 1)
    assert EST.run_time(spec, 1) == pytest.approx(predicted_jct(spec, ["h1"], ["h1"]), rel=0.02)


def test_in_host_alexnet_on_four_gpus_costs_less_than_on_one_and_the_policies_take_four():
    spec = _spec("alexnet", 256, 4)
    ps, workers = PLACEMENTS["in-host"]
    bw = effective_bandwidth(TOPO, ps, workers, bus=EST.bus_mbps)
    c4 = EST.C(spec, 4, bw, exchange_path(TOPO, ps, workers))
    assert c4 < EST.C(spec, 1) / 2                # the model: 4 GPUs ~3.9x faster
    assert predicted_jct(spec, ps, workers) < predicted_jct(spec, ["h1"], ["h1"]) / 2
    for policy in ("lyapunov", "sluice"):          # both price C(n) with the estimator
        sim = Simulator(TOPO, [spec], make_policy(policy), estimator=EST, bandwidth="idle")
        assert sim.run().gpus == [4], policy


def test_the_run_prices_with_the_committed_constants_and_no_other_terms():
    pricing = EST.exchange
    assert pricing is not None and pricing.emulated
    assert pricing.constants == default_constants()
    assert pricing.constants.hop_s == default_constants().hop_s   # the emulated datapath's
    assert EST.sync_s == 0.0 and EST.link_efficiency == default_constants().efficiency


def test_the_in_host_bus_is_the_models_loopback_on_the_fabric_and_intra_bw_on_a_cluster():
    host = TOPO.host_by_name["h1"]
    c = default_constants()
    assert EST.bus_mbps(host) == pytest.approx(c.local_Bps * 8 / 1e6 / TOPO.emulation_bw_scale)
    cluster = Estimator(exchange=ExchangePricing.for_topology(TOPO))
    assert cluster.bus_mbps(host) == host.intra_bw == Estimator().bus_mbps(host)
    # the bus is shared by the job's flows on it, as before
    assert effective_bandwidth(TOPO, ["h1"], ["h1"] * 4, bus=cluster.bus_mbps) == \
        host.intra_bw / 4


def test_exchange_path_is_the_pair_with_most_hops_at_the_jobs_own_share():
    assert exchange_path(TOPO, ["h1"], ["h1"] * 4) == ()
    assert exchange_path(TOPO, ["h1"], ["h1", "h2", "h2"]) == (50_000.0, 50_000.0)
    # four workers on h1 to a PS on h3: host links and uplinks carry all four flows
    assert exchange_path(TOPO, ["h3"], ["h1"] * 4) == (25_000.0, 12_500.0, 12_500.0, 25_000.0)
    assert len(exchange_path(TOPO, ["h1"], ["h1", "h2", "h3"])) == 4


def test_a_trace_job_on_its_reference_placement_lasts_its_recorded_duration():
    # the work scale is solved on the placement it gets on the empty cluster, its own
    # exchange path included (one host here): a fixed-count policy reproduces the trace
    spec = JobSpec(name="t", model="alexnet", dataset_size=256 * 4 * 40, epochs=1,
                   batch_size=256, max_gpus=4, trace_gpus=4, trace_duration=100.0)
    res = Simulator(TOPO, [spec], make_policy("fifo"), estimator=EST, bandwidth="idle").run()
    assert res.gpus == [4] and res.avg_jct == pytest.approx(100.0, rel=1e-3)
