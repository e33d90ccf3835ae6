"""The heavy-tail experiment's fabric: two-rack with every job's PS in rack 1 and its
worker in rack 2 (every push and pull crosses the shaped rack uplinks), the hosts' TCP
settings and port ranges, and the counters read around each run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from job_scheduler.core.decisions import StartDecision
from mininet_tests import time_split
from mininet_tests.heavy_tail.config import HOST_TCP
from mininet_tests.heavy_tail.mix import MixJob
from mininet_tests.heavy_tail.predict import BATCH_SIZE, KEYS, PIPELINE_KEYS
from ps_runtime.worker_overrides import WorkerOverrides
from sluice_common.jobspec import JobSpec
from sluice_common.placement import Placement
from topologies import load_topology

PS_HOSTS, WORKER_HOSTS = ("h1", "h2"), ("h3", "h4")
PUSH_EGRESS, PULL_EGRESS = "tor2>spine1", "tor1>spine1"

# Each run's ps-lite ports: a block of 100 per job (and 100 spare) after the last run's,
# cycling within this range; a long experiment (5 seeds x 8 modes x 16 jobs needs 68,000)
# reuses a block only many runs later, long after its sockets have closed
PORTS_FROM, PORTS_TO = 20000, 60000
# ...and each host's ephemeral ports (its outgoing connections) above it, so that no
# connection of one run holds a port a later run's ps-lite listens on (set in each host's
# own network namespace: the machine's range stays as it is)
EPHEMERAL_PORTS = (61000, 65535)


def machine_cc() -> str:
    with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
        return f.read().strip()


def resolve_cc(cc: str) -> str:
    """--cc: ``machine`` -> this machine's default (net.ipv4.tcp_congestion_control)."""
    return machine_cc() if cc == "machine" else cc


def host_sysctls(host_tcp: str) -> dict[str, str]:
    """The sysctls of every emulated host: the ``--host-tcp`` tuning and the ephemeral
    ports above the experiment's blocks."""
    low, high = EPHEMERAL_PORTS
    return HOST_TCP[host_tcp] | {"net.ipv4.ip_local_port_range": f"{low} {high}"}


def run_ports(run: int, jobs: int) -> int:
    """The port base of an experiment's ``run``-th run (0, 1, ...) of ``jobs`` jobs."""
    step = 100 * jobs + 100
    slots = (PORTS_TO - PORTS_FROM) // step
    if slots < 2:
        raise ValueError(f"{jobs} jobs need {step} ports a run: too many for "
                         f"{PORTS_FROM}..{PORTS_TO}")
    return PORTS_FROM + (run % slots) * step


def measure_rtt(fabric, src: str, dst: str, count: int = 10) -> float:
    """Mean round trip (s) of ``count`` pings from ``src`` to ``dst`` on the idle fabric."""
    out = fabric.cmd(src, f"ping -q -c {count} -i 0.2 -W 2 {fabric.ip(dst)}")
    import re
    m = re.search(r"= [\d.]+/([\d.]+)/", out)
    if not m:
        raise RuntimeError(f"no RTT from ping {src} -> {dst}: {out[-300:]}")
    return float(m.group(1)) / 1000


def experiment_topology(uplink_mbps: float | None):
    """two-rack, every link scaled so the rack uplinks run at ``uplink_mbps`` (None: the
    built-in 50 Mbit/s), and the uplink's capacity in bytes/s per direction."""
    topology = load_topology("two-rack")
    uplink = next(l for l in topology.links if {l.a, l.b} == {"tor2", "spine1"})
    if uplink_mbps is not None:
        if uplink_mbps <= 0:
            raise ValueError(f"the uplinks' rate must be > 0 Mbit/s, got {uplink_mbps}")
        topology = replace(topology, emulation_bw_scale=uplink_mbps / uplink.bw)
    return topology, uplink.bw * topology.emulation_bw_scale * 1e6 / 8


def topology_arg(topology, out: Path) -> str:
    """What the controller process loads: the built-in name, or the rescaled copy's file."""
    if topology.emulation_bw_scale == load_topology("two-rack").emulation_bw_scale:
        return "two-rack"
    path = out / "topology.yaml"
    path.write_text(yaml.safe_dump(topology.to_dict(), sort_keys=False))
    return str(path.resolve())


def placement_step(mix: list[MixJob]):
    index = {j.name: i for i, j in enumerate(mix)}

    def step(queued, state, now):
        """Start queued jobs in arrival order: PS on a rack-1 host, the worker on a
        rack-2 host with a free GPU; wait when none is free."""
        out = []
        for q in sorted(queued, key=lambda q: (q.spec.arrival, q.spec.name)):
            i = index[q.spec.name]
            order = WORKER_HOSTS[i % 2:] + WORKER_HOSTS[:i % 2]
            host = next((h for h in order if _free(state, h) - _taken(out, h) > 0), None)
            if host is None:
                break
            out.append(StartDecision(q.id, Placement(q.spec.name, (PS_HOSTS[i % 2],), (host,))))
        return out
    return step


def _free(state, host: str) -> int:
    return state.free[state.index[host]]


def _taken(decisions, host: str) -> int:
    return sum(d.worker_hosts.count(host) for d in decisions)


def specs_and_overrides(mix: list[MixJob]):
    specs = [JobSpec(name=j.name, model="resnet18", dataset_size=BATCH_SIZE * j.batches,
                     epochs=1, batch_size=BATCH_SIZE, max_gpus=1, arrival=j.arrival) for j in mix]
    overrides = {j.name: WorkerOverrides(compute="emulated", compute_s=j.compute_s,
                                         bytes_per_batch=j.bytes_per_batch,
                                         bucket_mb=j.bytes_per_batch / KEYS / 2 ** 20 * 1.001,
                                         pipeline_keys=PIPELINE_KEYS)
                 for j in mix}
    return specs, overrides


def tcp_counters(fabric, hosts) -> dict[str, int]:
    """Summed TCP retransmission counters of the hosts' network namespaces."""
    total = {"retrans_segs": 0, "timeouts": 0}
    for h in hosts:
        c = time_split.read_tcp_counters(fabric.host(h).pid)
        for k in total:
            total[k] += c[k]
    return total


def datapath_wait_ns() -> int | None:
    """Run-queue delay so far of ovs-vswitchd's threads (ns); None when not found."""
    try:
        with open("/var/run/openvswitch/ovs-vswitchd.pid") as f:
            return time_split.read_wait_ns(int(f.read().strip()))
    except (OSError, ValueError):
        return None

