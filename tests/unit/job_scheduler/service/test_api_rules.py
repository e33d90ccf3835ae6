"""The scheduler's POST /submissions: 400 for a body that does not parse or does not fit
the job file's schema, 422 naming the field for one that fits it but breaks a rule no
schema expresses; the OpenAPI document says which `model` names the service takes."""

from __future__ import annotations

import json
import re

import pytest

from job_scheduler.service.api import SchedulerHTTPServer
from sluice_common.models import _ALIASES, canonical_name, known_models
from support.scheduler_api import AUTH, TOKEN, TOPO, call, job_file, make_service

YAML = {**AUTH, "Content-Type": "application/yaml"}


@pytest.fixture
def api(tmp_path):
    svc = make_service(tmp_path)
    server = SchedulerHTTPServer(("127.0.0.1", 0), svc, token=TOKEN).start()
    yield svc, server
    server.stop()
    svc.store.close()


def submit(server, text: str):
    status, data = call(server, "POST", "/submissions", text.encode(), YAML)
    return status, json.loads(data)


@pytest.mark.parametrize("text,field", [
    (job_file("a", "a"), "name"),
    (job_file("a", max_gpus=TOPO.total_gpus + 1), "max_gpus"),
    (job_file("a").replace("max_gpus: 2", f"max_gpus: 2, num_ps: {len(TOPO.hosts) + 1}"),
     "num_ps"),
])
def test_a_file_that_fits_the_schema_but_breaks_a_rule_is_422(api, text, field):
    svc, server = api
    status, answer = submit(server, text)
    assert status == 422 and answer["field"] == field, answer
    assert svc.store.jobs() == []


@pytest.mark.parametrize("text", [
    "jobs: [",                                                  # not YAML
    job_file("a").replace("epochs: 1", "epochs: 0"),            # out of its bounds
    job_file("a").replace("resnet18", "lenet"),                 # no such model
    job_file("a").replace("resnet18", '""'),
    # a schema error and a broken rule together: the shape is wrong first
    job_file("a", "a").replace("epochs: 1", "epochs: 0"),
])
def test_a_file_that_does_not_parse_or_fit_the_schema_stays_400(api, text):
    svc, server = api
    status, answer = submit(server, text)
    assert status == 400, answer
    assert svc.store.jobs() == []


def test_the_document_lists_the_known_models_and_names_the_rules(api):
    _svc, server = api
    doc = json.loads(call(server, "GET", "/openapi.json")[1])
    model = doc["components"]["schemas"]["JobModel"]["properties"]["model"]
    assert model["examples"] == known_models()
    assert all(name in model["description"] for name in known_models())
    pattern = re.compile(model["pattern"])
    spellings = [*known_models(), *_ALIASES, "ResNet-50", " VGG_16 ", "Inception V3"]
    for name in spellings:             # every spelling the service takes, the schema takes
        assert canonical_name(name) and pattern.search(name), name
    for name in ("", "lenet", "resnet", "resnet500", "vgg16x", "x"):   # and no other
        assert canonical_name(name) is None and not pattern.search(name), name
    submit_op = doc["paths"]["/submissions"]["post"]
    assert "422" in submit_op["responses"]
    said = " ".join(submit_op["description"].split())
    for rule in ("names unique within the file", "`max_gpus` at most", "`num_ps` at most"):
        assert rule in said, rule
