"""PIAS's packet tagging at the end hosts, as iptables rules (pure: text, no I/O).

PIAS tags at the sender: a flow's packets carry the most urgent priority until the flow
has sent ``alpha_1`` bytes, the next until ``alpha_2``, and so on (the thresholds:
:mod:`mininet_fabric.pias_thresholds`); the switches only serve strict priority by the
tag. Here each emulated host gets, in its own network namespace, a mangle-table chain on
OUTPUT that sets the DSCP of every TCP packet it sends from conntrack's byte counters:

- packets of a connection's original direction (the side that connected: ps-lite sends
  only over the connections it opened) by the bytes sent in that direction
  (``-m connbytes --connbytes-dir original --connbytes-mode bytes``);
- packets of the reply direction (the ACK stream) by the bytes sent in the reply
  direction, so an ACK stream stays urgent while it is small;
- last, any packet that carries no payload (IP length up to 80 bytes: 20 IP + at most 60
  TCP header) gets the most urgent level: PIAS counts a flow's payload bytes, so pure
  ACKs and SYNs never push a flow down, and an ACK stream is never demoted below the
  data it clocks (ACKs are ~2 % of the bytes they acknowledge; without this rule a
  150 MB connection's ACKs would be demoted after ~9 MB of data, the priority inversion
  the controller's ACK rules exist to avoid, controller/rules.py).

connbytes counts whole IP packets (headers included) and includes the packet being
sent. Levels map to DSCP as everywhere in sluice (``topologies.priority_classes``): level
k is served by HTB class k of every switch egress; the switches keep a host's DSCP only
when the controller trusts host marking (``sluice controller --trust-host-dscp``).
"""

from __future__ import annotations

from topologies import priority_classes as pc

CHAIN = "SLUICE_PIAS"
# IP total length of a TCP packet with no payload: 20 bytes of IP, up to 60 of TCP header
NO_PAYLOAD_MAX_LEN = 80


def level_ranges(thresholds: tuple[int, ...]) -> list[tuple[int, int | None]]:
    """Per level, the byte counts ``(first, last)`` (inclusive; last None: open) it covers:
    level 0 below the first threshold, level k from threshold k to the next."""
    if any(t <= 0 for t in thresholds) or list(thresholds) != sorted(set(thresholds)):
        raise ValueError(f"thresholds must be positive and strictly increasing, got {thresholds}")
    if len(thresholds) >= pc.LEVELS:
        raise ValueError(f"at most {pc.LEVELS - 1} thresholds ({pc.LEVELS} levels), "
                         f"got {len(thresholds)}")
    edges = [0, *thresholds]
    return [(lo, (edges[k + 1] - 1) if k + 1 < len(edges) else None)
            for k, lo in enumerate(edges)]


def level_of_bytes(sent: int, thresholds: tuple[int, ...]) -> int:
    """The level a packet is tagged with after its direction has sent ``sent`` bytes."""
    return sum(1 for t in thresholds if sent >= t)


def tagging_rules(thresholds: tuple[int, ...]) -> str:
    """An ``iptables-restore --noflush`` input that creates :data:`CHAIN` in the mangle
    table and sends every outgoing TCP packet through it."""
    lines = ["*mangle", f":{CHAIN} - [0:0]", f"-A OUTPUT -p tcp -j {CHAIN}"]
    for direction, ctdir in (("original", "ORIGINAL"), ("reply", "REPLY")):
        for level, (lo, hi) in enumerate(level_ranges(thresholds)):
            span = f"{lo}:{hi}" if hi is not None else f"{lo}"
            lines.append(f"-A {CHAIN} -m conntrack --ctdir {ctdir} -m connbytes "
                         f"--connbytes-dir {direction} --connbytes-mode bytes "
                         f"--connbytes {span} -j DSCP --set-dscp {pc.dscp_of_level(level)}")
    lines.append(f"-A {CHAIN} -m length --length 0:{NO_PAYLOAD_MAX_LEN} -j DSCP "
                 f"--set-dscp {pc.dscp_of_level(pc.MOST_URGENT)}")
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


def removal_commands() -> list[str]:
    """Shell commands that remove what :func:`tagging_rules` made (each may fail
    harmlessly when it is not there)."""
    return [f"iptables -t mangle -D OUTPUT -p tcp -j {CHAIN}",
            f"iptables -t mangle -F {CHAIN}", f"iptables -t mangle -X {CHAIN}"]
