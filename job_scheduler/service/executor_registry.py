"""The one list of executors (what runs a started job), as ``policies/registry.py`` is for
policies: name, one-line summary, options type, builder and capacity source.

``sluice scheduler --executor`` (its choices and help), :class:`~job_scheduler.service.app.
ServiceConfig`'s check and the service's wiring (``app.build_service``) read it. Every
registered executor is built at start, chosen or not, so that jobs a previous run started
with another one are still polled and reconciled; only the chosen one is checked
(``check``, e.g. Slurm must answer) and may own the capacity. A new executor is one
:func:`register` call (here, or in its own module) and its module.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from sluice_common.registry import Registry

if TYPE_CHECKING:
    from job_scheduler.core.estimator import Estimator
    from topologies import Topology

# Before each decision: take from the cluster state what the executor's resource manager
# says is not free (SchedulerService's ``capacity``).
CapacityFn = Callable[[Any, Any], None]


@dataclass(frozen=True)
class ExecutorContext:
    """What a builder may read: the service's configuration (app.ServiceConfig, which
    reads this registry) and what it loaded."""
    config: Any
    topology: Topology
    estimator: Estimator
    db_path: Path
    chosen: bool           # this executor is ``--executor``: check it can run jobs
    runs: Path | None = None   # its run directories' root (ExecutorKind.runs_suffix)


@dataclass(frozen=True)
class ExecutorKind:
    name: str
    summary: str                                         # one clause, for help texts
    # (context, options or None) -> the executor (its ``kind`` is ``name``); with
    # ``context.chosen`` it checks that it can run jobs (InputError, exit 2, otherwise)
    build: Callable[[ExecutorContext, Any], Any]
    options_type: type | None = None
    # (config, topology) -> an ``options_type`` value from the service's configuration
    options: Callable[[Any, Topology], Any] | None = None
    # the chosen executor -> its capacity source (None: the topology is the truth)
    capacity: Callable[[Any], CapacityFn | None] = lambda executor: None
    runs_suffix: str | None = None      # its run directories: beside the store, this suffix
    starts_nothing: bool = False        # jobs only pretend to run (said at start)

    def runs(self, db_path: Path) -> Path | None:
        """The root of its run directories beside the job store ``db_path``."""
        return None if self.runs_suffix is None else \
            db_path.with_name(db_path.name + self.runs_suffix)

    def make(self, context: ExecutorContext, options: Any = None) -> Any:
        """The executor; chosen, its options from the configuration unless given."""
        if options is None and self.options is not None and context.chosen:
            options = self.options(context.config, context.topology)
        if options is not None and self.options_type is not None \
                and not isinstance(options, self.options_type):
            raise TypeError(f"executor {self.name}: options must be "
                            f"{self.options_type.__name__}, got {type(options).__name__}")
        executor = self.build(replace(context, runs=self.runs(context.db_path)), options)
        if getattr(executor, "kind", None) != self.name:
            raise TypeError(f"executor {self.name}: its builder made a "
                            f"{getattr(executor, 'kind', None)!r} executor")
        return executor


_REGISTRY: Registry[ExecutorKind] = Registry("executor")
register, unregister, names, kind, help_text = (
    _REGISTRY.register, _REGISTRY.unregister, _REGISTRY.names, _REGISTRY.get,
    _REGISTRY.help_text)


def _simulated(context: ExecutorContext, options: Any):
    from job_scheduler.service.executors import SimulatedExecutor, estimated_duration

    return SimulatedExecutor(estimated_duration(context.topology, context.estimator),
                             context.config.time_factor)


def _local(context: ExecutorContext, options: Any):
    from job_scheduler.service.executors import LocalExecutor, template_command

    command = context.config.local_command
    # (no --local-command: `sluice train`, the PS runtime)
    return LocalExecutor(context.runs, command and template_command(command))


def _slurm(context: ExecutorContext, options: Any):
    from job_scheduler.service import slurm_kind

    return slurm_kind.build(context, options)


def _slurm_options(config, topology: Topology):
    from job_scheduler.service import slurm_kind

    return slurm_kind.options(config, topology)


def _slurm_options_type() -> type:
    from job_scheduler.service.slurm_executor import SlurmJobOptions

    return SlurmJobOptions


register(ExecutorKind(
    "simulated", "the job only pretends to run - no process is started - and is marked "
    "finished after its estimated C(n) * --time-factor seconds", _simulated,
    starts_nothing=True))
register(ExecutorKind(
    "local", "real PS jobs on this machine (`sluice train`, or --local-command)", _local,
    runs_suffix=".runs"))
SLURM = "slurm"      # the name those who drive a Slurm cluster themselves (demo, bench) ask for
register(ExecutorKind(
    SLURM, "each job one heterogeneous Slurm job on the decided hosts (Slurm's CLI, "
    "SLURM_CONF from the environment), Slurm's nodes the truth for capacity", _slurm,
    options_type=_slurm_options_type(), options=_slurm_options,
    capacity=lambda executor: executor.capacity, runs_suffix=".slurm-runs"))
