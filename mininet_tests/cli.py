"""``sluice fabric check|up|clean``.

- ``check --topology NAME|PATH [--controller HOST:PORT [--controller-api URL]] [--json]
  [--seconds S] [--single-flow] [--bottleneck-mbit M]``: bring the fabric up, ping all
  pairs, run the priority check (the contended port at no more than M Mbit/s, default 50,
  every link scaled alike), tear down. Exit 0 when loss is 0 % and high/low >=
  ``--min-ratio`` (5), else 1.
  Standalone the senders mark their flows; with ``--controller`` the two flows are
  registered as two jobs through the controller's REST API (``--controller-api``, admin
  token from env SLUICE_ADMIN_TOKEN) and unregistered afterwards, so the controller's
  classification and DSCP marking are what is checked.
- ``up --topology ... [--controller ...]``: keep a fabric up until Ctrl-C / SIGTERM.
- ``clean``: remove a crashed run's leftovers (processes, OVS bridges, veths).

Exit codes: 0 ok, 1 a check failed or the fabric could not run, 2 bad input.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass, fields

from mininet_fabric.lock import FabricError
from mininet_tests.priority_check import DEFAULT_BOTTLENECK_MBIT
from sluice_common.errors import InputError, as_flags

MIN_RATIO = 5.0
DEFAULT_API = "http://127.0.0.1:8080"


def configure_fabric(parser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = sub.add_parser("check", help="bring the fabric up, ping all pairs, check priority, "
                                         "tear down")
    up = sub.add_parser("up", help="keep a fabric up until Ctrl-C")
    for p in (check, up):
        p.add_argument("--topology", default="two-rack", help="built-in name or YAML path "
                       "(default two-rack)")
        p.add_argument("--controller", metavar="HOST:PORT", help="remote OpenFlow 1.3 controller "
                       "(default: none; standalone L2 learning on loop-free topologies)")
        p.add_argument("--levels", type=int, default=8, help="priority levels per port (1..8)")
        p.add_argument("--wait-connected", type=float, default=30.0, metavar="S",
                       help="seconds to wait for switches to reach the controller")
    check.add_argument("--controller-api", default=DEFAULT_API, metavar="URL",
                       help="with --controller: the sluice controller's REST API, where the "
                            "check registers its two flows as two jobs (admin token from env "
                            f"SLUICE_ADMIN_TOKEN; default {DEFAULT_API}); 'none': the senders "
                            "mark their flows themselves (for a controller that is not "
                            "sluice's: sluice's re-marks unregistered flows to DSCP 0)")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.add_argument("--seconds", type=float, default=8.0,
                       help="length of the priority measurement (default 8)")
    check.add_argument("--min-ratio", type=float, default=MIN_RATIO,
                       help=f"pass threshold for high/low throughput (default {MIN_RATIO:g})")
    check.add_argument("--single-flow", action="store_true",
                       help="also measure one flow alone against the nominal bandwidth")
    check.add_argument("--bottleneck-mbit", type=float, default=DEFAULT_BOTTLENECK_MBIT,
                       metavar="M", help="run the contended port at no more than M Mbit/s, "
                       "every link scaled by one factor (default "
                       f"{DEFAULT_BOTTLENECK_MBIT:g}: Open vSwitch's software datapath, one "
                       "core, must not be the bottleneck, or no queue builds at the port "
                       "whose priority is checked); 0: the topology's own rates")
    sub.add_parser("clean", help="remove leftovers of a crashed fabric run")


@dataclass(frozen=True)
class FabricOptions:
    """``sluice fabric check|up``'s options, built once from the namespace
    (:func:`fabric_options`); the defaults are the parser's. ``up`` has none of the
    check's own flags: those fields keep their defaults and nothing reads them."""
    action: str                       # check | up
    topology: str = "two-rack"
    controller: str | None = None     # HOST:PORT of a remote OpenFlow controller
    levels: int = 8
    wait_connected: float = 30.0
    controller_api: str = DEFAULT_API
    json: bool = False
    seconds: float = 8.0
    min_ratio: float = MIN_RATIO
    single_flow: bool = False
    bottleneck_mbit: float = DEFAULT_BOTTLENECK_MBIT


