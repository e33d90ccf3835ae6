"""The Grafana dashboard asks only for series the services export."""

from __future__ import annotations

import json
import re

from controller.metrics import COUNTERS, GAUGES, REACTION
from job_scheduler.service.metrics import SERIES
from support.paths import REPO

DASHBOARD = REPO / "docs" / "grafana" / "sluice-dashboard.json"


def exported() -> set[str]:
    names = set(COUNTERS) | set(GAUGES) | set(SERIES)
    names |= {f"{REACTION[0]}_{s}" for s in ("bucket", "sum", "count")}
    return names


def test_every_panel_queries_exported_series():
    dash = json.loads(DASHBOARD.read_text())
    wanted = {"reaction latency", "rules per", "utilisation", "jobs by state", "queue",
              "q(t)"}
    titles = " | ".join(p["title"].lower() for p in dash["panels"])
    assert all(w in titles for w in wanted), titles
    for panel in dash["panels"]:
        for target in panel["targets"]:
            series = set(re.findall(r"\bsluice_[a-z_]+", target["expr"]))
            assert series and series <= exported(), (panel["title"], series - exported())
