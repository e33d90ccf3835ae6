"""sluice: application-aware scheduling of parameter-server training jobs.

The command-line entry point lives in :mod:`sluice.cli`; the components are the
top-level packages (bottom to top, see docs/design.md) ``sluice_common``, ``topologies``,
``controller``, ``ps_runtime``, ``mininet_fabric``, ``job_scheduler``, ``end_to_end`` and
``mininet_tests``.
"""

__version__ = "0.1.0"
