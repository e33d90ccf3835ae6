"""The switch-egress queue disciplines a network engineer compares priority against (pure).

Four baselines, each a mode of the heavy-tail experiment (``off*``: no job registered,
every packet unmarked, so all of it lands in the least urgent level), and the three
queues usable under the ranking rules too (``<rule>+<baseline>``: the controller marks
jobs into the priority levels, and each level's queue is the baseline's):

- ``off``: today's tree (``priority.priority_tree``): per level one deep FIFO of
  ``priority.LEAF_QUEUE_PACKETS`` (200) packets, about 200 ms at 12 Mbit/s.
- ``off-shallow``: the same tree with a FIFO of the depth a sweep chose at the run's load
  and congestion control (``mininet_fabric.fifo_depths``, :func:`swept_shallow`), else
  about twice the bandwidth-delay product (:func:`shallow_limit_packets`), never below one
  HTB burst (the shaper releases up to
  ``priority.BURST`` at once, so a queue shorter than that drops inside a burst).
- ``off-fair``: per-flow fair queueing, built from what this kernel has (HTB, pfifo and
  the u32 filter; no fq_codel, no sfq): each level is an inner HTB class whose children
  are ``buckets`` leaf classes at the level's HTB priority, one FIFO each, behind a u32
  hash table on the transport ports. HTB serves same-priority leaves by deficit round
  robin with a 1514-byte quantum, so backlogged buckets share the link packet by packet
  (DRR, Shreedhar & Varghese 1995). Each bucket holds ``FAIR_BUCKET_PACKETS`` (100), the
  per-flow limit of Linux's ``fq`` (``flow_limit``): a deep bucket delays only its own
  flow, and a bucket of one HTB burst (11 packets) drops so often (14,809
  retransmissions a heavy-tail run, 794-841 with 100) that it is a weaker baseline than
  the deep FIFO (bench/RESULTS.md, "Fabric and network priority").

The hash: u32 can only take masked bits of one 32-bit word (no real hash function). The
word at offset 20 of an option-less IPv4 header is ``source port << 16 | destination
port``; the mask keeps bits 3-8 of the destination port (64 buckets). A job's ps-lite
ports lie in a block of 40 (``ps_runtime.plan.BLOCK``) and consecutive jobs' blocks are
40 apart, so the pushes of up to 13 consecutive jobs, and their pulls, fall in different
buckets; ephemeral ports (ACK streams, connections back) spread uniformly.

- ``pias``: PIAS's multi-level feedback queue (Bai et al., NSDI 2015), application-
  agnostic: each host tags every TCP packet it sends by the bytes its connection has sent
  (iptables connbytes -> DSCP, :mod:`mininet_fabric.pias`), with demotion thresholds
  derived by PIAS's method from the workload's flow-size distribution and load
  (:mod:`mininet_fabric.pias_thresholds`); the switches trust the hosts' DSCP (the
  controller's ``--trust-host-dscp``) and serve the levels by strict priority, a deep
  FIFO each (the ``off`` tree). A scheduler of its own, not a queue: no
  ``<rule>+pias`` mode.

All functions return ``tc -batch`` lines (without the leading ``tc``), like priority.py.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

from mininet_fabric import pias, priority
from mininet_fabric.pias_thresholds import SizeMixture, derive_thresholds
from sluice_common.registry import Registry
from topologies import priority_classes as pc

MTU_BYTES = 1514
FAIR_BUCKETS = 64
FAIR_BUCKET_PACKETS = 100        # a bucket's FIFO: Linux fq's default per-flow limit
# u32 hashkey: bits 3-8 of the destination port in the ports word (offset 20)
FAIR_HASH_MASK = 0x000001F8
FAIR_HASH_AT = 20


def split_mode(mode: str, rules: tuple[str, ...]) -> tuple[str | None, str]:
    """An experiment mode -> (ranking rule or None, baseline): ``off-fair`` ->
    (None, ``off-fair``); ``remaining`` -> (``remaining``, ``off``);
    ``remaining+off-shallow`` -> (``remaining``, ``off-shallow``)."""
    if mode in _REGISTRY:
        return None, mode
    rule, sep, baseline = mode.partition("+")
    if rule not in rules or (sep and baseline not in queues()):
        raise ValueError(f"mode must be one of {names()}, a rule ({', '.join(rules)}) or "
                         f"RULE+BASELINE (BASELINE one of {queues()}), got {mode!r}")
    return rule, baseline if sep else "off"


def burst_packets() -> int:
    """Packets of one HTB burst (``priority.BURST``, e.g. '15k')."""
    text = priority.BURST.lower()
    factor = 1024 if text.endswith("k") else 1
    return math.ceil(int(text.rstrip("k")) * factor / MTU_BYTES)


def shallow_limit_packets(rate_mbit: float, rtt_s: float) -> int:
    """About twice the bandwidth-delay product of a ``rate_mbit`` link with round trip
    ``rtt_s``, in full-size packets; at least one HTB burst."""
    if not rate_mbit > 0 or not rtt_s >= 0:
        raise ValueError(f"rate must be > 0 and rtt >= 0, got {rate_mbit}, {rtt_s}")
    bdp = rate_mbit * 1e6 / 8 * rtt_s
    return max(burst_packets(), math.ceil(2 * bdp / MTU_BYTES))


def fair_hash_mask(buckets: int) -> int:
    """The u32 hashkey mask for ``buckets`` (a power of two up to 64): the destination
    port's bits from bit 3 up (u32 shifts the masked word down to its lowest set bit)."""
    mask = (buckets - 1) << 3
    if buckets & (buckets - 1) or not 2 <= buckets or mask & ~FAIR_HASH_MASK:
        raise ValueError(f"buckets must be a power of two in 2..64, got {buckets}")
    return mask


