"""A host-tagging baseline's rules (PIAS) on the experiment's hosts for one run: applied
in every host's own network namespace before the run and removed after it, also when
the run fails (the machine's own netfilter tables are never touched)."""

from __future__ import annotations

import tempfile
from contextlib import contextmanager

from mininet_fabric import baselines as bl
from mininet_fabric import pias
from mininet_tests.heavy_tail.config import HeavyTailConfig
from mininet_tests.heavy_tail.connection_sizes import connection_sizes


class HostTaggingError(RuntimeError):
    pass


def workload(config: HeavyTailConfig) -> bl.Workload:
    """The heavy-tail mix's per-connection sizes at its offered load."""
    if config.mix != "heavy-tail":
        raise ValueError(f"a host-tagging baseline (pias) needs the heavy-tail mix's size "
                         f"distribution, not the {config.mix} mix: run without that mode")
    return bl.Workload(connection_sizes(config.scale, config.bytes_lo), config.load)


def workload_of(config: HeavyTailConfig) -> bl.Workload | None:
    """:func:`workload`, or None for a mix without a size distribution (same-start)."""
    return workload(config) if config.mix == "heavy-tail" else None


def needs_host_trust(modes) -> bool:
    """Whether any of ``modes`` has its hosts tag packets (the controller must then keep
    the hosts' DSCP: ``--trust-host-dscp``)."""
    return any(bl.baseline(b).host_rules is not None
               for b in (bl.split_mode_baseline(m) for m in modes))


def present(fabric, host: str) -> bool:
    """Whether ``host``'s namespace holds the tagging chain."""
    out = fabric.cmd(host, f"iptables -t mangle -S {pias.CHAIN} >/dev/null 2>&1; echo rc=$?")
    return "rc=0" in out


def remove(fabric, host: str) -> None:
    for command in pias.removal_commands():
        fabric.cmd(host, f"{command} >/dev/null 2>&1")
    if present(fabric, host):
        raise HostTaggingError(f"the {pias.CHAIN} chain is still in {host}'s mangle table")


@contextmanager
def tagging(fabric, hosts, rules: str | None):
    """``rules`` (iptables-restore input; None: nothing) in every host of ``hosts`` for
    the ``with`` block, removed after it, also on failure."""
    if rules is None:
        yield
        return
    applied = []
    with tempfile.NamedTemporaryFile("w", prefix="sluice-pias-", suffix=".rules") as f:
        f.write(rules)
        f.flush()
        try:
            for host in hosts:
                applied.append(host)
                out = fabric.cmd(host, f"iptables-restore --noflush < {f.name} 2>&1; echo rc=$?")
                if "rc=0" not in out:
                    raise HostTaggingError(f"iptables-restore in {host} failed: {out.strip()[-400:]}")
            yield
        except BaseException as err:
            # the run failed: remove what can be removed and raise the run's error, with
            # any removal that failed noted on it
            for host in applied:
                try:
                    remove(fabric, host)
                except Exception as cleanup:
                    err.add_note(f"and removing the PIAS rules from {host} failed: {cleanup}")
            raise
    for host in applied:
        remove(fabric, host)
