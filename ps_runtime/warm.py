"""Pre-started PS processes: a job's processes start in well under a second.

Importing MXNet costs 1.5-3.5 s of CPU per process on a host with two cores (docs/design.md,
"The test machine"); a job is 3-9
processes (ps-lite scheduler, servers, workers), so when several jobs start at once their
processes queue for the CPU and a job waits ~14 s for its first batch. A
:class:`WarmRunner` keeps a few processes per host that have already imported MXNet
(``python -m ps_runtime.warm``, with no ``DMLC_ROLE``: nothing starts) and hands one
over when the launcher starts a process on that host: it receives the real argv,
environment and log file on stdin as one JSON line, switches its output to the log and
runs the module (``ps_runtime.server``, ``ps_runtime.emulated_worker``,
``ps_runtime.worker``) as ``python -m`` would. ps-lite reads ``DMLC_*`` when the KVStore
is created, not at import, so a warm process can still become any role. The pool is
refilled at once, while the jobs run (Liquid's pre-scheduling, in spirit: the work of
starting happens before the job needs it).

    runner = WarmRunner(MininetRunner(fabric), hosts=["h1", "h2"], per_host=4)
    ...PSJob(..., runner=runner)...
    runner.close()                  # stops the idle ones
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections import Counter, deque
from typing import IO, Iterable, Mapping, Sequence

from ps_runtime.runners import ProcessRunner, kill_group
# the process side
from ps_runtime.warm_process import import_preloads, serve_one

# Set before MXNet is imported (its engine reads them once): one thread each, as the
# launcher sets for cold processes.
WARM_ENV = {"OMP_NUM_THREADS": "1", "MXNET_CPU_WORKER_NTHREADS": "1", "PYTHONUNBUFFERED": "1"}


def command_line(argv: list[str], env: dict[str, str], log_path: str) -> bytes:
    """The one JSON line that turns a warm process into ``argv`` (``python -m MODULE ...``)."""
    if len(argv) < 3 or argv[1] != "-m":
        raise ValueError(f"a warm process runs `python -m MODULE ...`, got {argv[:3]}")
    return (json.dumps({"module": argv[2], "args": argv[3:], "env": env, "log": log_path})
            + "\n").encode()


class WarmRunner:
    """A :class:`ProcessRunner` that starts processes from a per-host pool of warm ones."""

    def __init__(self, base: ProcessRunner, hosts: list[str], per_host: int | Mapping[str, int] = 3,
                 preload: tuple[str, ...] = ("mxnet",), python: str = sys.executable,
                 log_dir: str | None = None, refill: bool = True, fork: bool = False):
        """``per_host``: the pool size, one for every host or per host (see
        :func:`pool_sizes`). ``refill``: start a replacement as soon as a process is handed
        over (False: only on :meth:`fill`, so that no MXNet import competes with jobs being
        measured). ``fork``: every warm process is forked from one fork server per host
        that imported once (``ps_runtime.zygote``): a fill takes milliseconds, not an
        import each, and a host whose pool ran dry forks one on demand instead of
        starting a process cold."""
        self.base = base
        self.zygotes = {h: _zygote(base, h, preload, python) for h in hosts} if fork else {}
        self.sizes = ({h: int(per_host.get(h, 0)) for h in hosts} if isinstance(per_host, Mapping)
                      else dict.fromkeys(hosts, per_host))
        self.refill = refill
        self.preload = preload
        self.python = python
        self.log_dir = log_dir
        self.idle: dict[str, deque] = {h: deque() for h in hosts}
        self.taken = 0
        self.cold = 0
        self.forked_late = 0                     # forked at hand-over (fork=True, pool dry)
        for host in hosts:
            self._fill(host)

    def _spawn(self, host: str) -> subprocess.Popen:
        if host in self.zygotes:
            return self.zygotes[host].fork()
        argv = [self.python, "-m", "ps_runtime.warm", *self.preload]
        # stdout: a pipe that carries one "ready" line (then the process writes to its log)
        return self.base.start(host, argv, _warm_env(), subprocess.PIPE, stdin=subprocess.PIPE)

    @staticmethod
    def _poll_ready(pool) -> None:
        for proc in pool:
            while not _is_ready(proc) and proc.poll() is None:
                r, _, _ = select.select([proc.stdout], [], [], 0)
                if not r:
                    break
                line = proc.stdout.readline()
                if not line:
                    break
                if line.strip() == b"ready":
                    proc._sluice_ready = True

    def wait_ready(self, timeout: float = 90.0) -> int:
        """Block until every idle process has finished its imports (or ``timeout``);
        returns how many are ready."""
        deadline = time.monotonic() + timeout
        ready = 0
        for pool in self.idle.values():
            for proc in pool:
                if getattr(proc, "_sluice_ready", False):
                    ready += 1
                    continue
                left = deadline - time.monotonic()
                if left <= 0 or proc.poll() is not None:
                    continue
                while not getattr(proc, "_sluice_ready", False):
                    r, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
                    line = proc.stdout.readline() if r else b""
                    if not line:             # timed out, or the process died
                        break
                    if line.strip() == b"ready":
                        proc._sluice_ready = True
                        ready += 1
        return ready

    def fill(self) -> None:
        """Top every host's pool up to its size (then :meth:`wait_ready`)."""
        for host in self.idle:
            self._fill(host)

    def _fill(self, host: str) -> None:
        pool = self.idle[host]
        while len(pool) < self.sizes[host]:
            pool.append(self._spawn(host))

    def start(self, host: str, argv: list[str], env: dict[str, str], log: IO,
              stdin=None) -> subprocess.Popen:
        pool = self.idle.get(host)
        if pool:
            # ready ones first; one still importing (a refill, at nice 19) is given its
            # normal priority back, or the job would wait for the CPU its neighbours leave
            self._poll_ready(pool)
            pool = self.idle[host] = deque(sorted(pool, key=lambda p: not _is_ready(p)))
        while pool:
            proc = pool.popleft()
            if proc.poll() is not None:          # died while idle: take the next one
                continue
            if not _is_ready(proc):
                try:
                    os.setpriority(os.PRIO_PROCESS, proc.pid, 0)
                except OSError:
                    pass
            try:
                proc.stdin.write(command_line(argv, env, log.name))
                proc.stdin.close()
            except (BrokenPipeError, OSError):
                continue
            proc.stdout.close()                  # the process writes to its log from now on
            self.taken += 1
            if self.refill:
                self._fill(host)
            return proc
        if host in self.zygotes:                 # no warm one: fork one now
            self.forked_late += 1
            proc = self.zygotes[host].fork()
            proc.stdin.write(command_line(argv, env, log.name))
            proc.stdin.close()
            proc.stdout.close()
            self.taken += 1
            return proc
        self.cold += 1                           # no warm one on this host: start cold
        return self.base.start(host, argv, env, log)

    def close(self) -> None:
        """Stop the idle processes (the ones handed out belong to their jobs)."""
        for pool in self.idle.values():
            while pool:
                proc = pool.popleft()
                for pipe in (proc.stdin, proc.stdout):
                    try:
                        pipe.close()             # EOF: a warm process exits by itself
                    except OSError:
                        pass
                kill_group(proc)
                try:
                    proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    kill_group(proc, 9)
                    proc.wait()
        for zygote in self.zygotes.values():
            zygote.close()


