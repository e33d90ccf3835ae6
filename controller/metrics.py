"""Counters and a latency histogram, rendered in the Prometheus text format.

Small on purpose (no client library): the controller exports a handful of series.
Thread-safe: the OpenFlow threads and the HTTP threads both write here.
"""

from __future__ import annotations

import bisect
import threading

# Reaction latency (progress report -> barrier reply), seconds.
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Histogram:
    def __init__(self, buckets=LATENCY_BUCKETS) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)
        self.sum = 0.0
        self.count = 0
        self.samples: list[float] = []   # recent raw values, for quantiles in the bench

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1
        self.samples.append(value)
        if len(self.samples) > 10000:
            del self.samples[:5000]


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counters: dict[tuple[str, tuple], float] = {}
        self.gauges: dict[tuple[str, tuple], float] = {}
        self.reaction = Histogram()

    def inc(self, name: str, value: float = 1, **labels: str) -> None:
        key = (name, tuple(sorted(labels.items())))
        with self._lock:
            self.counters[key] = self.counters.get(key, 0) + value

    def set(self, name: str, value: float, **labels: str) -> None:
        with self._lock:
            self.gauges[(name, tuple(sorted(labels.items())))] = value

    def observe_reaction(self, seconds: float) -> None:
        with self._lock:
            self.reaction.observe(seconds)

    def counter(self, name: str, **labels: str) -> float:
        with self._lock:
            return self.counters.get((name, tuple(sorted(labels.items()))), 0)

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            for kind, series in (("counter", self.counters), ("gauge", self.gauges)):
                done = set()
                for (name, labels), value in sorted(series.items()):
                    if name not in done:
                        lines.append(f"# TYPE {name} {kind}")
                        done.add(name)
                    lines.append(f"{name}{_labels(labels)} {value:g}")
            h, name = self.reaction, "sluice_reaction_latency_seconds"
            lines.append(f"# HELP {name} progress report to barrier reply of its flow mods")
            lines.append(f"# TYPE {name} histogram")
            cumulative = 0
            for bound, count in zip(h.buckets, h.counts):
                cumulative += count
                lines.append(f'{name}_bucket{{le="{bound:g}"}} {cumulative}')
            lines.append(f'{name}_bucket{{le="+Inf"}} {h.count}')
            lines.append(f"{name}_sum {h.sum:.6f}")
            lines.append(f"{name}_count {h.count}")
        return "\n".join(lines) + "\n"


def _labels(labels: tuple) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{str(v).replace(chr(34), "")}"' for k, v in labels)
    return "{" + inner + "}"
