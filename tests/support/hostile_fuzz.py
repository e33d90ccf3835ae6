"""Hypothesis strategies for hostile bodies and job files: nesting far past
any parser's recursion, huge and non-finite numbers, long strings, binary, YAML tags,
anchors, aliases and merge keys, dropped into a job file's fields or standing alone."""

from __future__ import annotations

import json

import yaml
from hypothesis import strategies as st

from support.yaml_fuzz import yaml_values

FIELDS = ["name", "model", "dataset_size", "epochs", "batch_size", "max_gpus", "arrival",
          "num_ps", "layers", "jobs", "type", "c_in", "c_out", "k", "h", "w"]
WORDS = ["resnet18", "conv", "fc", "jobs", "1", "0"]
TAGS = ["!!int", "!!float", "!!str", "!!binary", "!!timestamp", "!!set", "!!omap",
        "!!pairs", "!!null", "!!bool", "!!merge", "!!python/object:os.system",
        "!!python/name:os.system", "!custom", "!<tag:yaml.org,2002:int>"]

# nesting: (open, close) of one level, in YAML flow, JSON objects and YAML block style
_LEVELS = [("[", "]"), ("{a: ", "}"), ('{"a": ', "}"), ("[[", "]]"), ("- ", "")]


@st.composite
def nested(draw, max_depth: int = 60_000) -> str:
    """A value nested ``depth`` levels deep, most of them shallow, some far past any
    recursion limit."""
    depth = draw(st.one_of(st.integers(0, 40), st.integers(40, 2_000),
                           st.sampled_from([5_000, 20_000, max_depth])))
    opening, closing = draw(st.sampled_from(_LEVELS))
    inner = draw(st.sampled_from(["1", "", "x", "[]", "{}", "*a", "&a 1"]))
    if opening == "- ":     # block style: one more indent per level (900: ~800 KB)
        return "\n" + "".join("  " * i + "-\n" for i in range(min(depth, 900))) + "  " + inner
    return opening * depth + inner + closing * depth


def numbers() -> st.SearchStrategy[str]:
    return st.one_of(
        st.integers(-10**30, 10**30).map(str),
        st.integers(50, 20_000).map(lambda n: "9" * n),            # int(str) limit: 4,300
        st.integers(50, 5_000).map(lambda n: "1" + "0" * n + ".5"),
        st.integers(50, 5_000).map(lambda n: f"1e{'9' * (n // 100 + 1)}"),
        st.sampled_from([".inf", "-.inf", ".NaN", "NaN", "Infinity", "-Infinity", "1e999",
                         "-1e999", "0x" + "f" * 400, "0b" + "1" * 5000, "0o7777",
                         "1_000_000", "190:20:30", "1:" * 2000 + "1"]),
        st.floats().map(repr))


def scalars() -> st.SearchStrategy[str]:
    """A YAML scalar as written in a file: plain, quoted, tagged, anchored, an alias."""
    text = st.one_of(st.text(max_size=20), st.text(min_size=3_000, max_size=6_000),
                     st.binary(max_size=64).map(lambda b: b.decode("latin-1")))
    plain = st.one_of(numbers(), text.map(json.dumps), st.sampled_from(WORDS), nested())
    tagged = st.tuples(st.sampled_from(TAGS), st.one_of(numbers(), text.map(json.dumps),
                                                         st.just("'%%%'"), st.just("[1]")))
    return st.one_of(plain, tagged.map(" ".join), st.just("*a"), st.just("*nowhere"),
                     plain.map(lambda v: "&a " + v), st.just("{<<: *a}"))


@st.composite
def job_files(draw) -> str:
    """A job file whose fields hold hostile values, or one made of a nested document,
    anchors that expand (billion laughs), or a plain YAML/JSON dump of any values."""
    kind = draw(st.sampled_from(["fields", "nested", "laughs", "dump-yaml", "dump-json"]))
    if kind == "fields":
        fields = draw(st.lists(st.tuples(st.sampled_from(FIELDS), scalars()), max_size=6))
        job = ", ".join(f"{k}: {v}" for k, v in fields)
        return f"base: &a {{x: 1}}\njobs: [{{{job}}}]\n"
    if kind == "nested":
        return "jobs: " + draw(nested())
    if kind == "laughs":
        width, levels = draw(st.integers(2, 12)), draw(st.integers(1, 12))
        lines = ["l0: &l0 [" + ",".join(["1"] * width) + "]"]
        lines += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * width) + "]"
                  for i in range(1, levels)]
        return "\n".join(lines) + f"\njobs: *l{levels - 1}\n"
    value = draw(yaml_values(WORDS, FIELDS, 10**40, 4, 30))
    doc = {"jobs": value}
    return yaml.safe_dump(doc) if kind == "dump-yaml" else json.dumps(doc)


@st.composite
def json_bodies(draw) -> bytes:
    """A controller body: a registration, a report or a rule with hostile values, a
    nested document, or binary."""
    kind = draw(st.sampled_from(["fields", "nested", "binary"]))
    if kind == "binary":
        return draw(st.binary(max_size=2_000))
    if kind == "nested":
        # (under the 64 KiB limit: a larger body is refused unread,
        # tests/unit/project/test_hostile_bodies.py)
        return draw(nested(max_depth=30_000)).replace("{a: ", '{"a": ').encode()[:60_000]
    value = st.one_of(numbers(), st.text(max_size=5_000).map(json.dumps),
                      nested(max_depth=20_000).map(lambda t: t.replace("{a: ", '{"a": ')))
    fields = draw(st.lists(st.tuples(st.sampled_from(
        ["id", "servers", "workers", "ip", "port", "worker", "batch", "rule",
         "total_batches", "bytes_per_batch"]), value), max_size=5))
    body = "{" + ", ".join(f'"{k}": {v}' for k, v in fields) + "}"
    return body.encode("utf-8", "surrogatepass")[:60_000]
