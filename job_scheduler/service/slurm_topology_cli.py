"""``sluice topology from-slurm`` and ``sluice validate --slurm`` on the command line (routed
here by sluice/cli.py): the arguments, handed to ``job_scheduler.service.slurm_topology`` as plain
values; its option errors named by their flags here and only here."""

from __future__ import annotations

import argparse
from pathlib import Path

from sluice_common.errors import InputError, as_flags

# write_from_slurm's parameters -> the flags that set them
FLAGS = {"host_link_gbps": "--host-link-gbps", "uplink_gbps": "--uplink-gbps",
         "bw_scale": "--bw-scale"}


# ---- sluice topology from-slurm ------------------------------------------------------

def configure_from_slurm(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=Path, help="topology YAML to write")
    parser.add_argument("--host-link-gbps", type=float, required=True,
                        help="host <-> ToR link speed, Gbit/s")
    parser.add_argument("--uplink-gbps", type=float, required=True,
                        help="switch <-> switch link speed, Gbit/s")
    parser.add_argument("--name", default="slurm-cluster", help="the topology's name")
    parser.add_argument("--bw-scale", type=float, default=None,
                        help="emulation.bw_scale to record (Mininet runs links at bw * scale)")
    parser.add_argument("--switch-dpids", default=None, metavar="FILE",
                        help="YAML {switch: datapath id}: the OpenFlow id of every "
                        "topology.conf switch (without it they are numbered 1..N, which "
                        "only the emulated fabric matches)")
    _fabric_addresses(parser)


def _fabric_addresses(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fabric-addresses", default=None, metavar="FILE",
                        help="YAML {node: address}: each node's data-fabric address where it "
                        "differs from Slurm's NodeAddr (InfiniBand/RoCE apart from Ethernet)")


def run_from_slurm(args: argparse.Namespace) -> int:
    from job_scheduler.service.slurm_topology import write_from_slurm

    try:
        return write_from_slurm(args.out, host_link_gbps=args.host_link_gbps,
                                uplink_gbps=args.uplink_gbps, name=args.name,
                                bw_scale=args.bw_scale,
                                fabric_addresses=args.fabric_addresses,
                                switch_dpids=args.switch_dpids)
    except InputError as err:
        raise as_flags(err, FLAGS) from None


# ---- sluice validate --slurm ---------------------------------------------------------

def configure_validate_slurm(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--slurm", required=True, metavar="TOPOLOGY",
                        help="topology (built-in name or YAML) to check against the running "
                             "Slurm cluster (SLURM_CONF from the environment)")
    _fabric_addresses(parser)


def run_validate_slurm(args: argparse.Namespace) -> int:
    from job_scheduler.service.slurm_topology import validate_against_slurm

    return validate_against_slurm(args.slurm, getattr(args, "fabric_addresses", None))
