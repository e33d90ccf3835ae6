"""The emulated fabric: Mininet hosts and Open vSwitch switches built from a topology
description, with DSCP-driven HTB priority classes on every switch port.

- ``fabric.Fabric``: the context manager everyone uses (global lock, cleanup, build).
- ``priority``: the tc commands (HTB rate + one class per priority level).
- ``priority_check``: two iperf3 flows into one bottleneck, high vs low class.
- ``system``: root / Open vSwitch checks and removal of a crashed run's leftovers.
- ``lock``: the machine-wide fabric lock (``/run/sluice-fabric.lock``).
- ``cli``: ``sluice fabric check|up|clean``.
"""
