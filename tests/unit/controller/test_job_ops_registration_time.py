"""The controller stamps each registration for the ``aged`` rule, ranks by it, and keeps
it across a restart."""

from __future__ import annotations

import json

import pytest

from controller.fake_fabric import bring_up
from sluice_common.errors import InputError
from sluice_common.job_rank import AGING_BYTES_PER_S
from support.controller_fakes import ADMIN, make_service, northbound

MB = 1 << 20


def _job(name: str, k: int, total: int) -> dict:
    return {"id": name, "servers": [{"id": "s0", "ip": f"10.0.0.{3 + k % 2}", "port": 9000 + k}],
            "workers": [{"id": "w0", "ip": f"10.0.0.{1 + k % 2}", "port": 9100 + k}],
            "total_batches": total, "bytes_per_batch": MB}


def test_a_registration_is_stamped_and_a_later_job_must_be_smaller_by_its_age(tmp_path):
    svc = bring_up(make_service(rank="aged"))
    stamps = iter([1000.0, 1100.0, 1200.0])
    svc.shared.wall_clock = lambda: next(stamps)
    northbound(svc).register_job(ADMIN, _job("old", 0, 20))
    # 100 s later and smaller by less than the rate times those 100 s
    short = max(1, int(AGING_BYTES_PER_S * 100 / MB))
    assert short * MB < AGING_BYTES_PER_S * 100
    northbound(svc).register_job(ADMIN, _job("close", 1, 20 - short))
    assert svc.registry.jobs["old"].registered_s == 1000.0
    assert svc.registry.jobs["close"].registered_s == 1100.0
    by_job = svc.reconciler._ranker.levels
    # smaller, but by less than its age: behind the older job (SRPT would put it first)
    assert by_job["old"] < by_job["close"]
    northbound(svc).register_job(ADMIN, _job("small", 2, 1))
    by_job = svc.reconciler._ranker.levels
    assert by_job["small"] < by_job["old"] < by_job["close"]


def test_the_registration_time_survives_a_restart(tmp_path):
    path = tmp_path / "state.json"
    svc = bring_up(make_service(state_file=path, rank="aged"))
    svc.shared.wall_clock = lambda: 1234.5
    northbound(svc).register_job(ADMIN, _job("a", 0, 10))
    svc.save_state()
    assert json.loads(path.read_text())["jobs"][0]["registered_s"] == 1234.5
    again = bring_up(make_service(state_file=path))
    assert again.registry.jobs["a"].registered_s == 1234.5


def _saved(tmp_path, **extra):
    path = tmp_path / "state.json"
    svc = bring_up(make_service(state_file=path))
    northbound(svc).register_job(ADMIN, _job("a", 0, 10))
    svc.save_state()
    data = json.loads(path.read_text())
    data["jobs"][0].pop("registered_s")
    data["jobs"][0].update(extra)
    path.write_text(json.dumps(data))
    return path


def test_a_job_saved_without_its_registration_time_counts_as_registered_at_the_restart(
        tmp_path):
    from controller.persistence import load_state

    path = _saved(tmp_path)
    svc = bring_up(make_service())
    registry, _, _ = load_state(path, svc.shared.known_ips, svc.shared.fabric, now=777.0)
    assert registry.jobs["a"].registered_s == 777.0


@pytest.mark.parametrize("bad", ["yesterday", True, [1], float("inf")])
def test_a_bad_registration_time_refuses_to_start(tmp_path, bad):
    path = _saved(tmp_path, registered_s=bad)      # inf: json writes Infinity
    with pytest.raises(InputError) as err:
        make_service(state_file=path)
    assert str(path) in str(err.value) and "registered_s" in str(err.value)
