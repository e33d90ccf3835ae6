"""What ``sluice run`` and ``sluice demo`` are asked, as one frozen value: built once from
the command line (``end_to_end.cli``) and handed down; nothing below the CLI reads the
argparse namespace. Its checks raise ``ValueError("field: message")``; only the CLI
turns a field into its flag."""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.job_rank import DEFAULT_RULE
from job_scheduler.mechanisms import MechanismOptions
from job_scheduler.policies import DEFAULT_LAS_THRESHOLDS, POLICY_NAMES, REGISTRY


@dataclass(frozen=True)
class RunConfig:
    jobs: str                            # job YAML
    topology: str                        # built-in name or YAML path
    policy: str = "lyapunov"
    priority: str = "on"                 # on | off: flow priority by the rank rule
    rank: str = DEFAULT_RULE
    out: str | None = None               # report directory
    slot: float = 1.0                    # seconds
    batches: int | None = None           # per worker; None: epochs * dataset / (batch * n)
    input_size: int = 64
    job_timeout: float = 900.0           # seconds
    compute: str = "emulated"            # torch | emulated (resolved)
    profile: str | None = None
    compute_info: dict = field(default_factory=dict, compare=False)
    seed: int = 0
    las_threshold: float = DEFAULT_LAS_THRESHOLDS[0]   # GPU-seconds
    mechanisms: MechanismOptions = MechanismOptions()
    dry_run: bool = False

    def __post_init__(self):
        checks = [
            ("policy", self.policy in POLICY_NAMES,
             f"unknown policy {self.policy!r} (known: {', '.join(POLICY_NAMES)})"),
            ("priority", self.priority in ("on", "off"),
             f"must be 'on' or 'off', got {self.priority!r}"),
            ("slot", 0 < self.slot <= 600, f"must be in (0, 600] seconds, got {self.slot}"),
            ("batches", self.batches is None or self.batches >= 1,
             f"must be >= 1, got {self.batches}"),
            ("input_size", 16 <= self.input_size <= 512, f"must be 16..512, got {self.input_size}"),
            ("job_timeout", self.job_timeout > 0, f"must be > 0, got {self.job_timeout}"),
            ("las_threshold", self.las_threshold > 0, f"must be > 0, got {self.las_threshold}")]
        for name, ok, message in checks:
            if not ok:
                raise ValueError(f"{name}: {message}")
        self.mechanisms.check(self.policy)

    @property
    def can_suspend(self) -> bool:
        """Does the policy suspend running jobs (las, sluice)?"""
        return REGISTRY[self.policy].preemptive

    def make_policy(self):
        """A fresh policy object (policies keep per-run state: one per pass)."""
        from job_scheduler.policies import make_policy

        return make_policy(self.policy, seed=self.seed, las_thresholds=(self.las_threshold,))
