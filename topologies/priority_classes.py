"""The one mapping between sluice priority levels, DSCP values, HTB classes and OVS queues.

The controller marks a flow's urgency in the packet (``set_field ip_dscp``) and every
switch egress port of the fabric sorts packets into HTB classes by that DSCP value
(``tc filter ... u32 match ip tos <tos> 0xfc``). Both sides import this module, so they
cannot drift apart.

- ``LEVELS`` = 8 priority levels; **level 0 is the most urgent**, level 7 the least.
- DSCP of level L is the class selector CS(7 - L): level 0 -> DSCP 56 (CS7) ... level 7
  -> DSCP 0 (CS0). Unmarked traffic (DSCP 0) therefore lands in the least urgent level,
  so only flows the controller chose to mark can jump the queue.
- The IP TOS byte is DSCP << 2 (the two ECN bits stay free), which is what iperf3 ``-S``
  and the u32 ``ip tos`` match take.
- HTB class of level L is ``1:<L+1>`` (hex minor). That is exactly where a kernel-datapath
  OVS puts ``set_queue:L`` (skb->priority 1:(L+1)), so the same tree serves both ways of
  enforcing priority: DSCP + u32 (userspace datapath, where set_queue is ignored) and
  OpenFlow queues (kernel datapath / hardware).

Pure constants and functions: no I/O.
"""

from __future__ import annotations

LEVELS = 8
MOST_URGENT = 0
LEAST_URGENT = LEVELS - 1

HTB_ROOT_HANDLE = "1:"
# The parent class holding the link rate; its minor must not collide with a leaf (1..8).
HTB_PARENT_CLASS = "1:100"


def _check(level: int) -> int:
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level < LEVELS:
        raise ValueError(f"priority level must be an integer in 0..{LEVELS - 1}, got {level!r}")
    return level


def dscp_of_level(level: int) -> int:
    """DSCP value (0..63) the controller writes for ``level``."""
    return 8 * (LEAST_URGENT - _check(level))


def tos_of_level(level: int) -> int:
    """IP TOS byte (DSCP << 2) for ``level``; what iperf3 -S / IP_TOS / u32 ``ip tos`` use."""
    return dscp_of_level(level) << 2


def level_of_dscp(dscp: int) -> int:
    """The level a packet with this DSCP is served at. DSCP values that are not one of the
    eight class selectors fall into the least urgent level (the HTB default class)."""
    if dscp % 8 == 0 and 0 <= dscp < 8 * LEVELS:
        return LEAST_URGENT - dscp // 8
    return LEAST_URGENT


def htb_classid(level: int) -> str:
    """HTB leaf class of ``level`` under root ``1:`` (minor = level + 1, hex)."""
    return f"1:{_check(level) + 1:x}"


def queue_id_of_level(level: int) -> int:
    """OpenFlow queue id for ``set_queue`` (kernel-datapath OVS maps queue q to 1:(q+1))."""
    return _check(level)


def table() -> list[dict[str, int | str]]:
    """The whole mapping, for documentation and ``sluice fabric`` output."""
    return [{"level": lv, "dscp": dscp_of_level(lv), "tos": tos_of_level(lv),
             "htb_class": htb_classid(lv), "queue": queue_id_of_level(lv)}
            for lv in range(LEVELS)]
