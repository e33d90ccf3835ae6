"""The hostile-load benchmark's checker (bench/api/verdicts.py) and a short run of the
benchmark itself (``--quick``, shortened), so that neither can rot.

The short run asserts what must hold on any machine: the bench runs to its verdicts,
every hostile kind was sent, no service exited and nothing the valid client was told was
accepted is lost. The latency and memory bounds are the benchmark's to judge (its
5-minute run, bench/RESULTS.md), not a timed unit test's.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from bench.api.hostile_bodies import controller_kinds, deep_json, deep_yaml, scheduler_kinds
from bench.api.verdicts import answer_summary, verdicts
from bench.harness import ROOT


def stats(**kinds):
    return {name: {"count": sum(codes.values()) + no_answer, "statuses": codes,
                   "max_bytes": size, "max_ms": ms, "no_answer": no_answer}
            for name, (codes, size, ms, no_answer) in kinds.items()}


def figures(p99=20.0, before=80.0, after=90.0, crashes=(), lost=(), answers=None):
    return {"storm": {"p99_ms": p99}, "rss_before_mib": {"scheduler": before},
            "rss_after_mib": {"scheduler": after}, "crashes": {"scheduler": list(crashes)},
            "lost": {"jobs": list(lost), "batches": []},
            "answers": answers or answer_summary(stats(a=({400: 5}, 200, 30.0, 0)))}


def test_every_bound_met_on_good_figures():
    assert all(v["met"] for v in verdicts(figures()))


def test_each_bound_fails_on_its_own():
    assert not verdicts(figures(p99=250.1))[0]["met"]
    assert verdicts(figures(p99=250.0))[0]["met"]
    assert not verdicts(figures(p99=math.nan))[0]["met"]
    assert not verdicts(figures(after=96.1))[1]["met"]          # 1.2 x 80 = 96
    assert verdicts(figures(after=96.0))[1]["met"]
    assert not verdicts(figures(crashes=[-11]))[2]["met"]
    assert not verdicts(figures(lost=[7]))[3]["met"]


def test_hostile_answers_must_be_small_quick_4xx():
    for bad in (({500: 1, 400: 3}, 200, 30.0, 0), ({400: 3}, 65_537, 30.0, 0),
                ({400: 3}, 200, 3001.0, 0), ({400: 3}, 200, 30.0, 1)):
        summary = answer_summary(stats(a=({413: 2}, 100, 10.0, 0), b=bad))
        assert not verdicts(figures(answers=summary))[-1]["met"], bad
    summary = answer_summary(stats(a=({413: 2}, 100, 10.0, 0), b=({503: 1}, 70_000, 10.0, 0)))
    assert summary["not_4xx"] == 1 and summary["max_bytes_kind"] == "b"
    assert not verdicts(figures(answers=answer_summary({})))[-1]["met"]   # nothing sent


def test_the_hostile_bodies_are_what_they_say():
    assert deep_yaml().count(b"[") == 50_000 and len(deep_yaml()) > 100_000
    assert deep_json(3) == b'{"jobs": [[[]]]}'
    sched, ctl = scheduler_kinds("t" * 20), controller_kinds("a" * 20, "j", "k" * 20)
    assert max(len(r[3]) for r in sched.values()) == 2_000_000
    # every endpoint that takes a body is hit
    assert {r[1] for r in sched.values()} == {"/submissions", "/jobs/1/cancel"}
    assert {r[1] for r in ctl.values()} == {"/jobs", "/jobs/j/progress", "/rank"}


@pytest.mark.slow          # 26 s on a host with two cores (docs/design.md, "The test machine")
def test_quick_run_reaches_its_verdicts_with_no_crash_and_nothing_lost(tmp_path):
    out = tmp_path / "hostile.json"
    res = subprocess.run([sys.executable, "-m", "bench.api.bench_hostile", "--quick",
                          "--minutes", "0.15", "--idle-s", "3", "--settle-s", "1",
                          "--json", str(out)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode in (0, 1), res.stdout[-3000:] + res.stderr[-3000:]
    fig = json.loads(out.read_text())
    # p99, RSS of each service, crashes, lost, the hostile answers
    assert len(fig["verdicts"]) == 6 and res.stdout.count("VERDICT ") == 6
    assert all(s["count"] > 0 for s in fig["kinds"].values()), fig["kinds"]
    assert fig["crashes"] == {"scheduler": [], "controller": []}
    assert fig["lost"] == {"jobs": [], "batches": []} and fig["accepted_jobs"] > 10
