"""The emulated cluster of bench/controller/bench_scale.py (pure data): a leaf-spine fabric
sized for N workers, jobs of W workers placed on it, their step times, sizes and
progress, and the controller's state file that starts it with all of that known.

Placement: 8 GPUs a host, 16 hosts a rack; a job's workers fill four GPUs on each of two
neighbouring hosts, its parameter server sits in the next rack (its flows cross the
spine: the most rules a job can need). Step times are drawn from 30-300 ms, lengths
log-uniformly from 10 minutes to 4 hours, sizes from the models' parameter volumes; a
job running when the bench starts is at a uniformly drawn point of its life, so jobs
finish (and new ones arrive in their place) at about 256 x E[1/length] = 0.13 a second
per 2,048 workers.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass

from controller.fake_fabric import wiring
from controller.forwarding import FabricView
from controller.registry import Registry
from topologies.generators import leaf_spine
from topologies.mininet_topo import mac_of
from topologies.model import parse_topology

GPUS_PER_HOST, HOSTS_PER_RACK, GPUS_PER_GROUP = 8, 16, 4
# bytes pushed per batch (fp32 parameters): ResNet18, ResNet50, GoogLeNet, DenseNet121, VGG16
MODEL_BYTES = (46_760_000, 102_240_000, 26_400_000, 31_920_000, 553_440_000)


@dataclass
class EmulatedJob:
    id: str
    slot: int                  # which place of the cluster it runs in (endpoints)
    step_s: float
    batches: int               # per worker
    bytes_per_batch: int
    started: float             # bench clock (s) of its batch 1; negative: before the bench
    body: dict

    def batch_at(self, t: float) -> int:
        """The batch its workers are at (0 before the start, batches + 1 once done)."""
        if t < self.started:
            return 0
        return min(self.batches + 1, 1 + int((t - self.started) / self.step_s))

    def time_of(self, batch: int) -> float:
        return self.started + (batch - 1) * self.step_s

    @property
    def ends(self) -> float:
        return self.started + self.batches * self.step_s


def topology_dict(workers: int) -> dict:
    hosts = max(2 * HOSTS_PER_RACK, -(-workers // GPUS_PER_HOST))
    leaves = -(-hosts // HOSTS_PER_RACK)
    return leaf_spine(leaves=leaves, spines=max(2, min(8, leaves // 8)),
                      hosts_per_leaf=HOSTS_PER_RACK, gpus=GPUS_PER_HOST,
                      name=f"scale-{workers}")


def load(d: dict):
    return parse_topology(d, f"<{d['name']}>")


def job_body(topology, slot: int, job_id: str, per_job: int, total: int, bpb: int) -> dict:
    ips = [h.ip for h in topology.hosts]
    first = (slot * per_job // GPUS_PER_GROUP) % len(ips)
    workers = [{"id": f"w{w}", "ip": ips[(first + w // GPUS_PER_GROUP) % len(ips)],
                "port": 30000 + (slot * per_job + w) % 30000} for w in range(per_job)]
    server = ips[(first + HOSTS_PER_RACK) % len(ips)]
    return {"id": job_id, "servers": [{"id": "s0", "ip": server, "port": 10000 + slot}],
            "workers": workers, "total_batches": total, "bytes_per_batch": bpb}


def new_job(topology, rng: random.Random, slot: int, gen: int, per_job: int,
            started: float, done_share: float = 0.0) -> EmulatedJob:
    step = rng.uniform(0.03, 0.3)
    batches = max(2, int(math.exp(rng.uniform(math.log(600), math.log(4 * 3600))) / step))
    bpb = rng.choice(MODEL_BYTES)
    job_id = f"j{slot}-{gen}"
    body = job_body(topology, slot, job_id, per_job, batches * per_job, bpb)
    return EmulatedJob(job_id, slot, step, batches, bpb,
                       started - done_share * batches * step, body)


def initial_jobs(topology, workers: int, per_job: int, seed: int) -> list[EmulatedJob]:
    rng = random.Random(seed)
    jobs = []
    for slot in range(workers // per_job):
        job = new_job(topology, rng, slot, 0, per_job, 0.0, done_share=rng.random())
        jobs.append(job)
    return jobs


def token_of(job_id: str) -> str:
    return f"bench-token-{job_id}-0123456789"


def state_file(topology, jobs: list[EmulatedJob], rank: str, t: float,
               pod: str | None = None) -> dict:
    """The controller's state file (controller/persistence.py): the fabric discovered,
    the running jobs registered with their progress at bench time ``t``. ``pod``: the
    state of ``sluice controller --pod pod`` (its scope of ``topology``, the ports
    numbered as on the whole fabric)."""
    wires = wiring(topology)
    if pod is not None:
        from controller.pods import pod_scope, scoped_topology
        topology = scoped_topology(topology, pod_scope(topology, pod))
    fabric = FabricView(topology)
    dpid = {s.name: s.dpid for s in topology.switches}
    for s in topology.switches:
        fabric.ports[s.dpid] = {p: f"{s.name}-eth{p}" for (n, p) in wires if n == s.name}
    for (a, pa), (b, pb) in wires.items():
        if a in dpid and b in dpid:
            fabric.add_link((dpid[a], pa), (dpid[b], pb))
        elif a in dpid and b in topology.host_by_name:
            fabric.learn_host(topology.host_by_name[b].ip, dpid[a], pa,
                              mac_of(topology.host_by_name[b].ip))
    entries = []
    for i, job in enumerate(jobs):
        batch = job.batch_at(t)
        entries.append({**job.body, "cookie": Registry.COOKIE_BASE | (i + 1),
                        "token_sha256": hashlib.sha256(token_of(job.id).encode()).hexdigest(),
                        "batches": {w["id"]: batch for w in job.body["workers"]}})
    return {"version": 1, "rank": rank, "jobs": entries, "fabric": fabric.to_dict()}
