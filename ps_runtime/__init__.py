"""Real parameter-server jobs: MXNet ps-lite (KVStore ``dist_sync``) transport, torch compute.

- ``plan``: placements (host, IP) and the fixed per-job port plan -> exact endpoints.
- ``runners``: start a process locally or inside a Mininet host (one interface).
- ``launcher``: ``PSJob`` starts scheduler/servers/workers, watches them, fails fast and
  names the dead process, stops everything (process groups, atexit, child watchdogs).
- ``worker`` / ``server``: the processes (``python -m ps_runtime.worker|server``).
- ``progress``: non-blocking, rate-limited progress reports to the SDN controller.
- ``models`` / ``data``: ResNet18, AlexNet, VGG16, GoogLeNet, smallcnn; synthetic data.
- ``profiler`` + ``cli``: ``sluice profile`` (Cost_bat(1), alpha(b)) and ``sluice train``.
"""