def fair_bucket(dst_port: int, buckets: int = FAIR_BUCKETS) -> int:
    """The bucket the u32 hash puts a packet with destination port ``dst_port`` in."""
    return (dst_port & fair_hash_mask(buckets)) >> 3


def _bucket_minor(level: int, bucket: int) -> int:
    return 0x1000 + level * 0x100 + bucket


def fair_tree(intf: str, rate_mbit: float, levels: int = pc.LEVELS,
              buckets: int = FAIR_BUCKETS, bucket_limit: int | None = None) -> list[str]:
    """tc batch lines: the priority tree whose every level is fair-queued over
    ``buckets`` HTB leaf classes (DRR) behind a u32 hash table on the ports; each bucket a
    FIFO of ``bucket_limit`` packets (default ``FAIR_BUCKET_PACKETS``). Unhashable packets (not
    IPv4: ARP) go to the least urgent level's bucket 0 (the HTB default must be a leaf)."""
    if not 1 <= levels <= pc.LEVELS:
        raise ValueError(f"priority levels must be 1..{pc.LEVELS}, got {levels}")
    if not rate_mbit > 0:
        raise ValueError(f"link rate must be > 0 Mbit/s, got {rate_mbit}")
    fair_hash_mask(buckets)
    limit = FAIR_BUCKET_PACKETS if bucket_limit is None else bucket_limit
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"bucket queue limit must be an integer >= 1, got {limit!r}")
    used = list(range(levels - 1)) + [pc.LEAST_URGENT]
    link = max(1, int(round(rate_mbit * 1000)))
    guaranteed = max(priority.MIN_GUARANTEED_KBIT, int(link * priority.GUARANTEED_SHARE))
    # a leaf under its own rate sends whatever its parents have left: keep the buckets'
    # guarantees (summed) within the level's
    per_bucket = max(1, guaranteed // buckets)
    burst = priority.BURST
    default = f"{_bucket_minor(pc.LEAST_URGENT, 0):x}"
    root, parent = pc.HTB_ROOT_HANDLE, pc.HTB_PARENT_CLASS
    lines = [f"qdisc add dev {intf} root handle {root} htb default {default}",
             f"class add dev {intf} parent {root} classid {parent} htb rate {link}kbit "
             f"ceil {link}kbit burst {burst} cburst {burst} quantum {MTU_BYTES}"]
    hmask = fair_hash_mask(buckets)
    for level in used:
        cid = pc.htb_classid(level)
        lines.append(f"class add dev {intf} parent {parent} classid {cid} htb rate "
                     f"{guaranteed}kbit ceil {link}kbit burst {burst} cburst {burst} "
                     f"prio {level} quantum {MTU_BYTES}")
        for b in range(buckets):
            minor = _bucket_minor(level, b)
            lines.append(f"class add dev {intf} parent {cid} classid 1:{minor:x} htb rate "
                         f"{per_bucket}kbit ceil {link}kbit burst {burst} cburst {burst} "
                         f"prio {level} quantum {MTU_BYTES}")
            lines.append(f"qdisc add dev {intf} parent 1:{minor:x} handle {minor:x}: "
                         f"pfifo limit {limit}")
    for level in used:
        lines.append(f"filter add dev {intf} parent {root} protocol ip prio 1 u32 match ip "
                     f"tos {pc.tos_of_level(level):#04x} 0xfc flowid {pc.htb_classid(level)}")
    for level in used:
        # inside the level: the hash table, one entry per bucket, the hashing filter,
        # then a catch-all (an inner class with no match would fall to HTB's direct queue)
        cid, ht = pc.htb_classid(level), f"{0x100 + level:x}"
        lines.append(f"filter add dev {intf} parent {cid} protocol ip prio 1 handle {ht}: "
                     f"u32 divisor {buckets}")
        for b in range(buckets):
            lines.append(f"filter add dev {intf} parent {cid} protocol ip prio 1 u32 "
                         f"ht {ht}:{b:x}: match u32 0 0 flowid 1:{_bucket_minor(level, b):x}")
        # (no "ht 800::": u32 hash tables are shared by the qdisc's filter chains, so this
        # chain's root table is not 800:; left out, the filter goes into its own root)
        lines.append(f"filter add dev {intf} parent {cid} protocol ip prio 1 u32 "
                     f"match u32 0 0 hashkey mask {hmask:#010x} at {FAIR_HASH_AT} link {ht}:")
        lines.append(f"filter add dev {intf} parent {cid} protocol all prio 2 u32 "
                     f"match u32 0 0 flowid 1:{_bucket_minor(level, 0):x}")
    return lines


@dataclass(frozen=True)
class Baseline:
    """One switch-egress queue discipline: how to build it and what the exchange model
    needs to know of it. Register a new one with :func:`register` (one entry here, or in
    its own module): the experiments' modes, their help, the model's predictions and the
    verdict's list of baselines all read this registry."""

    name: str
    summary: str                                   # one line, for help texts
    tree: Callable[[str, float, int, float], list[str]]   # (intf, rate_mbit, levels, rtt_s)
    # the model: packets a message may wait behind in its own class (rate_mbit, rtt_s) ...
    queue_packets: Callable[[float, float], int]
    # ... and, for fair-queued leaves, the FIFO depth ahead of it in the more urgent
    # classes (sluice_common.exchange, "fair-queued leaves"); None: FIFO leaves
    urgent_packets: int | None = None
    # hosts that tag their own packets (PIAS): the workload -> an iptables-restore input
    # every host gets before a run (removed after it); such a baseline schedules by
    # itself, so the ranking rules are not combined with it. None: the hosts tag nothing
    host_rules: Callable[["Workload"], str] | None = None


@dataclass(frozen=True)
class Workload:
    """What a host-tagging baseline derives its rules from: the flow-size distribution
    (bytes per connection) and the offered load of the bottleneck, in (0, 1)."""

    sizes: SizeMixture
    load: float


_REGISTRY: Registry[Baseline] = Registry("baseline")
unregister, names, baseline, help_text = (_REGISTRY.unregister, _REGISTRY.names,
                                          _REGISTRY.get, _REGISTRY.help_text)


def register(baseline: Baseline) -> Baseline:
    if "+" in baseline.name or not baseline.name:
        raise ValueError(f"a baseline's name has no '+': {baseline.name!r}")
    return _REGISTRY.register(baseline)


def split_mode_baseline(mode: str) -> str:
    """The baseline (switch queue, host tagging) of an experiment mode, whatever its rule."""
    return mode if mode in _REGISTRY else (mode.partition("+")[2] or "off")


def queues() -> tuple[str, ...]:
    """The baselines that are switch queues only (no host tagging): the ranking rules
    run on each of them (``<rule>+<baseline>``)."""
    return tuple(b.name for b in _REGISTRY if b.host_rules is None)


def host_rules(baseline_name: str, workload: Workload) -> str | None:
    """The iptables-restore input every host gets under ``baseline_name``; None: none."""
    make = baseline(baseline_name).host_rules
    return None if make is None else make(workload)


def pias_thresholds(workload: Workload, levels: int = pc.LEVELS) -> tuple[int, ...]:
    """PIAS's demotion thresholds (bytes) for ``workload``: M/M/1 model, ``levels``
    queues (:func:`mininet_fabric.pias_thresholds.derive_thresholds`)."""
    return derive_thresholds(workload.sizes, workload.load, levels)


def egress_tree(baseline_name: str, intf: str, rate_mbit: float, levels: int = pc.LEVELS,
                rtt_s: float = 0.0) -> list[str]:
    """The switch-egress tree of a registered baseline."""
    return baseline(baseline_name).tree(intf, rate_mbit, levels, rtt_s)


def queue_bytes(baseline_name: str, rate_mbit: float, rtt_s: float | None) -> float:
    """Bytes a message may wait behind at the egress, per class (the model's view)."""
    return baseline(baseline_name).queue_packets(rate_mbit, rtt_s or 0.001) * MTU_BYTES


def urgent_bytes(baseline_name: str) -> float | None:
    packets = baseline(baseline_name).urgent_packets
    return None if packets is None else packets * MTU_BYTES


def shallow_baseline(depth_packets: int | None = None) -> Baseline:
    """``off-shallow``: a FIFO of ``depth_packets`` per level (the depth a sweep chose,
    ``mininet_fabric.fifo_depths``); None: twice the bandwidth-delay product, at least one
    HTB burst."""
    def depth(rate: float, rtt: float) -> int:
        return shallow_limit_packets(rate, rtt) if depth_packets is None else depth_packets

    summary = ("a FIFO of twice the bandwidth-delay product (at least one HTB burst), or the "
               "depth the sweep chose at the run's load and congestion control"
               if depth_packets is None
               else f"a FIFO of {depth_packets} packets per level (the sweep's best depth)")
    return Baseline("off-shallow", summary,
                    tree=lambda intf, rate, levels, rtt: priority.priority_tree(
                        intf, rate, levels, leaf_limit=depth(rate, rtt)),
                    queue_packets=depth)


@contextmanager
def swept_shallow(load: float, cc: str):
    """For the ``with`` block, ``off-shallow`` has the depth the sweep chose at ``load``
    and ``cc`` (``mininet_fabric.fifo_depths``); yields that entry, or None (no sweep there:
    the default depth). The default is registered again after, also on failure."""
    from mininet_fabric.fifo_depths import swept_depth

    swept = swept_depth(load, cc)
    if swept is not None:
        register(shallow_baseline(swept.depth_packets))
    try:
        yield swept
    finally:
        register(shallow_baseline())


register(Baseline(
    "off", f"one deep FIFO of {priority.LEAF_QUEUE_PACKETS} packets per level (no job "
    "registered: every packet in the least urgent level)",
    tree=lambda intf, rate, levels, rtt: priority.priority_tree(intf, rate, levels),
    queue_packets=lambda rate, rtt: priority.LEAF_QUEUE_PACKETS))
register(shallow_baseline())
register(Baseline(
    "off-fair", f"per-flow fair queueing ({FAIR_BUCKETS} DRR buckets of "
    f"{FAIR_BUCKET_PACKETS} packets per level)",
    tree=lambda intf, rate, levels, rtt: fair_tree(intf, rate, levels),
    # DRR: a message waits behind its own flow's bytes in its bucket, which paced or
    # window-limited senders keep to about a burst (not the bucket's 100 packets)
    queue_packets=lambda rate, rtt: burst_packets(),
    urgent_packets=priority.LEAF_QUEUE_PACKETS))
register(Baseline(
    "pias", "PIAS: each host tags its connections by the bytes they have sent (thresholds "
    "by PIAS's method from the mix's size distribution), strict priority with a deep FIFO "
    "per level at the switches",
    tree=lambda intf, rate, levels, rtt: priority.priority_tree(intf, rate, levels),
    queue_packets=lambda rate, rtt: priority.LEAF_QUEUE_PACKETS,
    host_rules=lambda workload: pias.tagging_rules(pias_thresholds(workload))))
