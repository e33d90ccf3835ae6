"""Typed file models: every problem in one run, JSON Schemas shipped and in step."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
import yaml

from sluice_common.jobspec import parse_jobs
from sluice_common.errors import InputError, InputErrors
from sluice.schema_cli import schema_text
from topologies import parse_topology

from support.paths import REPO as ROOT
JOB_FILES = sorted((ROOT / "examples").rglob("*.yaml")) + [ROOT / "end_to_end/data/demo_jobs.yaml"]
TOPOLOGY_FILES = sorted((ROOT / "topologies/builtin").glob("*.yaml"))

THREE_FAULTS = """\
jobs:
  - name: bad
    model: resnet18
    dataset_size: 1000
    epochs: 1
    batch_size: -4
    max_gpus: 0
    colour: red
"""


@pytest.mark.parametrize("kind", ["jobs", "topology"])
def test_shipped_schema_is_the_generated_one(kind):
    shipped = (ROOT / "schemas" / f"{kind}.schema.json").read_text()
    assert shipped == schema_text(kind), f"run `sluice schema {kind} --out schemas`"
    jsonschema.Draft202012Validator.check_schema(json.loads(shipped))


@pytest.mark.parametrize("path", JOB_FILES + TOPOLOGY_FILES, ids=lambda p: p.name)
def test_shipped_files_name_and_satisfy_their_schema(path):
    kind = "topology" if path in TOPOLOGY_FILES else "jobs"
    first = path.read_text().splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=")
    schema_path = (path.parent / first.split("=", 1)[1]).resolve()
    assert schema_path == ROOT / "schemas" / f"{kind}.schema.json"
    jsonschema.validate(yaml.safe_load(path.read_text()), json.loads(schema_path.read_text()))


def test_schema_rejects_what_the_loader_rejects():
    schema = json.loads(schema_text("jobs"))
    bad = yaml.safe_load(THREE_FAULTS)
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(bad))
    assert len(errors) >= 3
    both = yaml.safe_load(THREE_FAULTS.replace("    colour: red\n", "    layers: [{type: fc, h: 1, w: 1, c_in: 1, c_out: 1}]\n"))
    assert not jsonschema.Draft202012Validator(schema).is_valid(both)   # model XOR layers


def test_every_job_error_in_one_run():
    with pytest.raises(InputErrors) as info:
        parse_jobs(yaml.safe_load(THREE_FAULTS), "three.yaml")
    found = {(e.element, e.field) for e in info.value.errors}
    assert found == {("job 'bad'", "batch_size"), ("job 'bad'", "max_gpus"),
                     ("job 'bad'", "colour")}
    assert all(e.source == "three.yaml" for e in info.value.errors)


def test_errors_across_jobs_and_cross_checks_together():
    data = {"jobs": [
        {"name": "a", "model": "resnet18", "layers": [{"type": "fc", "h": 1, "w": 1,
                                                       "c_in": 1, "c_out": 1}],
         "dataset_size": 1, "epochs": 1, "batch_size": 1, "max_gpus": 1},
        {"name": "a", "model": "lenet", "dataset_size": 1, "epochs": 0, "batch_size": 1,
         "max_gpus": 1},
        "oops"]}
    with pytest.raises(InputErrors) as info:
        parse_jobs(data, "x.yaml")
    lines = [e.format() for e in info.value.errors]
    assert any("job 'a': field 'model': give exactly one" in l for l in lines)
    assert any("unknown model 'lenet'" in l for l in lines)
    assert any("field 'epochs': must be >= 1" in l for l in lines)
    assert any("duplicate job name" in l for l in lines)
    assert any("job #3: must be a mapping" in l for l in lines)


def test_every_topology_error_in_one_run():
    data = {"name": "t",
            "switches": [{"name": "tor1"}, {"name": "sp", "role": "router"}],
            "racks": [{"name": "r1", "tor": "tor9"}],
            "hosts": [{"name": "h1", "rack": "r1", "gpus": -1, "bw": 0},
                      {"name": "h2", "rack": "r7", "gpus": 1, "bw": 10}],
            "links": [{"a": "tor1", "b": "nowhere", "bw": 10}]}
    with pytest.raises(InputErrors) as info:
        parse_topology(data, "t.yaml")
    lines = "\n".join(e.format() for e in info.value.errors)
    for expect in ("switch 'sp': field 'role'", "host 'h1': field 'gpus': must be >= 0",
                   "host 'h1': field 'bw': must be > 0", "rack 'r1': field 'tor'",
                   "host 'h2': field 'rack'", "link tor1-nowhere: dangling link"):
        assert f"t.yaml: {expect}" in lines


def test_validate_prints_all_three_errors_and_exits_2(tmp_path):
    path = tmp_path / "three.yaml"
    path.write_text(THREE_FAULTS)
    done = subprocess.run([sys.executable, "-m", "sluice", "validate", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 3, done.stderr
    for field in ("batch_size", "max_gpus", "colour"):
        assert any(f"{path}: job 'bad': field '{field}'" in l for l in lines), done.stderr


def test_schema_command_prints_json():
    done = subprocess.run([sys.executable, "-m", "sluice", "schema", "topology"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and json.loads(done.stdout)["title"] == "sluice topology"


def test_single_error_stays_a_plain_input_error():
    with pytest.raises(InputError) as info:
        parse_jobs({"jobs": [{"name": "a", "model": "resnet18", "dataset_size": 1,
                              "epochs": 1, "batch_size": 1, "max_gpus": 0}]}, "x")
    assert not isinstance(info.value, InputErrors) and info.value.field == "max_gpus"
