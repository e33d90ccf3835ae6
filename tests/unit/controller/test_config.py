"""ControllerConfig: one frozen object, checked once; its errors name fields, and only
``sluice controller`` (controller/cli.py) turns a field into the flag that sets it."""

import dataclasses
import re

import pytest

from controller.cli import FLAG_OF_FIELD, as_flag_error
from controller.config import CONFIG_SOURCE, ControllerConfig
from sluice_common.errors import InputError
from topologies import load_topology
from support.paths import REPO

TOPO = load_topology("two-rack")
CONTROLLER = REPO / "controller"


@pytest.mark.parametrize("field, value", [
    ("levels", 9), ("levels", 0), ("enforce", "tos"), ("rank", "fastest"),
    ("rate_per_s", 0.0), ("ofp_port", 70000), ("api_port", 0), ("stats_interval", 0.01),
    ("echo_interval", 61.0), ("echo_misses", 101), ("log_level", "loud"),
    ("attained_base_bytes/attained_factor", None),
])
def test_a_bad_value_names_its_field_and_the_cli_names_its_flag(field, value):
    kw = {"attained_factor": 1.0} if value is None else {field: value}
    with pytest.raises(InputError) as err:
        ControllerConfig(topology=TOPO, **kw)
    assert (err.value.source, err.value.field) == (CONFIG_SOURCE, field)
    assert "--" not in str(err.value)
    flagged = as_flag_error(err.value)
    assert flagged.source == f"argument {FLAG_OF_FIELD[field]}"
    assert flagged.reason == err.value.reason


def test_the_config_is_frozen_and_every_flag_entry_names_a_field():
    config = ControllerConfig(topology=TOPO)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.rank = "attained"
    fields = {f.name for f in dataclasses.fields(ControllerConfig)}
    for name in FLAG_OF_FIELD:
        assert set(name.split("/")) <= fields, name


def test_below_the_cli_no_module_reads_argparse_or_names_a_flag():
    for path in sorted(CONTROLLER.glob("*.py")):
        if path.name == "cli.py":
            continue
        text = path.read_text()
        assert "argparse" not in text, path.name
        assert not re.search(r"argument --|[\"']--[a-z]", text), path.name
