"""Capacity as Slurm sees it, pure: only the configured partition's
nodes count, and a node's free CPUs and memory bound the GPUs sluice may still use
there (a worker asks --cpus-per-gpu CPUs, default one, and --mem-per-gpu)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.service.slurm_capacity import apply_capacity, memory_mb, resource_room
from slurm_client import NodeInfo, SiteOptions
from support.fake_slurm import TOPO
from topologies.model import parse_topology as topology_from_dict


def node(name, *, cpus=32, cpus_used=0, mem=128000, mem_used=0, parts=("gpu",), used=0):
    return NodeInfo(name, name, name, "IDLE", frozenset(), 4, used, cpus=cpus,
                    cpus_used=cpus_used, memory_mb=mem, memory_used_mb=mem_used,
                    partitions=parts)


@pytest.mark.parametrize("text,mb", [("16G", 16384), ("16000", 16000), ("1T", 1048576),
                                     ("2048K", 2), ("8g", 8192)])
def test_memory_sizes(text, mb):
    assert memory_mb(text) == mb


def test_only_the_configured_partitions_nodes_count():
    state = ClusterState(topology_from_dict(TOPO))
    nodes = {"h1": node("h1", parts=("gpu", "long")), "h2": node("h2", parts=("debug",)),
             "h3": node("h3", parts=("long",))}
    why = apply_capacity(state, nodes, {}, site=SiteOptions(partition="long"))
    assert state.free == [4, 0, 4] and why["h2"] == "not in partition long"
    every = ClusterState(topology_from_dict(TOPO))     # no partition given: every node
    apply_capacity(every, nodes, {})
    assert every.free == [4, 4, 4]
    # one no node is in: left to sbatch, which refuses it with Slurm's words
    unknown = ClusterState(topology_from_dict(TOPO))
    apply_capacity(unknown, nodes, {}, site=SiteOptions(partition="no-such"))
    assert unknown.free == [4, 4, 4]


def test_free_cpus_and_memory_bound_the_gpus():
    state = ClusterState(topology_from_dict(TOPO))
    site = SiteOptions(cpus_per_gpu=8, mem_per_gpu="16G")
    nodes = {"h1": node("h1", cpus_used=16),                 # 16 free CPUs: 2 GPUs
             "h2": node("h2", mem=64000, mem_used=30000),    # 34000 MB free: 2 x 16 GiB
             "h3": node("h3")}                               # room for all 4
    why = apply_capacity(state, nodes, {}, site=site)
    assert state.free == [2, 2, 4]
    assert "2 without free CPUs" in why["h1"] and "2 without free memory" in why["h2"]
    assert resource_room(nodes["h3"], site) == (4, "CPUs")
    assert resource_room(replace(nodes["h3"], cpus=0), SiteOptions()) is None
    # the default: one CPU per worker; a node with every CPU taken has no room
    busy = ClusterState(topology_from_dict(TOPO))
    apply_capacity(busy, {h: node(h, cpus_used=32) for h in ("h1", "h2", "h3")}, {})
    assert busy.free == [0, 0, 0]
