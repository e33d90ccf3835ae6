"""sluice: application-aware scheduling of parameter-server training jobs.

The command-line entry point lives in :mod:`sluice.cli`; the components are the
top-level packages ``job_scheduler``, ``controller``, ``ps_runtime``, ``topologies`` and
``mininet_tests``.
"""

__version__ = "0.1.0"
