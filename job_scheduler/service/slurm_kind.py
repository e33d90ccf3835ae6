"""The Slurm executor's registry entry (job_scheduler/service/executor_registry.py): its
options from the service's configuration, and its builder."""

from __future__ import annotations

import logging

from job_scheduler.service.slurm_executor import SlurmExecutor, SlurmJobOptions
from job_scheduler.service.slurm_names import store_tag
from sluice_common.errors import option_error

log = logging.getLogger("sluice.scheduler")


def options(config, topology) -> SlurmJobOptions:
    """``--slurm-*``: how jobs train and the site's policy, checked (InputError naming
    the file of the fabric addresses)."""
    from job_scheduler.service.slurm_addresses import load_fabric_addresses
    from job_scheduler.service.users import load_users

    return SlurmJobOptions(
        compute=config.slurm_compute, batches=config.slurm_batches,
        compute_s=config.slurm_compute_s, bytes_per_batch=config.slurm_bytes_per_batch,
        bw_scale=topology.emulation_bw_scale, profile=config.profile,
        partition=config.slurm_partition, site=config.slurm_site(),
        fabric_addresses=load_fabric_addresses(config.slurm_fabric_addresses),
        pending_timeout=config.slurm_pending_timeout,
        signal_s=config.slurm_signal_s or None,
        poll_interval=config.slurm_poll_interval,
        # the Unix users jobs run as (--users): checked at start, as each of them
        users=tuple(sorted(set(load_users(config.users).values()))) if config.users else ())


def build(context, job_options: SlurmJobOptions | None) -> SlurmExecutor:
    """The Slurm executor (``context``: executor_registry.ExecutorContext); chosen, Slurm
    must answer and know every host of the topology at its address, else exit 2 naming
    the command that failed or the hosts. Not chosen it is still built: a previous run's Slurm jobs are reconciled by their Slurm job id."""
    from slurm_client import SlurmClient, SlurmError, UnsupportedSlurm

    executor = SlurmExecutor(SlurmClient(), context.topology, context.runs,
                             job_options or SlurmJobOptions(), tag=store_tag(context.db_path))
    if context.chosen:
        try:
            nodes = executor.check()
        except (SlurmError, UnsupportedSlurm) as err:
            raise option_error("executor", f"Slurm is not usable: {err}")
        log.info("Slurm: %d node(s), %d GPU(s) configured, %d allocated", len(nodes),
                 sum(n.gpus for n in nodes), sum(n.gpus_used for n in nodes))
    return executor
