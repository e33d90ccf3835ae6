"""Job description loading: every error kind names file, job and field; fuzzing never
raises anything but InputError."""

from __future__ import annotations

import copy

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluice_common.jobspec import job_to_dict, load_jobs, parse_job, parse_jobs
from sluice_common.models import (MODELS, SMALLCNN_LAYERS, canonical_name, count_params,
                                  known_models, Layer)
from sluice_common.errors import InputError
from support.yaml_fuzz import yaml_values
from support.paths import REPO

EXAMPLES = REPO / "examples" / "jobs"


def valid_job(**over):
    job = {"name": "a", "model": "resnet18", "dataset_size": 1000, "epochs": 2,
           "batch_size": 32, "max_gpus": 4}
    job.update(over)
    return job


def doc(*jobs):
    return {"jobs": list(jobs) or [valid_job()]}


def error_of(data, source="jobs.yaml") -> InputError:
    with pytest.raises(InputError) as info:
        parse_jobs(data, source)
    return info.value


# ---- models --------------------------------------------------------------------------------

def test_model_table_has_true_counts_and_aliases():
    assert MODELS[canonical_name("ResNet18")].params == 11_689_512   # the paper swaps 18 and 50
    assert MODELS[canonical_name("resnet_50")].params == 25_557_032
    assert canonical_name("Inception_V3") == canonical_name("inception3") == "inception_v3"
    assert canonical_name("INCEPTION4") == "inception_v4"
    assert canonical_name("no-such-net") is None
    for name in ("alexnet", "googlenet", "densenet121", "vgg11", "vgg16", "vgg19",
                 "resnet101", "resnet152", "smallcnn"):
        assert name in known_models()


def test_count_params_eq2_eq3():
    # conv 3->8 k=5: 3*8*25 = 600; fc 2x2x8 -> 10: 2*2*8*10 = 320
    assert count_params([Layer("conv", 3, 8, k=5), Layer("fc", 8, 10, h=2, w=2)]) == 920
    assert MODELS["smallcnn"].params == count_params(SMALLCNN_LAYERS) == 421_408


# ---- valid files ---------------------------------------------------------------------------

def test_example_files_load():
    mixed = load_jobs(EXAMPLES / "mixed.yaml")
    assert [j.model for j in mixed][:3] == ["vgg16", "resnet18", "alexnet"]
    assert mixed[3].num_ps == 2 and mixed[1].arrival == 10.0
    layered = load_jobs(EXAMPLES / "layers.yaml")
    assert layered[0].model == "custom" and layered[0].layers == SMALLCNN_LAYERS


def test_defaults_and_round_trip():
    job = parse_jobs(doc(valid_job(model="Inception3")), "x")[0]
    assert (job.model, job.arrival, job.num_ps) == ("inception_v3", 0.0, 1)
    again = parse_job(job_to_dict(job), "x", 0)
    assert again == job


# ---- every error kind ------------------------------------------------------------------------

@pytest.mark.parametrize("job, field, reason", [
    (valid_job(color="red"), "color", "unknown field"),
    (valid_job(epochs="2"), "epochs", "integer"),
    (valid_job(epochs=True), "epochs", "integer"),           # bool is not int
    (valid_job(epochs=2.0), "epochs", "integer"),
    (valid_job(dataset_size=0), "dataset_size", ">= 1"),
    (valid_job(batch_size=-4), "batch_size", ">= 1"),
    (valid_job(max_gpus=0), "max_gpus", ">= 1"),
    (valid_job(num_ps=0), "num_ps", ">= 1"),
    (valid_job(arrival=-1), "arrival", ">= 0"),
    (valid_job(arrival=float("inf")), "arrival", "finite"),
    (valid_job(arrival="soon"), "arrival", "number"),
    (valid_job(arrival=False), "arrival", "number"),
    (valid_job(model="lenet"), "model", "unknown model"),
    (valid_job(model=5), "model", "unknown model"),
    (valid_job(layers=[{"type": "conv", "c_in": 1, "c_out": 2, "k": 3}]), "model",
     "exactly one"),
])
def test_bad_field_names_file_job_and_field(job, field, reason):
    err = error_of(doc(job))
    assert err.source == "jobs.yaml" and err.element == "job 'a'" and err.field == field
    assert reason in err.reason


