"""sluice's Slurm client: typed wrappers around Slurm's command-line tools (22.05 to 24.11:
:mod:`slurm_client.versions`).

An adapter (the layer of ``ps_runtime`` and ``mininet_fabric``): the scheduler's
``job_scheduler.service.slurm_executor`` drives Slurm through it. Parsing is pure
(:mod:`slurm_client.parse`), running the commands is :mod:`slurm_client.client`.
"""

from slurm_client.client import SlurmClient, SlurmCommandError, SlurmError, SlurmUnavailable
from slurm_client.parse import (Component, JobInfo, Submission, SwitchInfo, expand_hostlist,
                                job_outcome)
from slurm_client.nodes import NodeInfo, ParseError
from slurm_client.gres import gres_gpus
from slurm_client.site import SiteOptions
from slurm_client.versions import SlurmVersion, UnsupportedSlurm

__all__ = ["SlurmClient", "SlurmCommandError", "SlurmError", "SlurmUnavailable", "Component",
           "JobInfo", "NodeInfo", "ParseError", "Submission", "SwitchInfo", "expand_hostlist",
           "gres_gpus", "job_outcome", "SiteOptions", "SlurmVersion", "UnsupportedSlurm"]
