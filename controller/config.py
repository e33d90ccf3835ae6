"""The controller's options as one frozen, typed object, checked once when it is built.

``sluice controller`` (controller/cli.py) builds it from its command line; tests and
benches build it directly. A bad value raises an :class:`InputError` naming the field
(source :data:`CONFIG_SOURCE`): only the CLI knows which flag sets which field and says
so. Options that need the outside world to check (a certificate loads, a port is free)
are the CLI's to check; here only values are judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sluice_common import job_rank, rank_rules
from controller.pods import PodScope
from controller.rules import ENFORCE_MODES
from sluice_common.errors import InputError
from topologies import Topology
from topologies.priority_classes import LEVELS

CONFIG_SOURCE = "controller config"
LOG_LEVELS = ("debug", "info", "warning", "error")


def _bad(field: str, reason: str) -> InputError:
    return InputError(CONFIG_SOURCE, reason, field=field)


@dataclass(frozen=True)
class ControllerConfig:
    topology: Topology
    levels: int = LEVELS
    enforce: str = "dscp"
    # read by the northbound guard (controller.auth), not by the service
    admin_token: str = ""
    rate_per_s: float = 1000.0       # progress reports per job per second (token bucket)
    state_file: Path | None = None
    # a rule of sluice_common.rank_rules to start with; None: the rule
    # saved in the state file (the last one chosen, also at run time), else the default.
    # The rule in force is the service's (POST /rank changes it), not this field.
    rank: str | None = rank_rules.DEFAULT_RULE
    attained_base_bytes: float = job_rank.ATTAINED_BASE_BYTES
    attained_factor: float = job_rank.ATTAINED_FACTOR
    # the hint in each progress report's answer (controller/report_hints.py); off: no
    # hint, every client reports as often as it likes
    report_hints: bool = True
    # keep the DSCP hosts give their packets instead of re-marking it to 0 (end-host
    # tagging such as PIAS; any host can then buy priority: controller.rules.admission_rules)
    trust_host_dscp: bool = False
    report_staleness_s: float = 1.0     # progress, and the jobs others are measured against
    report_heartbeat_s: float = 120.0    # every other job
    # the process around the service (controller/cli.py, controller/app.py)
    ofp_host: str = "127.0.0.1"
    ofp_port: int = 6653
    api_host: str = "127.0.0.1"
    api_port: int = 8080
    stats_interval: float = 1.0      # seconds between port-stats polls
    echo_interval: float = 0.5       # seconds between OpenFlow echo requests
    echo_misses: int = 3             # unanswered echoes before a switch is dead (0: never)
    api_tls: tuple[str, str] | None = None              # (cert, key) of the HTTPS API
    ofp_tls: tuple[str, ...] = ()    # os-ken's certificate options for the OpenFlow channel
    log_level: str = "info"
    # a controller per pod (controller/pods.py): what this one owns, and the other pods'
    # prefixes; ``topology`` is then the scope's (pods.scoped_topology). None: everything
    scope: PodScope | None = None

    def __post_init__(self) -> None:
        if self.enforce not in ENFORCE_MODES:
            raise _bad("enforce", f"must be one of {', '.join(ENFORCE_MODES)}")
        if not 1 <= self.levels <= LEVELS:
            raise _bad("levels", f"must be 1..{LEVELS}, got {self.levels}")
        if self.rank is not None and self.rank not in rank_rules.names():
            raise _bad("rank", f"must be one of {', '.join(rank_rules.names())}, "
                       f"got {self.rank!r}")
        if not self.attained_base_bytes > 0 or not self.attained_factor > 1:
            raise _bad("attained_base_bytes/attained_factor",
                       "need a base > 0 and a factor > 1")
        for field in ("report_staleness_s", "report_heartbeat_s"):
            if not 0.05 <= getattr(self, field) <= 3600:
                raise _bad(field, "must be 0.05..3600 seconds")
        if not self.rate_per_s > 0:
            raise _bad("rate_per_s", "must be > 0")
        for field in ("ofp_port", "api_port"):
            if not 0 < getattr(self, field) < 65536:
                raise _bad(field, f"port must be 1..65535, got {getattr(self, field)!r}")
        for field in ("stats_interval", "echo_interval"):
            if not 0.05 <= getattr(self, field) <= 60:
                raise _bad(field, "must be 0.05..60 seconds")
        if not 0 <= self.echo_misses <= 100:
            raise _bad("echo_misses", "must be 0..100")
        if self.log_level not in LOG_LEVELS:
            raise _bad("log_level", f"must be one of {', '.join(LOG_LEVELS)}")