@pytest.mark.parametrize("missing", ["name", "dataset_size", "epochs", "batch_size", "max_gpus"])
def test_missing_field(missing):
    job = valid_job()
    del job[missing]
    err = error_of(doc(valid_job(name="first"), job))
    assert err.field == missing and "missing" in err.reason
    assert err.element == ("job #2" if missing == "name" else "job 'a'")


def test_missing_model_and_layers():
    job = valid_job()
    del job["model"]
    assert error_of(doc(job)).field == "model"


@pytest.mark.parametrize("layers, field", [
    ([], "layers"),
    ("conv", "layers"),
    ([{"type": "pool"}], "layers[0].type"),
    (["conv"], "layers[0]"),
    ([{"type": "conv", "c_in": 1, "c_out": 2}], "layers[0].k"),
    ([{"type": "conv", "c_in": 1, "c_out": 2, "k": 3, "stride": 2}], "layers[0].stride"),
    ([{"type": "conv", "c_in": 1, "c_out": 2, "k": 3},
      {"type": "fc", "h": 1, "w": 0, "c_in": 2, "c_out": 3}], "layers[1].w"),
])
def test_bad_layers(layers, field):
    job = valid_job(layers=layers)
    del job["model"]
    err = error_of(doc(job))
    assert err.element == "job 'a'" and err.field == field


def test_duplicate_names():
    err = error_of(doc(valid_job(), valid_job(epochs=1)))
    assert err.element == "job 'a'" and err.field == "name" and "duplicate" in err.reason


@pytest.mark.parametrize("data, field", [
    (None, None), ([1, 2], None), ("jobs", None),
    ({"jobs": []}, "jobs"), ({"jobs": {"a": 1}}, "jobs"), ({}, "jobs"),
    ({"jobs": [valid_job()], "cluster": 1}, "cluster"),
])
def test_bad_documents(data, field):
    err = error_of(data)
    assert err.source == "jobs.yaml" and err.field == field


def test_non_mapping_job_is_numbered():
    err = error_of(doc(valid_job(), "oops"))
    assert err.element == "job #2" and "mapping" in err.reason


def test_bad_name_uses_number():
    err = error_of(doc(valid_job(name=7)))
    assert err.element == "job #1" and err.field == "name"


@pytest.mark.parametrize("name", ["resnet a", "-lead", "x" * 65, "a/b", "caf\u00e9"])
def test_a_name_the_controller_refuses_is_refused_at_load(name):
    err = error_of(doc(valid_job(name=name)))
    assert err.element == f"job '{name}'" and err.field == "name" and "letters, digits" in err.reason
    from controller.registry import parse_job as register
    with pytest.raises(InputError):       # the same rule: never accepted here, refused there
        register({"id": name, "servers": [{"ip": "10.0.0.1", "port": 9000}],
                  "workers": [{"ip": "10.0.0.2", "port": 9001}]})


@pytest.mark.parametrize("name", ["resnet-a", "a", "job_1.v2", "x" * 64])
def test_a_name_the_file_accepts_the_controller_registers(name):
    assert parse_jobs(doc(valid_job(name=name)))[0].name == name
    from controller.registry import parse_job as register
    assert register({"id": name, "servers": [{"ip": "10.0.0.1", "port": 9000}],
                     "workers": [{"ip": "10.0.0.2", "port": 9001}]}).id == name


