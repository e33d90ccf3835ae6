"""Experiments and checks on the emulated fabric (the harness itself is ``mininet_fabric``).

- ``priority_check``: two iperf3 flows into one bottleneck, high vs low class.
- ``cli``: ``sluice fabric check|up|clean``.
- ``experiment_*``: the experiment scripts whose figures bench/RESULTS.md records.
"""
