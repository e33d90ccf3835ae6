"""The emulated fabric that `sluice run` and the Mininet checks use: Mininet hosts and
Open vSwitch switches built from a topology description, with DSCP-driven HTB priority
classes on every switch port.

- ``fabric.Fabric``: the context manager everyone uses (global lock, cleanup, build).
- ``priority``: the tc commands (HTB rate + one class per priority level).
- ``system``: root / Open vSwitch checks and removal of a crashed run's leftovers.
- ``lock``: the machine-wide fabric lock (``/run/sluice-fabric.lock``).
"""
