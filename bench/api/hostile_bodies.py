"""Hostile request bodies for every endpoint of both services that takes a body.

Each kind is a request an authenticated client could send (the admin token, or a
registered job's progress token): nesting 50,000 deep (YAML flow sequences and
mappings, JSON arrays and objects), the "billion laughs" of YAML aliases, a 600 KB alias
bomb, numbers of 100,000 digits and past float's range, 1 MB bodies (a 1 MB string, 11,000
jobs, random bytes), bodies over the services' limits, and wrong content types. The
bodies are made once (deterministic: a seeded generator) and cycled by the clients.

A request is ``(method, target, headers, body)`` (bench/paced_http.py).
"""

from __future__ import annotations

import json
import random

from bench.api.api_defects_curl import alias_bomb, nested_aliases
from bench.paced_http import Request

DEPTH = 50_000
MB = 1_000_000
JOB = ("{{name: h{i}, model: resnet18, dataset_size: 1000, epochs: 1, batch_size: 32, "
       "max_gpus: 1}}")


def deep_yaml(depth: int = DEPTH) -> bytes:
    return b"jobs: " + b"[" * depth + b"]" * depth + b"\n"


def deep_yaml_mapping(depth: int = DEPTH) -> bytes:
    return b"jobs: " + b"{a: " * depth + b"1" + b"}" * depth + b"\n"


def deep_json(depth: int = DEPTH) -> bytes:
    return b'{"jobs": ' + b"[" * depth + b"]" * depth + b"}"


def deep_json_object(depth: int = DEPTH) -> bytes:
    return b'{"a": ' * depth + b"1" + b"}" * depth


def huge_number_yaml(digits: int = 100_000) -> bytes:
    return (f"jobs:\n  - {{name: n, model: resnet18, dataset_size: 1{'0' * digits}, epochs: 1, "
            "batch_size: 32, max_gpus: 1}\n").encode()


def non_finite_yaml() -> bytes:
    return (b"jobs:\n  - {name: n, model: resnet18, dataset_size: .inf, epochs: .nan, "
            b"batch_size: 1e999999, max_gpus: -0x7fffffffffffffffffff}\n")


def many_jobs_yaml(size: int = MB) -> bytes:
    lines, total, i = ["jobs:"], 6, 0
    while total < size:
        line = "  - " + JOB.format(i=i)
        lines.append(line)
        total += len(line) + 1
        i += 1
    return ("\n".join(lines) + "\n").encode()[:size]


def long_string_yaml(size: int = MB) -> bytes:
    head = b"jobs:\n  - {name: "
    tail = b", model: resnet18, dataset_size: 1, epochs: 1, batch_size: 1, max_gpus: 1}\n"
    return head + b"x" * (size - len(head) - len(tail)) + tail


def binary(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def scheduler_kinds(token: str) -> dict[str, Request]:
    """Hostile requests to POST /submissions and POST /jobs/{id}/cancel."""
    auth = {"Authorization": f"Bearer {token}"}
    yaml_h = {**auth, "Content-Type": "application/yaml"}
    json_h = {**auth, "Content-Type": "application/json"}
    sub = "/submissions"
    return {
        "S deep YAML [ 50,000": ("POST", sub, yaml_h, deep_yaml()),
        "S deep YAML {a: 50,000": ("POST", sub, yaml_h, deep_yaml_mapping()),
        "S deep JSON [ 50,000": ("POST", sub, json_h, deep_json()),
        "S deep JSON {: 50,000": ("POST", sub, json_h, deep_json_object()),
        "S deep YAML [ 500,000 (1 MB)": ("POST", sub, yaml_h, deep_yaml(500_000)),
        "S billion laughs": ("POST", sub, yaml_h, nested_aliases().encode()),
        "S alias bomb 600 KB": ("POST", sub, yaml_h, alias_bomb().encode()),
        "S number 100,000 digits": ("POST", sub, yaml_h, huge_number_yaml()),
        "S .inf .nan 1e999999": ("POST", sub, yaml_h, non_finite_yaml()),
        "S 1 MB of jobs": ("POST", sub, yaml_h, many_jobs_yaml()),
        "S 1 MB string": ("POST", sub, yaml_h, long_string_yaml()),
        "S 1 MB binary": ("POST", sub, yaml_h, binary(MB, 1)),
        "S 2 MB (over the limit)": ("POST", sub, yaml_h, binary(2 * MB, 2)),
        "S form content type": ("POST", sub, {**auth, "Content-Type":
                                              "application/x-www-form-urlencoded"},
                                b"jobs=" + b"x" * 100_000),
        "S text/html": ("POST", sub, {**auth, "Content-Type": "text/html"}, deep_yaml()),
        "S cancel, 1 MB binary": ("POST", "/jobs/1/cancel",
                                  {**auth, "Content-Type": "application/octet-stream"},
                                  binary(MB, 3)),
        "S cancel, deep JSON": ("POST", "/jobs/1/cancel", json_h, deep_json()),
    }


def controller_kinds(admin_token: str, job_id: str, job_token: str) -> dict[str, Request]:
    """Hostile requests to POST /jobs, POST /jobs/{id}/progress and POST /rank."""
    admin = {"Authorization": f"Bearer {admin_token}", "Content-Type": "application/json"}
    job = {"Authorization": f"Bearer {job_token}", "Content-Type": "application/json"}
    progress = f"/jobs/{job_id}/progress"
    under_limit = 30_000       # 60 KB: under the controller's 64 KB body limit
    return {
        "C register deep JSON [ 30,000": ("POST", "/jobs", admin, deep_json(under_limit)),
        "C register deep JSON {: 20,000": ("POST", "/jobs", admin,
                                          deep_json_object(20_000)),
        "C register deep JSON [ 50,000": ("POST", "/jobs", admin, deep_json()),
        "C register 1 MB binary": ("POST", "/jobs", admin, binary(MB, 4)),
        "C register YAML aliases": ("POST", "/jobs", admin, nested_aliases().encode()),
        "C register form type": ("POST", "/jobs", {**admin, "Content-Type":
                                                   "application/x-www-form-urlencoded"},
                                 b"id=" + b"x" * 60_000),
        "C progress deep JSON [ 30,000": ("POST", progress, job, deep_json(under_limit)),
        "C progress number 60,000 digits": ("POST", progress, job,
                                            b'{"worker": "w0", "batch": 1' + b"0" * 60_000
                                            + b"}"),
        "C progress 1e999999": ("POST", progress, job, b'{"worker": "w0", "batch": 1e999999}'),
        "C progress 60 KB binary": ("POST", progress, job, binary(60_000, 5)),
        "C progress 1 MB": ("POST", progress, job, json.dumps(
            {"worker": "w" * MB, "batch": 1}).encode()),
        "C progress text/plain": ("POST", progress, {**job, "Content-Type": "text/plain"},
                                  b'{"worker": "w0", "batch": 2}'),
        "C rank deep JSON [ 30,000": ("POST", "/rank", admin, deep_json(under_limit)),
        "C rank 1 MB binary": ("POST", "/rank", admin, binary(MB, 6)),
    }