def _warm_env() -> dict[str, str]:
    from ps_runtime.watchdog import ENV as WATCHDOG_ENV

    return {**WARM_ENV, WATCHDOG_ENV: str(os.getpid())}


def _zygote(base: ProcessRunner, host: str, preload, python: str):
    from ps_runtime.zygote import Zygote

    return Zygote(base, host, [python, "-m", "ps_runtime.zygote", *preload], _warm_env())


def processes_per_host(jobs: Iterable[tuple[Sequence[str], Sequence[str]]]) -> Counter:
    """How many PS processes the launcher starts on each host for these jobs, each given
    as (its server hosts, its worker hosts): a ps-lite scheduler on the first server host,
    one process per server and per worker (``ps_runtime.launcher.PSJob._plan``)."""
    count: Counter = Counter()
    for servers, workers in jobs:
        count.update([servers[0], *servers, *workers])
    return count


def pool_sizes(hosts: Iterable[str], demand: Mapping[str, int], spare: int = 1,
               minimum: int = 4, maximum: int = 16) -> dict[str, int]:
    """Each host's pool: the processes its planned jobs will take (``demand``, e.g.
    :func:`processes_per_host` of a dry run's placements) plus ``spare``, within
    [``minimum``, ``maximum``]. A refill imports MXNet at nice 19 and, on a loaded machine,
    is not ready for 20-30 s: a host that runs several jobs in a row (the demo's h2 runs
    goog-b, res-e and res-f, 12 processes, in its first 17 s) needs them pre-started,
    where one size for every host left res-f waiting 13 s for its scheduler's import."""
    return {h: max(minimum, min(maximum, demand.get(h, 0) + spare)) for h in hosts}


def _is_ready(proc) -> bool:
    return getattr(proc, "_sluice_ready", False)


def main(preload: list[str]) -> int:
    """The warm process: import, wait for one command, become it."""
    from ps_runtime.watchdog import start_watchdog

    start_watchdog()
    import_preloads(preload)
    return serve_one()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
