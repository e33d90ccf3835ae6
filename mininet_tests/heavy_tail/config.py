"""The heavy-tail experiment's options, built once by its command line (frozen), and the
facts a run measures about its own conditions (congestion control, idle RTT, wall time)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mininet_fabric import baselines as bl

MIXES = ("heavy-tail", "same-start")
COMPUTE = ("profile", "share")
STARTS = ("warm", "cold")
CONGESTION_CONTROLS = ("machine", "bbr", "cubic")
BASELINE_SETS = ("none", "all")
# Host TCP variants for the capacity investigation: "kernel" leaves the kernel defaults;
# "starved-ok" lets a flow that priority starved resume quickly once it is released:
# linear (not exponential) RTO backoff while it has few packets in flight, and RTO never
# above 1 s.
HOST_TCP = {"kernel": {},
            "starved-ok": {"net.ipv4.tcp_thin_linear_timeouts": "1",
                           "net.ipv4.tcp_rto_max_ms": "1000"}}
# The heavy-tail mix's defaults (mininet_tests.heavy_tail.mix): batches per job 10..1000
# times SCALE, bytes per batch log-uniform on [BYTES_LO, 10 x BYTES_LO], JOBS per seed; the
# rack uplinks shaped at UPLINK_MBPS (a host with two cores carries about 12 Mbit/s in all:
# docs/design.md, "The test machine")
SCALE, BYTES_LO, JOBS, UPLINK_MBPS = 0.1, 150_000, 16, 12.0


@dataclass(frozen=True)
class HeavyTailConfig:
    mix: str = "heavy-tail"
    load: float = 0.7                      # offered bottleneck load, in (0, 1)
    seeds: tuple[int, ...] = (1, 2, 3, 4, 5)
    jobs: int = JOBS
    scale: float = SCALE
    bytes_lo: int = BYTES_LO
    compute: str = "profile"               # the device profile's compute, or a comm share
    start: str = "warm"                    # PS processes pre-started, or cold per job
    uplink_mbps: float | None = UPLINK_MBPS   # None: the topology's own 50 Mbit/s
    job_timeout_s: float = 400.0
    host_tcp: str = "kernel"
    baselines: str = "none"                # "all": every registered baseline as a mode too
    only_modes: tuple[str, ...] = ()       # run only these modes (off always); () all
    cc: str = "machine"                    # the hosts' congestion control
    # the queue the default rule's verdict is judged on (mininet_tests.check_bounds), named
    # before the run: a switch-queue baseline, "off" the deep FIFO (the rule's own mode)
    rule_queue: str = "off"
    out: Path | None = None

    def __post_init__(self):
        problems = []
        for field, value, allowed in (("mix", self.mix, MIXES), ("compute", self.compute, COMPUTE),
                                      ("start", self.start, STARTS),
                                      ("cc", self.cc, CONGESTION_CONTROLS),
                                      ("baselines", self.baselines, BASELINE_SETS),
                                      ("host_tcp", self.host_tcp, tuple(HOST_TCP))):
            if value not in allowed:
                problems.append(f"{field} must be one of {', '.join(allowed)}, got {value!r}")
        if self.rule_queue not in bl.queues():
            problems.append(f"rule_queue must be one of {', '.join(bl.queues())}, "
                            f"got {self.rule_queue!r}")
        if not 0 < self.load < 1:
            problems.append(f"load must be in (0, 1), got {self.load}")
        if not self.seeds or self.jobs < 1:
            problems.append("at least one seed and one job per seed")
        if self.uplink_mbps is not None and not self.uplink_mbps > 0:
            problems.append(f"uplink_mbps must be > 0 (None: the topology's), got {self.uplink_mbps}")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def lo_bytes(self) -> float:
        """The smallest possible job's bytes per direction (the size buckets' unit)."""
        return 10 * self.scale * self.bytes_lo


@dataclass(frozen=True)
class RunFacts:
    """What a run found out about its own conditions."""

    cc: str | None = None           # the hosts' congestion control, resolved
    rtt_s: float | None = None      # the idle round trip worker -> PS
    wall_s: float = 0.0
    shallow_sweep: str | None = None  # where the sweep that chose off-shallow's depth is
