"""The hostile-client bounds and the checker bench/api/bench_hostile.py prints: plain
functions of the figures, unit-tested (tests/unit/bench/api/test_bench_hostile.py).
"""

from __future__ import annotations

import math

P99_MS = 250.0              # the valid client's p99 under the storm
RSS_RATIO = 1.2             # each service's resident memory after / before the storm
ANSWER_BYTES = 64 * 1024    # a hostile request's answer: at most this long ...
ANSWER_MS = 3000.0          # ... within this time, and a 4xx


def answer_summary(stats: dict[str, dict]) -> dict:
    """The hostile answers of every kind together: how many, which statuses, how many
    were no 4xx or no answer at all, the largest and the slowest (and their kinds)."""
    statuses: dict[int, int] = {}
    for s in stats.values():
        for code, n in s["statuses"].items():
            statuses[int(code)] = statuses.get(int(code), 0) + n
    worst_bytes = max(stats.items(), key=lambda kv: kv[1]["max_bytes"], default=(None, {}))
    worst_ms = max(stats.items(), key=lambda kv: kv[1]["max_ms"], default=(None, {}))
    return {"count": sum(s["count"] for s in stats.values()),
            "statuses": dict(sorted(statuses.items())),
            "not_4xx": sum(n for code, n in statuses.items() if not 400 <= code < 500),
            "no_answer": sum(s["no_answer"] for s in stats.values()),
            "max_bytes": worst_bytes[1].get("max_bytes", 0), "max_bytes_kind": worst_bytes[0],
            "max_ms": worst_ms[1].get("max_ms", 0.0), "max_ms_kind": worst_ms[0]}


def verdicts(fig: dict) -> list[dict]:
    """One verdict per bound: {bound, value, met}. A figure that could not be measured
    (NaN, a missing service) is not met."""
    crashes = sum(len(c) for c in fig["crashes"].values())
    lost = len(fig["lost"]["jobs"]) + len(fig["lost"]["batches"])
    p99 = fig["storm"]["p99_ms"]
    out = [{"bound": f"valid client's p99 under the storm <= {P99_MS:g} ms",
            "value": f"{p99:.1f} ms", "met": not math.isnan(p99) and p99 <= P99_MS}]
    for name, before in fig["rss_before_mib"].items():
        ratio = fig["rss_after_mib"][name] / before
        out.append({"bound": f"{name} RSS after / before <= {RSS_RATIO:g}",
                    "value": f"{ratio:.2f}", "met": ratio <= RSS_RATIO})
    out.append({"bound": "crashes (service exits) == 0", "value": f"{crashes}",
                "met": crashes == 0})
    out.append({"bound": "accepted jobs and reports lost == 0",
                "value": f"{lost} ({fig['lost']})", "met": lost == 0})
    a = fig["answers"]
    out.append({"bound": f"every hostile answer a 4xx of <= {ANSWER_BYTES} B within "
                         f"{ANSWER_MS / 1000:g} s",
                "value": f"{a['not_4xx']} not 4xx, {a['no_answer']} unanswered, largest "
                         f"{a['max_bytes']} B ({a['max_bytes_kind']}), slowest "
                         f"{a['max_ms']:.0f} ms ({a['max_ms_kind']})",
                "met": a["count"] > 0 and a["not_4xx"] == 0 and a["no_answer"] == 0
                and a["max_bytes"] <= ANSWER_BYTES and a["max_ms"] <= ANSWER_MS})
    return out
