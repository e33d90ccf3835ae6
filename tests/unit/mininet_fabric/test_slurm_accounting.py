"""The local cluster's slurm.conf with accounting: slurmdbd in place of none, associations
enforced, and the GPUs in the record (what a sacct export gives the simulator)."""

from __future__ import annotations

from pathlib import Path

from mininet_fabric.slurm_accounting import with_accounting

BARE = ("ClusterName=sluice\n"
        "# No slurmdbd: no accounting (sacct has nothing); completion records in a text file.\n"
        "AccountingStorageType=accounting_storage/none\nGresTypes=gpu\n")


def test_accounting_replaces_none_and_records_gpus():
    lines = with_accounting(BARE, 6819, Path("/run/munge.socket")).splitlines()
    assert "AccountingStorageType=accounting_storage/none" not in lines
    assert {"AccountingStorageType=accounting_storage/slurmdbd", "AccountingStoragePort=6819",
            "AccountingStoragePass=/run/munge.socket",
            "AccountingStorageEnforce=associations,qos",
            "AccountingStorageTRES=gres/gpu"} <= set(lines)
    assert lines[0] == "ClusterName=sluice" and lines[-1] == "GresTypes=gpu"
    assert not any(line.startswith("# No slurmdbd") for line in lines)
