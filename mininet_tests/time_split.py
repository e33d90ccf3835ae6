"""Where a job's time goes in the heavy-tail experiment.

Per job, its JCT split into:

- ``startup_s``: arrival to its first batch's start (process hand-over, ps-lite rendezvous);
- ``compute_s``: the batches' compute alone (``batches * compute_s``, the emulated worker
  sleeps exactly that);
- ``transfer_s``: its bytes at the link rate, alone (``batches * exchange_s``: push + pull
  of each batch, sluice_common.exchange);
- ``cpu_wait_s``: its processes' run-queue delay (the second field of
  ``/proc/PID/task/*/schedstat``, summed over the threads of the job's ps-lite scheduler,
  server and worker from when the run loop first sees them, a loop turn after launch,
  to its last look before they exit: sampled every loop turn, so the first and last
  ~0.1 s of each process are not counted);
- ``tcp_rto_s``: time some connection of the job had a retransmission timeout
  outstanding (``retrnsmt`` > 0 in ``/proc/PID/net/tcp`` of the hosts' namespaces, for a
  socket on one of the job's ports, sampled every loop turn): TCP recovering from loss;
- ``network_wait_s``: the rest, ``JCT - startup - compute - transfer - cpu_wait -
  tcp_rto`` (floored at 0): waiting for the link behind other jobs (sharing) and
  queueing at the shaped egress, which the per-mode queueing delay below apportions.

Per mode: the mean queueing delay at the two shaped egresses (root qdisc backlog over the
link rate, sampled once a second while jobs run) and the hosts' TCP retransmitted
segments and retransmission timeouts (``/proc/PID/net/snmp`` and ``netstat`` of each host
namespace, before and after). ``cpu_wait_share``: mean over jobs of ``cpu_wait_s / JCT``.

Parsers and the split are pure; :class:`ProcessWaits` and the ``read_*`` helpers read /proc.
"""

from __future__ import annotations

import glob
import re
import statistics

_BACKLOG_RE = re.compile(r"backlog (\d+)b (\d+)p")


def parse_schedstat(text: str) -> tuple[int, int, int]:
    """``/proc/PID/task/TID/schedstat``: (ns on the CPU, ns waiting in the run queue,
    time slices)."""
    parts = text.split()
    if len(parts) < 3:
        raise ValueError(f"schedstat needs 3 fields, got {text!r}")
    return int(parts[0]), int(parts[1]), int(parts[2])


def read_wait_ns(pid: int) -> int | None:
    """Run-queue delay of every thread of ``pid`` so far (ns); None once it is gone."""
    total, seen = 0, False
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path) as f:
                total += parse_schedstat(f.read())[1]
            seen = True
        except (OSError, ValueError):
            continue
    return total if seen else None


class ProcessWaits:
    """Per job, the run-queue delay of each of its processes since it was first seen
    (a pre-started process waited for the CPU while it imported MXNet, before it became
    the job's: that is not the job's)."""

    def __init__(self) -> None:
        self.first: dict[str, dict[int, int]] = {}
        self.last: dict[str, dict[int, int]] = {}

    def sample(self, job: str, pids: list[int]) -> None:
        first, seen = self.first.setdefault(job, {}), self.last.setdefault(job, {})
        for pid in pids:
            ns = read_wait_ns(pid)
            if ns is None:
                continue
            first.setdefault(pid, ns)
            if ns >= seen.get(pid, 0):
                seen[pid] = ns

    def wait_s(self, job: str) -> float:
        first = self.first.get(job, {})
        return sum(ns - first[pid] for pid, ns in self.last.get(job, {}).items()) / 1e9


def parse_tcp_counters(snmp: str, netstat: str) -> dict[str, int]:
    """``/proc/net/snmp`` + ``/proc/net/netstat`` -> {retrans_segs, timeouts}."""
    def table(text: str, prefix: str) -> dict[str, int]:
        rows = [l.split() for l in text.splitlines() if l.startswith(prefix + ":")]
        for names, values in zip(rows[::2], rows[1::2]):
            return {n: int(v) for n, v in zip(names[1:], values[1:])}
        return {}
    tcp, ext = table(snmp, "Tcp"), table(netstat, "TcpExt")
    return {"retrans_segs": tcp.get("RetransSegs", 0), "timeouts": ext.get("TCPTimeouts", 0)}


def read_tcp_counters(pid: int) -> dict[str, int]:
    """The TCP counters of the network namespace ``pid`` lives in."""
    with open(f"/proc/{pid}/net/snmp") as a, open(f"/proc/{pid}/net/netstat") as b:
        return parse_tcp_counters(a.read(), b.read())


def parse_proc_tcp(text: str) -> list[tuple[int, int, int]]:
    """``/proc/net/tcp`` -> (local port, remote port, unrecovered retransmission
    timeouts) per socket."""
    out = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 7 or ":" not in parts[1]:
            continue
        try:
            out.append((int(parts[1].rsplit(":", 1)[1], 16), int(parts[2].rsplit(":", 1)[1], 16),
                        int(parts[6], 16)))
        except ValueError:
            continue
    return out


def ports_in_recovery(text: str) -> set[int]:
    """Ports (local and remote) of the sockets with a retransmission timeout outstanding."""
    return {p for lport, rport, rto in parse_proc_tcp(text) if rto > 0 for p in (lport, rport)}


def parse_root_backlog(text: str) -> int:
    """Bytes queued in the root qdisc (``tc -s qdisc show dev X``: its first backlog)."""
    m = _BACKLOG_RE.search(text)
    return int(m.group(1)) if m else 0


def split(jct_s: float, startup_s: float, batches: int, compute_s: float,
          exchange_s: float, cpu_wait_s: float, tcp_rto_s: float = 0.0) -> dict[str, float]:
    """One job's time split (see the module doc); the parts sum to the JCT when the
    residual is not floored."""
    compute, transfer = batches * compute_s, batches * exchange_s
    rest = jct_s - startup_s - compute - transfer - cpu_wait_s - tcp_rto_s
    return {"jct_s": round(jct_s, 3), "startup_s": round(startup_s, 3),
            "compute_s": round(compute, 3), "transfer_s": round(transfer, 3),
            "cpu_wait_s": round(cpu_wait_s, 3), "tcp_rto_s": round(tcp_rto_s, 3),
            "network_wait_s": round(max(0.0, rest), 3)}


def cpu_wait_share(splits: list[dict[str, float]]) -> float | None:
    """Mean over jobs of run-queue delay over JCT (0..1)."""
    shares = [min(1.0, s["cpu_wait_s"] / s["jct_s"]) for s in splits if s["jct_s"] > 0]
    return round(statistics.mean(shares), 4) if shares else None