def test_validate_command_exits_2_naming_file_job_and_field(tmp_path):
    import subprocess
    import sys
    bad = tmp_path / "jobs.yaml"
    bad.write_text(yaml.safe_dump(doc(valid_job(name="resnet a"))))
    out = subprocess.run([sys.executable, "-m", "sluice", "validate", str(bad)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert f"{bad}: job 'resnet a': field 'name'" in out.stderr


def test_file_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("jobs:\n  - {name: a, model: [\n")
    with pytest.raises(InputError, match="not valid YAML") as info:
        load_jobs(bad)
    assert info.value.source == str(bad)
    with pytest.raises(InputError, match="cannot read"):
        load_jobs(tmp_path / "missing.yaml")
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00jobs")
    with pytest.raises(InputError):
        load_jobs(binary)


def test_first_error_stops_everything(tmp_path):
    """Nothing partial: a bad third job means no jobs at all."""
    path = tmp_path / "j.yaml"
    path.write_text(yaml.safe_dump(doc(valid_job(name="a"), valid_job(name="b"),
                                       valid_job(name="c", epochs=0))))
    with pytest.raises(InputError) as info:
        load_jobs(path)
    assert info.value.element == "job 'c'"


# ---- fuzzing ------------------------------------------------------------------------------

values = yaml_values(["resnet18", "VGG16", "conv", "fc", "jobs", "name"],
                     ["name", "model", "layers", "type", "k", "c_in", "epochs", "arrival"],
                     int_bound=10**12, size=4, max_leaves=12)

VALID = yaml.safe_load((EXAMPLES / "mixed.yaml").read_text())
LAYERED = yaml.safe_load((EXAMPLES / "layers.yaml").read_text())


@st.composite
def mutated(draw):
    data = copy.deepcopy(draw(st.sampled_from([VALID, LAYERED])))
    for _ in range(draw(st.integers(1, 3))):
        job = draw(st.sampled_from(data["jobs"]))
        action = draw(st.sampled_from(["set", "delete", "layer"]))
        key = draw(st.sampled_from(sorted(job) + ["extra", "model", "layers"]))
        if action == "set":
            job[key] = draw(values)
        elif action == "delete":
            job.pop(key, None)
        elif isinstance(job.get("layers"), list) and job["layers"]:
            layer = draw(st.sampled_from(job["layers"]))
            if isinstance(layer, dict):
                layer[draw(st.sampled_from(["type", "k", "c_in", "h", "zz"]))] = draw(values)
    return data


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(mutated(), values, st.dictionaries(st.just("jobs"), values)))
def test_fuzz_documents_only_raise_input_error(data):
    try:
        jobs = parse_jobs(data, "fuzz.yaml")
    except InputError as err:
        assert err.source == "fuzz.yaml" and err.reason
        return
    for job in jobs:          # anything accepted is fully valid
        assert job.dataset_size >= 1 and job.epochs >= 1 and job.batch_size >= 1
        assert job.max_gpus >= 1 and job.num_ps >= 1 and job.arrival >= 0


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=60) | st.sampled_from([
    "jobs:\n - name: a\n   model: x\n", "jobs: [", "{", "jobs: !!python/object:os.system x",
    "jobs:\n  - &a {name: a}\n  - *a\n", "? [a]\n: 1\n", "jobs: [{name: a, epochs: 1e3}]"]))
def test_fuzz_text_only_raises_input_error(tmp_path_factory, text):
    from sluice_common.jobspec import parse_jobs_text
    try:
        parse_jobs_text(text, "fuzz.yaml")
    except InputError:
        pass


VALID_TEXT = (EXAMPLES / "mixed.yaml").read_text()


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_fuzz_text_mutations_of_a_valid_file(data):
    """Cut, insert or overwrite characters of a valid file: InputError or valid jobs."""
    from sluice_common.jobspec import parse_jobs_text
    text = VALID_TEXT
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(text)))
        j = data.draw(st.integers(i, min(len(text), i + 12)))
        text = text[:i] + data.draw(st.text(alphabet=":-[]{}#&*!|>'\"\n ,0123456789abcx.",
                                            max_size=6)) + text[j:]
    try:
        jobs = parse_jobs_text(text, "mut.yaml")
    except InputError as err:
        assert err.source == "mut.yaml"
        return
    assert all(j.epochs >= 1 and j.max_gpus >= 1 for j in jobs)
