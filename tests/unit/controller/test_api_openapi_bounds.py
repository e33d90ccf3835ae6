"""The published OpenAPI documents are the validation truth. Integer bounds carried as
the non-standard keys ``ge``/``le`` (no client or validator reads them) would make
`POST /jobs` with port 0, total_batches 0 or bytes_per_batch 0 valid by the document and
refused by the service (a defect schemathesis finds at ~17,000 cases)."""

from __future__ import annotations

import json

import jsonschema
import pytest
from pydantic import ValidationError

from controller.api import JobRegistration, ProgressReport
from sluice.reference import openapi_documents
from sluice_common.body_bounds import LIMITS

DOCS = openapi_documents()
# pydantic's names for what JSON Schema calls minimum, maximum, minLength, ...
NOT_JSON_SCHEMA = {"ge", "le", "gt", "lt", "min_length", "max_length", "multiple_of",
                   "strict", "allow_inf_nan", "max_digits", "decimal_places"}


def keys_of(node, path=""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield path, key
            if key not in ("properties", "example", "examples"):
                yield from keys_of(value, f"{path}/{key}")
            else:
                for name, sub in value.items() if isinstance(value, dict) else ():
                    yield from keys_of(sub, f"{path}/{key}/{name}")
    elif isinstance(node, list):
        for item in node:
            yield from keys_of(item, path)


@pytest.mark.parametrize("service", sorted(DOCS))
def test_no_bound_hides_under_a_key_no_validator_reads(service):
    bad = [(p, k) for p, k in keys_of(DOCS[service]) if k in NOT_JSON_SCHEMA]
    assert bad == []


@pytest.mark.parametrize("service", sorted(DOCS))
def test_every_request_body_states_its_bounds(service):
    bodies = [op["requestBody"] for ops in DOCS[service]["paths"].values()
              for op in ops.values() if "requestBody" in op]
    assert bodies
    for body in bodies:
        bounds = body["x-sluice-body-bounds"]
        assert {k: bounds[k] for k in ("depth", "values", "string_chars", "number_chars")} \
            == LIMITS.openapi_extension()
        assert f"nested at most {LIMITS.depth} deep" in body["description"]


def validator(schema_name: str):
    doc = DOCS["controller"]
    schema = {**doc["components"]["schemas"][schema_name],
              "components": doc["components"]}
    return jsonschema.Draft202012Validator(schema)


def registration(port=9000, **sizes):
    return {"id": "j", "servers": [{"ip": "10.0.0.1", "port": port}],
            "workers": [{"ip": "10.0.0.2", "port": 9001}], **sizes}


CASES = {f"port={p}": registration(port=p) for p in (0, 1, 65535, 65536, -1)} | {
    f"{field}={v}": registration(**{field: v}) for field in ("total_batches", "bytes_per_batch")
    for v in (0, 1, 2**62 - 1, 2**62, -5)}


def assert_agree(schema_name: str, model, body: dict) -> None:
    by_document = validator(schema_name).is_valid(body)
    try:
        model.model_validate_json(json.dumps(body))
        by_service = True
    except ValidationError:
        by_service = False
    assert by_document == by_service, body


@pytest.mark.parametrize("body", CASES.values(), ids=CASES.keys())
def test_the_document_and_the_service_agree_on_a_registration(body):
    assert_agree("JobRegistration", JobRegistration, body)


@pytest.mark.parametrize("batch", [-1, 0, 2**62 - 1, 2**62])
def test_the_document_and_the_service_agree_on_a_progress_report(batch):
    assert_agree("ProgressReport", ProgressReport, {"worker": "w0", "batch": batch})
