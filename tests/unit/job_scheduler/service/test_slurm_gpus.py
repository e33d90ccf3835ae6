"""GPU binding under Slurm, without Slurm: the indices Slurm gave every job (its ``scontrol -d
show job`` GRES detail) parsed, and taken as the truth for capacity, so another user's GPUs
are never handed out. The same on real Slurm 22.05 daemons on the Mininet fabric:
tests/fabric/slurm/test_slurm_gpus.py."""

from __future__ import annotations

from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.service.gpu_records import recorded_placement
from job_scheduler.service.slurm_gpus import apply_gres_truth
from job_scheduler.service.store import JobRecord
from slurm_client.gres_indices import gres_gpu_indices, parse_job_gpu_indices
from sluice_common.jobspec import parse_jobs_text
from sluice_common.placement import Placement
from topologies import load_topology

DETAIL = (
    "JobId=4 HetJobId=3 HetJobOffset=1 JobName=wrap UserId=root(0) JobState=RUNNING "
    "NodeList=h3 NumNodes=1 JOB_GRES=gpu:2   Nodes=h3 CPU_IDs=0-1 Mem=0 GRES=gpu:2(IDX:0-1) "
    "MinCPUsNode=1\n"
    "JobId=3 HetJobId=3 HetJobOffset=0 JobName=wrap JobState=RUNNING JOB_GRES=gpu:1   "
    "Nodes=h2 CPU_IDs=31 Mem=0 GRES=gpu:1(IDX:0) MinCPUsNode=1\n"
    "JobId=7 JobName=x JobState=RUNNING JOB_GRES=gpu:3   Nodes=h[1-2] CPU_IDs=0 Mem=0 "
    "GRES=gpu:a100:3(IDX:1,2-3) MinCPUsNode=1\n"
    "JobId=8 JobName=old JobState=COMPLETED JOB_GRES=gpu:1   Nodes=h4 CPU_IDs=0 Mem=0 "
    "GRES=gpu:1(IDX:0)\n"
    "JobId=9 JobName=wait JobState=PENDING JOB_GRES=gpu:1\n")


def test_the_gres_detail_names_each_jobs_gpus_per_node():
    assert gres_gpu_indices("gpu:a100:3(IDX:0,2-3),nic:1") == [0, 2, 3]
    assert gres_gpu_indices("gpu:0(IDX:N/A)") == gres_gpu_indices("gpu:3") == []
    assert parse_job_gpu_indices(DETAIL) == {3: {"h3": [0, 1], "h2": [0]},
                                             7: {"h1": [1, 2, 3], "h2": [1, 2, 3]}}


def test_slurms_indices_are_the_truth_own_and_foreign():
    state = ClusterState(load_topology("two-rack"))
    (spec,) = parse_jobs_text("jobs:\n  - {name: j, model: resnet18, dataset_size: 64, "
                              "epochs: 1, batch_size: 8, max_gpus: 2}\n", "t.yaml")
    job = JobRecord(5, 1, "j", spec, "running", 0.0, gpus=2, external_id="3", placement={
        "ps_hosts": ["h1"], "worker_hosts": ["h1", "h1"], "gpus_by_host": {"h1": 2},
        "gpu_ids": {"h1": [0, 1]}})
    state.allocate(*recorded_placement(job))
    truth = {3: {"h1": [2, 3]}, 7: {"h1": [0], "h2": [1, 3]}}     # 7: another user's
    taken, grants = apply_gres_truth(state, truth, {3: job})
    assert grants[5].as_dict() == {"h1": [2, 3]}                  # Slurm's, not the record's
    assert state.holds("5").as_dict() == {"h1": [2, 3]}
    assert taken == {"h1": 1, "h2": 2} and state.free[:2] == [1, 2]
    assert state.holds("slurm:h2").as_dict() == {"h2": [1, 3]}
    p = state.allocate(Placement("new", ("h1",), ("h1",)))
    assert p.as_dict() == {"h1": [1]}                             # never 0, 2, 3
