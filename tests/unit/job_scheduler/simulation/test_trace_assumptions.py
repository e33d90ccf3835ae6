"""The assumptions file: what a trace lacks (model, batch size, PS count) per partition or
job-name pattern, first match wins; its errors name the file, the entry and the field;
the summary counts the jobs of each assumption."""

from __future__ import annotations

import pytest

from job_scheduler.simulation.trace_assumptions import (DEFAULT_LABEL, Assumption, assume,
                                                        assumption_lines, assumption_summary,
                                                        load_assumptions, parse_assumptions,
                                                        philly_model)
from sluice_common.errors import InputError
from sluice_common.jobspec import JobSpec


def test_both_document_shapes_read_the_same(tmp_path):
    entries = [{"partition": "gpu", "model": "ResNet-50", "batch_size": 64},
               {"name": "bert-*", "model": "vgg16", "num_ps": 2}]
    as_list = parse_assumptions(entries, "a.yaml")
    assert as_list == parse_assumptions({"assumptions": entries}, "a.yaml")
    assert as_list[0] == Assumption(partition="gpu", model="resnet50", batch_size=64)
    path = tmp_path / "a.yaml"
    path.write_text("assumptions:\n  - {partition: gpu, model: resnet50, batch_size: 64}\n"
                    "  - {name: \"bert-*\", model: vgg16, num_ps: 2}\n")
    assert load_assumptions(path) == as_list


def test_first_match_wins_and_the_default_fills_the_gaps():
    rules = parse_assumptions([{"partition": "gpu", "name": "bert-*", "model": "vgg16"},
                               {"partition": "gpu", "batch_size": 64},
                               {"name": "*", "num_ps": 3}], "a.yaml")
    got = assume(rules, partition="gpu", name="bert-large", gpu_time_s=10.0)
    assert (got.label, got.model, got.batch_size, got.num_ps) == \
        ("partition=gpu name=bert-*", "vgg16", 32, 1)
    got = assume(rules, partition="gpu", name="resnet", gpu_time_s=3600.0)
    assert (got.label, got.model, got.batch_size) == ("partition=gpu", "googlenet", 64)
    got = assume(rules, partition="cpu", name="x", gpu_time_s=10.0)
    assert (got.label, got.num_ps) == ("name=*", 3)
    got = assume((), partition="gpu", name="x", gpu_time_s=400_000.0)
    assert (got.label, got.model, got.batch_size, got.num_ps) == \
        (DEFAULT_LABEL, philly_model(400_000.0), 32, 1)


@pytest.mark.parametrize("data,element,field", [
    ([{"partition": "gpu", "model": "nosuch"}], "entry 1", "model"),
    ([{"partition": "gpu", "batch_size": 0}], "entry 1", "batch_size"),
    ([{"partition": "gpu", "batch_size": True}], "entry 1", "batch_size"),
    ([{"partition": "gpu", "num_ps": "two"}], "entry 1", "num_ps"),
    ([{"model": "vgg16"}], "entry 1", "partition"),
    ([{"partition": "gpu"}], "entry 1", "model"),
    ([{"partition": "gpu", "model": "vgg16", "colour": "red"}], "entry 1", "colour"),
    ([{"partition": 3, "model": "vgg16"}], "entry 1", "partition"),
    (["gpu"], "entry 1", None),
    ([{"name": "a*", "model": "vgg16"}, {"name": "a*", "batch_size": 8}], "entry 2", "name"),
    ({"assumptions": [], }, None, "assumptions"),
    ({"rules": [{"name": "a", "model": "vgg16"}]}, None, "rules"),
    (None, None, "assumptions"),
])
def test_bad_entries_name_the_file_entry_and_field(data, element, field):
    with pytest.raises(InputError) as info:
        parse_assumptions(data, "a.yaml")
    err = info.value
    assert (err.source, err.element, err.field) == ("a.yaml", element, field), err


def test_every_problem_at_once(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("- {partition: gpu, model: nosuch, batch_size: -1}\n- {name: x}\n")
    with pytest.raises(InputError) as info:
        load_assumptions(path)
    assert [(e.element, e.field) for e in info.value.errors] == [
        ("entry 1", "model"), ("entry 1", "batch_size"), ("entry 2", "model")]
    assert all(e.source == str(path) for e in info.value.errors)


def test_unreadable_and_non_yaml_files(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        load_assumptions(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {partition: [\n")
    with pytest.raises(InputError, match="not YAML") as info:
        load_assumptions(bad)
    assert info.value.source == str(bad)


def job(name, assumption=None, model="vgg16", batch=32):
    extra = {"assumption": assumption} if assumption else {}
    return JobSpec(name=name, model=model, dataset_size=100, epochs=1, batch_size=batch,
                   max_gpus=1, extra=extra)


def test_the_summary_counts_each_assumption_and_skips_jobs_with_none():
    jobs = [job("a", DEFAULT_LABEL, "resnet18"), job("b", "partition=gpu", batch=64),
            job("c", DEFAULT_LABEL, "vgg16"), job("d")]
    assert assumption_summary(jobs) == {DEFAULT_LABEL: 2, "partition=gpu": 1}
    assert list(assumption_summary(jobs)) == [DEFAULT_LABEL, "partition=gpu"]
    lines = assumption_lines(jobs)
    assert lines[0].startswith(f"2 job(s) by {DEFAULT_LABEL}: model resnet18 x1, vgg16 x1")
    assert "batch_size 64 x1" in lines[1]
    assert assumption_summary([job("d")]) == {} and assumption_lines([]) == []


def test_the_documented_example_is_a_valid_file():
    import re

    import yaml

    from support.paths import REPO

    text = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    section = text[text.index("--trace-format sacct`)"):]
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    rules = parse_assumptions(yaml.safe_load(block), "docs/design.md")
    assert [r.label for r in rules] == ["partition=gpu name=bert-*", "partition=gpu", "name=*"]
    got = assume(rules, partition="gpu", name="bert-base", gpu_time_s=1.0)
    assert (got.model, got.num_ps, got.batch_size) == ("vgg16", 2, 32)
