"""The tc commands that enforce link rates and priority levels on the emulated fabric.

Why our own HTB tree instead of Mininet's TCLink: TCLink owns the root qdisc of an
interface (HTB 5: with one class for ``bw``, plus netem, which this kernel lacks), and the
priority classes must share the parent that enforces the link rate, or the rate limit and
the priority would sit in different places and the priority would have nothing to decide.

Every switch egress interface gets (see ``topologies/priority_classes.py`` for the mapping)::

    root htb 1: default <least urgent leaf>
      class 1:100  rate=ceil=link                       # the link
        class 1:1 .. 1:8  rate=guaranteed ceil=link prio 0..7   # one per priority level
    filter u32 match ip tos <DSCP<<2> 0xfc -> 1:<level+1>, one per level

HTB lends spare bandwidth to the lowest ``prio`` first, so the most urgent backlogged level
takes everything above the small guarantees; the guarantees keep lower levels (and
unmarked control traffic such as ARP and ps-lite handshakes) from starving outright.
Host interfaces only get the link rate (one HTB class): a host NIC does not obey the
fabric's priorities.

Pure functions: they return ``tc -batch`` lines (without the leading ``tc``).
"""

from __future__ import annotations

import re

from topologies import priority_classes as pc

# Each level is guaranteed this share of the link (8 levels -> 8 % in all)...
GUARANTEED_SHARE = 0.01
# ...but at least this much, so a slow link still has a usable minimum per class.
MIN_GUARANTEED_KBIT = 100
# HTB bursts: large enough for a few MTU-sized frames at these rates.
BURST = "15k"
LEAF_QUEUE_PACKETS = 200  # pfifo per level: bounded queueing delay (~50 ms at 50 Mbit/s)


def _kbit(mbit: float) -> int:
    return max(1, int(round(mbit * 1000)))


def _minor(classid: str) -> str:
    return classid.split(":", 1)[1]


def priority_tree(intf: str, rate_mbit: float, levels: int = pc.LEVELS,
                  leaf_limit: int = LEAF_QUEUE_PACKETS) -> list[str]:
    """tc batch lines: HTB root, link class, ``levels`` priority classes and DSCP filters.

    ``levels`` < 8 uses only the most urgent ``levels - 1`` levels plus the least urgent one
    (the default), keeping level 0 at the top and unmarked traffic at the bottom.
    ``leaf_limit``: packets each level's FIFO holds (a shallow-buffer baseline sets it,
    ``mininet_fabric/baselines.py``)."""
    if isinstance(leaf_limit, bool) or not isinstance(leaf_limit, int) or leaf_limit < 1:
        raise ValueError(f"leaf queue limit must be an integer >= 1 packet, got {leaf_limit!r}")
    if not 1 <= levels <= pc.LEVELS:
        raise ValueError(f"priority levels must be 1..{pc.LEVELS}, got {levels}")
    if not rate_mbit > 0:
        raise ValueError(f"link rate must be > 0 Mbit/s, got {rate_mbit}")
    used = list(range(levels - 1)) + [pc.LEAST_URGENT]
    link = _kbit(rate_mbit)
    guaranteed = max(MIN_GUARANTEED_KBIT, int(link * GUARANTEED_SHARE))
    default = _minor(pc.htb_classid(pc.LEAST_URGENT))
    lines = [
        f"qdisc add dev {intf} root handle {pc.HTB_ROOT_HANDLE} htb default {default}",
        f"class add dev {intf} parent {pc.HTB_ROOT_HANDLE} classid {pc.HTB_PARENT_CLASS} "
        f"htb rate {link}kbit ceil {link}kbit burst {BURST} cburst {BURST} quantum 1514",
    ]
    for level in used:
        cid = pc.htb_classid(level)
        lines.append(f"class add dev {intf} parent {pc.HTB_PARENT_CLASS} classid {cid} htb "
                     f"rate {guaranteed}kbit ceil {link}kbit burst {BURST} cburst {BURST} "
                     f"prio {level} quantum 1514")
        lines.append(f"qdisc add dev {intf} parent {cid} handle {level + 10:x}: "
                     f"pfifo limit {leaf_limit}")
    for level in used:
        lines.append(f"filter add dev {intf} parent {pc.HTB_ROOT_HANDLE} protocol ip prio 1 "
                     f"u32 match ip tos {pc.tos_of_level(level):#04x} 0xfc "
                     f"flowid {pc.htb_classid(level)}")
    return lines


def rate_limit(intf: str, rate_mbit: float) -> list[str]:
    """tc batch lines: a single HTB class at the link rate (host interfaces)."""
    if not rate_mbit > 0:
        raise ValueError(f"link rate must be > 0 Mbit/s, got {rate_mbit}")
    link = _kbit(rate_mbit)
    return [f"qdisc add dev {intf} root handle 1: htb default 1",
            f"class add dev {intf} parent 1: classid 1:1 htb rate {link}kbit ceil {link}kbit "
            f"burst {BURST} cburst {BURST} quantum 1514",
            f"qdisc add dev {intf} parent 1:1 handle 10: pfifo limit {LEAF_QUEUE_PACKETS}"]


_CLASS_RE = re.compile(r"^class htb (\S+) ")
_SENT_RE = re.compile(r"^\s*Sent (\d+) bytes (\d+) pkt \(dropped (\d+)")


def parse_class_stats(text: str) -> dict[str, dict[str, int]]:
    """``tc -s class show dev X`` output -> ``{classid: {bytes, packets, dropped}}``."""
    stats: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        m = _CLASS_RE.match(line)
        if m:
            current = m.group(1)
            continue
        m = _SENT_RE.match(line)
        if m and current is not None:
            stats[current] = {"bytes": int(m.group(1)), "packets": int(m.group(2)),
                              "dropped": int(m.group(3))}
            current = None
    return stats
