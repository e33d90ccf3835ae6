"""The commands' frozen configs: their own checks name fields; only the CLI that
owns the parser names the flag (``sluice_common.errors.flag_error``)."""

from __future__ import annotations

import dataclasses

import pytest

from job_scheduler.simulation.cli import SIMULATE_FLAGS
from sluice_common.errors import flag_error
from job_scheduler.core.mechanisms import MechanismOptions
from job_scheduler.service.app import ServiceConfig
from job_scheduler.service.cli import SERVICE_FLAGS
from job_scheduler.simulation.compare import SimulateConfig
from sluice_common.errors import OPTION, InputError, InputErrors, as_flags, option_error


@pytest.mark.parametrize("fields, field, flag", [
    ({"slot": 0}, "slot", "--slot"),
    ({"V": -1}, "V", "--V"),
    ({"estimate_error": -0.5}, "estimate_error", "--estimate-error"),
    ({"lam": 2}, "lam", "--lambda"),
    ({"k": "n"}, "k", "--k"),
    ({"mechanisms": MechanismOptions(migrate=True)}, "migrate", "--migrate"),
    ({"policies": ("las",), "mechanisms": MechanismOptions(pack=True)}, "policy", "--policies"),
])
def test_simulate_config_names_the_field_and_the_cli_the_flag(fields, field, flag):
    with pytest.raises(ValueError) as err:
        SimulateConfig(workload="proteus-small-dispersed", **fields)
    assert str(err.value).startswith(f"{field}: ")
    assert flag_error(err.value, SIMULATE_FLAGS).source == f"argument {flag}"


def test_simulate_config_is_frozen_and_refuses_unknown_policies():
    config = SimulateConfig(workload="w", policies=("fifo",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.slot = 1.0
    with pytest.raises(InputError) as err:
        SimulateConfig(workload="w", policies=("fifo", "bogus"))
    assert (err.value.source, err.value.field) == (OPTION, "policies")
    assert str(flag_error(err.value, SIMULATE_FLAGS)).startswith(
        "argument --policies: unknown policy 'bogus'")


@pytest.mark.parametrize("fields, field, flag", [
    ({"slot": 0}, "slot", "--slot"),
    ({"time_factor": 0}, "time_factor", "--time-factor"),
    ({"max_retries": -1}, "max_retries", "--max-retries"),
    ({"max_request_bytes": 10}, "max_request_bytes", "--max-request-bytes"),
    ({"policy": "fifo", "V": 2.0}, "V/eps", "--V/--eps"),
    ({"slurm_batches": 0}, "slurm_batches", "--slurm-batches"),
    ({"slurm_compute_s": -1.0}, "slurm_compute_s", "--slurm-compute-s"),
])
def test_service_config_names_the_field_and_the_cli_the_flag(tmp_path, fields, field, flag):
    with pytest.raises(ValueError) as err:
        ServiceConfig(db=tmp_path / "s.db", **fields)
    assert str(err.value).startswith(f"{field}: ")
    assert flag_error(err.value, SERVICE_FLAGS).source == f"argument {flag}"


def test_as_flags_translates_only_option_errors_it_knows():
    file_error = InputError("jobs.yaml", "bad", field="max_gpus")
    assert as_flags(file_error, {"max_gpus": "--max-gpus"}) is file_error
    unknown = option_error("other", "bad")
    assert as_flags(unknown, {"policy": "--policy"}) is unknown
    both = InputErrors([option_error("policy", "unknown"), file_error])
    out = as_flags(both, {"policy": "--policy"})
    assert [e.format() for e in out.errors] == ["argument --policy: unknown",
                                              file_error.format()]
