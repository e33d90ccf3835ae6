"""The exchange calibration's fits (mininet_tests.calibration.exchange): measurements the
model itself made at known constants give those constants back."""

from dataclasses import replace

import pytest

from sluice_common.exchange import ExchangeConstants

C = ExchangeConstants(overhead_s=0.01, per_key_s=0.002, hop_s=0.0005, efficiency=0.8,
                      local_Bps=100e6, queue_fill=0.5)


def test_calibration_fits_the_startup_constants_from_alone_points_and_probes():
    """The run-loop points, made by the model itself at known constants, give them back."""

    from mininet_tests.calibration.exchange import fit_many, fit_startup
    from mininet_tests.calibration.runs import BULK, PROBE, driver_mix, probe_sharers
    from mininet_tests.heavy_tail.predict import SLOT_S
    from mininet_tests.heavy_tail.fabric_setup import experiment_topology
    from sluice_common.exchange import egress_state, share_egress

    _, capacity = experiment_topology(12.0)
    names = [j.name for j in driver_mix()]
    bulk = [n for n in names if n.startswith("cal-bulk")]
    assert len(bulk) == 6 and sum(n.startswith("cal-probe") for n in names) == 3
    truth = replace(C, queue_fill=0.1, queue_fill_per_sender=0.15, startup_s=0.7,
                    startup_rounds=12.0)
    shared = share_egress(probe_sharers(capacity, bulk, BULK[0]), capacity, 3e5, truth)
    (probe,) = probe_sharers(capacity, ["probe"], PROBE[0])
    init = replace(probe, compute_s=0.0, window=0)     # kv.init: every key at once
    its, waits = egress_state(probe_sharers(capacity, bulk, BULK[0]) + [probe], capacity, 3e5, truth)
    init_its = egress_state(probe_sharers(capacity, bulk, BULK[0]) + [init], capacity, 3e5, truth)[0]
    run_alone = PROBE[1] * probe.alone_s(truth) + init.alone_s(truth)
    driver = {n: {"iteration_s": shared[n], "jct_s": 0.0} for n in bulk}
    for n in names:
        if n.startswith("cal-alone"):
            driver[n] = {"jct_s": SLOT_S / 2 + 0.7 + run_alone, "iteration_s": 0}
            # the same job alone with priority on: 0.4 s more (its registration)
            driver[n.replace("cal-alone", "cal-on")] = {
                "jct_s": SLOT_S / 2 + 0.7 + 0.4 + run_alone, "iteration_s": 0}
        elif n.startswith("cal-probe"):
            driver[n] = {"jct_s": SLOT_S / 2 + 0.7 + 12 * waits["probe"]
                         + PROBE[1] * its["probe"] + init_its["probe"], "iteration_s": 0}
    c = replace(truth, queue_fill_per_sender=0.0, startup_s=0.0, startup_rounds=0.0)
    many = fit_many(c, driver, capacity, 3e5)
    assert many == pytest.approx(0.15, abs=1e-3)
    got = fit_startup(replace(c, queue_fill_per_sender=many), driver, capacity, 3e5)
    assert got["startup_s"] == pytest.approx(0.7, abs=1e-3)
    assert got["startup_wait_s"] == pytest.approx(waits["probe"], rel=1e-2) and waits["probe"] > 0
    assert got["startup_rounds"] == pytest.approx(12.0, rel=1e-2)
    assert got["startup_priority_s"] == pytest.approx(0.4, abs=1e-3)