def fabric_options(args) -> FabricOptions:
    given = vars(args)
    return FabricOptions(**{f.name: given[f.name] for f in fields(FabricOptions)
                            if f.name in given})


def _validate(opts: FabricOptions):
    """All input checks before anything is touched (bad input changes nothing)."""
    from mininet_fabric.fabric import has_loops, parse_controller
    from topologies import load_topology
    from topologies.mininet_topo import check_emulatable

    if opts.controller:
        try:
            parse_controller(opts.controller)
        except InputError as err:
            raise as_flags(err, {"controller": "--controller"}) from None
    if not 1 <= opts.levels <= 8:
        raise InputError("--levels", f"must be 1..8, got {opts.levels}")
    if opts.wait_connected < 0:
        raise InputError("--wait-connected", f"must be >= 0, got {opts.wait_connected:g}")
    topology = load_topology(opts.topology)
    check_emulatable(topology)
    if opts.action == "check":
        if not 1 <= opts.seconds <= 300:
            raise InputError("--seconds", f"must be 1..300, got {opts.seconds:g}")
        if not (opts.bottleneck_mbit == 0 or 1 <= opts.bottleneck_mbit <= 10_000):
            raise InputError("--bottleneck-mbit", f"must be 0 or 1..10000, got "
                             f"{opts.bottleneck_mbit:g}")
        if len(topology.hosts) < 3:
            raise InputError(topology.source, "the priority check needs at least 3 hosts",
                             element=f"topology '{topology.name}'", field="hosts")
        if opts.controller and opts.controller_api != "none":
            _check_api(opts.controller_api)
        if has_loops(topology) and not opts.controller:
            raise InputError(topology.source, "the fabric has loops: standalone L2 learning "
                             "would storm, so checking it needs a loop-free forwarding "
                             "controller (--controller HOST:PORT)",
                             element=f"topology '{topology.name}'")
    return topology


def _check_api(url: str) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError("--controller-api", f"must be an http(s)://HOST:PORT URL or 'none', "
                         f"got {url!r}")
    try:
        parts.port
    except ValueError as err:
        raise InputError("--controller-api", f"bad port in {url!r}: {err}")
    if not os.environ.get("SLUICE_ADMIN_TOKEN"):
        raise InputError("SLUICE_ADMIN_TOKEN", "must be set (the controller's admin token) to "
                         "register the check's flows with the controller; or pass "
                         "--controller-api none")


def run_fabric(args) -> int:
    if args.action == "clean":
        return _clean()
    opts = fabric_options(args)
    topology = _validate(opts)
    try:
        if opts.action == "up":
            return _up(opts, topology)
        return _check(opts, topology)
    except FabricError as err:
        print(f"sluice fabric: {err}", file=sys.stderr)
        return 1


def _clean() -> int:
    from mininet_fabric.lock import FabricLock
    from mininet_fabric.management import remove_leftovers
    from mininet_fabric.system import cleanup_leftovers, ensure_ovs

    try:
        ensure_ovs()
        with FabricLock("sluice fabric clean"):   # the management network's too
            removed = cleanup_leftovers()
            removed["links"] += remove_leftovers()
    except FabricError as err:
        print(f"sluice fabric: {err}", file=sys.stderr)
        return 1
    print(f"removed {removed['processes']} processes, {removed['bridges']} bridges, "
          f"{removed['links']} interfaces")
    return 0


