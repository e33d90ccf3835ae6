"""The controller's Prometheus series, through ``prometheus_client``.

Every series is declared here with its help text (the README's metrics reference is
generated from these declarations). Counters are counted as events happen (the OpenFlow
threads and the HTTP threads both write; prometheus_client is thread-safe); gauges are
set from the service's state when ``/metrics`` is scraped. Each service has its own
registry, so several controllers in one test process do not share series.
"""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import disable_created_metrics

disable_created_metrics()     # no *_created series: the names stay what they were

# Reaction latency (progress report -> barrier reply), seconds.
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

# label values every scrape shows, 0 included (a rate() over them must not see gaps)
LABEL_VALUES = {"sluice_progress_reports_total": ("accepted", "stale", "rejected",
                                                  "rate_limited")}

# name -> (help, label names)
COUNTERS = {
    "sluice_packet_in_total": ("packet-in messages from the switches", ()),
    "sluice_malformed_packets_total": ("packet-ins that could not be parsed", ()),
    "sluice_openflow_errors_total": ("OpenFlow error messages from the switches", ()),
    "sluice_arp_packets_total": ("ARP packets handled by the controller", ()),
    "sluice_jobs_registered_total": ("jobs registered through the API", ()),
    "sluice_progress_reports_total": ("progress reports by result (accepted, stale, "
                                      "rejected, rate_limited)", ("result",)),
    "sluice_flow_mods_total": ("flow mods sent to the switches (add, modify, delete)", ()),
    "sluice_rank_changes_total": ("ranking-rule switches through POST /rank", ()),
}
GAUGES = {
    "sluice_jobs_active": ("jobs registered now", ()),
    "sluice_switches_connected": ("switches with a live OpenFlow channel", ()),
    "sluice_hosts_located": ("hosts whose switch port is known", ()),
    "sluice_links_discovered": ("switch-to-switch links seen by LLDP", ()),
    "sluice_rules_installed": ("flow rules installed on the switches", ()),
    "sluice_rules_by_level": ("job flow rules by priority level (0 = most urgent); every "
                              "level of --levels is present, 0 when it has no rule",
                              ("level",)),
    "sluice_rank_rule": ("the ranking rule: 1 for the active one, 0 for the others",
                         ("rule",)),
    "sluice_port_tx_bytes": ("bytes sent by a switch port", ("switch", "port")),
    "sluice_port_rx_bytes": ("bytes received by a switch port", ("switch", "port")),
    "sluice_port_tx_bytes_per_second": ("measured send rate of a switch port",
                                        ("switch", "port")),
    "sluice_link_utilisation_ratio": ("send rate / capacity of the link behind a switch "
                                      "port (emulated capacity on Mininet)",
                                      ("switch", "port", "peer")),
    "sluice_bottleneck_utilisation_ratio": ("the highest link utilisation in the fabric", ()),
}
REACTION = ("sluice_reaction_latency_seconds",
            "progress report to barrier reply of its flow mods")


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._lock = threading.Lock()
        self._counters = {n: Counter(n, h, labels, registry=self.registry)
                          for n, (h, labels) in COUNTERS.items()}
        self._gauges = {n: Gauge(n, h, labels, registry=self.registry)
                        for n, (h, labels) in GAUGES.items()}
        for name, values in LABEL_VALUES.items():
            for value in values:
                self._counters[name].labels(value)
        self.reaction = Histogram(*REACTION, buckets=LATENCY_BUCKETS, registry=self.registry)

    def _series(self, table: dict, kind, name: str, labels: dict):
        metric = table.get(name)
        if metric is None:       # a series added elsewhere without a declaration here
            with self._lock:
                metric = table.get(name) or kind(name, name, sorted(labels),
                                                 registry=self.registry)
                table[name] = metric
        return metric.labels(**labels) if labels else metric

    def inc(self, name: str, value: float = 1, **labels: str) -> None:
        self._series(self._counters, Counter, name, labels).inc(value)

    def set(self, name: str, value: float, **labels: str) -> None:
        self._series(self._gauges, Gauge, name, labels).set(value)

    def clear(self, name: str) -> None:
        """Forget every label set of a gauge (ports of a switch that went away)."""
        self._gauges[name].clear()

    def observe_reaction(self, seconds: float) -> None:
        self.reaction.observe(seconds)

    def render(self) -> str:
        return generate_latest(self.registry).decode()