def _check(opts: FabricOptions, topology) -> int:
    from mininet_fabric.fabric import Fabric
    from mininet_tests.priority_check import (capped_for_check, controller_priority_check,
                                              priority_check, single_flow)

    started = time.monotonic()
    topology = capped_for_check(topology, opts.bottleneck_mbit)
    result: dict = {"topology": topology.name, "controller": opts.controller,
                    "bw_scale": topology.emulation_bw_scale}
    with Fabric(topology, controller=opts.controller, priority_levels=opts.levels,
                wait_connected_s=opts.wait_connected) as fab:
        result["up_s"] = round(time.monotonic() - started, 2)
        print("fabric: ping all pairs", file=sys.stderr, flush=True)
        result["loss"] = fab.ping_all()
        if fab.lost_pairs:
            result["lost_pairs"] = fab.lost_pairs
        if opts.single_flow:
            print("fabric: single-flow throughput", file=sys.stderr, flush=True)
            pair = fab.topology.hosts[0].name, _farthest(fab.topology)
            result["single_flow"] = single_flow(fab, *pair, seconds=opts.seconds)
        if opts.controller and opts.controller_api != "none":
            from controller.client import ControllerClient

            print(f"fabric: priority check ({opts.seconds:g} s), flows registered with the "
                  f"controller at {opts.controller_api}", file=sys.stderr, flush=True)
            client = ControllerClient(opts.controller_api, os.environ["SLUICE_ADMIN_TOKEN"],
                                      timeout=30.0)
            try:
                prio = controller_priority_check(fab, client, seconds=opts.seconds)
            finally:
                client.close()
        else:
            print(f"fabric: priority check ({opts.seconds:g} s)", file=sys.stderr, flush=True)
            prio = priority_check(fab, seconds=opts.seconds)
        result.update(prio)
        result["tc_intact"] = not fab.priority_tree_intact()
    result["total_s"] = round(time.monotonic() - started, 2)
    result["ok"] = (result["loss"] == 0 and result["priority_ratio"] >= opts.min_ratio
                    and result["tc_intact"])
    if opts.json:
        print(json.dumps(result))
    else:
        _print_human(result, opts.min_ratio)
    return 0 if result["ok"] else 1


def _farthest(topology) -> str:
    """The host whose path from the first host has the smallest bandwidth (then most hops)."""
    first = topology.hosts[0].name
    others = [h.name for h in topology.hosts[1:]]
    return min(others, key=lambda h: (topology.path_bandwidth(first, h),
                                      -len(topology.path(first, h))))


def _print_human(r: dict, min_ratio: float) -> None:
    mark = lambda ok: "ok  " if ok else "FAIL"  # noqa: E731
    print(f"fabric check: {r['topology']}" + (f" (controller {r['controller']})"
                                              if r["controller"] else " (standalone)"))
    print(f"  {mark(r['loss'] == 0)} all-pairs ping loss {r['loss']:.1f} %"
          + (f" (no reply: {', '.join(r['lost_pairs'])})" if r.get("lost_pairs") else ""))
    if "single_flow" in r:
        s = r["single_flow"]
        print(f"       single flow {s['flow']}: {s['mbps']:.1f} of {s['nominal_mbps']:g} Mbit/s "
              f"({100 * s['efficiency']:.0f} %)")
    print(f"  {mark(r['priority_ratio'] >= min_ratio)} priority at {r['bottleneck']} "
          f"({r['bottleneck_mbit']:g} Mbit/s): high {r['high_flow']} DSCP {r['high_dscp']} "
          f"{r['high_mbps']:.1f} Mbit/s, low {r['low_flow']} DSCP {r['low_dscp']} "
          f"{r['low_mbps']:.2f} Mbit/s, ratio {r['priority_ratio']:.1f} (need >= {min_ratio:g}; "
          f"marked by the {r.get('marked_by', 'senders')})")
    print(f"  {mark(r['tc_intact'])} HTB priority tree still on every switch port")
    print(f"  {'PASS' if r['ok'] else 'FAIL'} in {r['total_s']:.1f} s")


def _up(opts: FabricOptions, topology) -> int:
    from mininet_fabric.fabric import Fabric

    with Fabric(topology, controller=opts.controller, priority_levels=opts.levels,
                wait_connected_s=opts.wait_connected) as fab:
        for h in fab.topology.hosts:
            print(f"  {h.name:<6} {h.ip:<15} rack {h.rack}")
        print(f"fabric {topology.name} is up; Ctrl-C to tear it down "
              f"(run commands in a host with: mnexec -a $(pgrep -f 'mininet:h1$') CMD)",
              flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
    return 0
