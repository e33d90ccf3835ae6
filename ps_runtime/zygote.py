"""A fork server per host: MXNet imported once, every warm process forked from it.

A warm process (``ps_runtime.warm``) costs 1.5-3.5 s of CPU for its MXNet import; the
four-arm demo takes ~30 of them per arm, and importing them again between arms takes a
quarter of its wall time on a host with two cores (docs/design.md, "The test machine";
bench/RESULTS.md, "End to end: the four-arm demo").
A *zygote* (``python -m ps_runtime.zygote mxnet``), started inside a host's namespaces
like any PS process, imports once and then forks a warm process on each request, in a
few milliseconds: the child already holds MXNet (MXNet's own ``pthread_atfork`` handlers
stop its engine before the fork and start it again in both processes; ps-lite is not
started before a role is given, so each child starts its own).

The channel: the runner hands the zygote a ``SOCK_SEQPACKET`` socket as stdin and sends
one message per request carrying two pipe ends (``SCM_RIGHTS``): the child's stdin (its
one command) and its stdout (its ``ready`` line), so a forked process looks to
:class:`~ps_runtime.warm.WarmRunner` exactly as a warm one started by ``Popen`` does.
The zygote reports on its stdout ``pid N`` for each request, in order, and
``exit N CODE`` when it reaps a child (the child is not the runner's own: the runner
learns its exit status only this way). A child leads its own session, as a runner's
processes do, so one ``killpg`` stops it and what it forked.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections import deque

from ps_runtime.runners import ProcessRunner
from ps_runtime.watchdog import process_alive

LOST = 255      # the exit status of a child whose zygote died before reporting it


# ---- the zygote process ---------------------------------------------------------------

def main(preload: list[str]) -> int:
    from ps_runtime.warm_process import import_preloads
    from ps_runtime.watchdog import start_watchdog

    start_watchdog()
    import_preloads(preload)
    ctl = socket.socket(fileno=os.dup(0))       # the request socket (stdin)
    devnull = os.open(os.devnull, os.O_RDONLY)   # fd 0 stays taken: a child's stdin goes there
    os.dup2(devnull, 0)
    os.close(devnull)
    os.write(1, b"ready\n")
    wake_r, wake_w = os.pipe()                   # SIGCHLD wakes the select below
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    while True:
        readable, _, _ = select.select([ctl, wake_r], [], [])
        if wake_r in readable:
            _drain(wake_r)
        _reap()
        if ctl not in readable:
            continue
        msg, fds, _, _ = socket.recv_fds(ctl, 16, 2)
        if not msg:                              # the runner closed the pool
            return 0
        pid = os.fork()
        if pid == 0:                             # the child leaves the loop for good
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (ctl.detach(), wake_r, wake_w):
                os.close(fd)
            raise SystemExit(_child(*fds))
        for fd in fds:
            os.close(fd)
        _report(f"pid {pid}")


def _child(command_fd: int, ready_fd: int) -> int:
    """In the forked child: stdin the command pipe, stdout and stderr the ready pipe (a
    warm process's own until its command sends them to its log), then what a warm
    process does."""
    from ps_runtime.warm_process import serve_one

    os.setsid()
    os.dup2(command_fd, 0)
    os.dup2(ready_fd, 1)
    os.dup2(ready_fd, 2)
    os.close(command_fd)
    os.close(ready_fd)
    return serve_one()


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _report(f"exit {pid} {os.waitstatus_to_exitcode(status)}")


def _report(line: str) -> None:
    os.write(1, (line + "\n").encode())


# ---- the runner's side -------------------------------------------------------------------

def parse_report(text: bytes) -> tuple[list[tuple[str, int, int | None]], bytes]:
    """The zygote's report lines in ``text`` -> ([("pid", N, None) | ("exit", N, CODE)],
    the unfinished rest). Anything else (a warning the import printed) is skipped."""
    events = []
    *lines, rest = text.split(b"\n")
    for line in lines:
        words = line.split()
        if len(words) == 2 and words[0] == b"pid" and words[1].isdigit():
            events.append(("pid", int(words[1]), None))
        elif len(words) == 3 and words[0] == b"exit" and words[1].isdigit():
            try:
                events.append(("exit", int(words[1]), int(words[2])))
            except ValueError:
                pass
    return events, rest


class Zygote:
    """One host's fork server, seen from the runner."""

    def __init__(self, base: ProcessRunner, host: str, argv: list[str], env: dict[str, str]):
        self.host = host
        self.ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = base.start(host, argv, env, subprocess.PIPE, stdin=theirs.fileno())
        finally:
            theirs.close()
        self._fd = self.proc.stdout.fileno()
        os.set_blocking(self._fd, False)
        self._rest = b""
        self._waiting: deque[ForkedProcess] = deque()     # requests whose pid is not in yet
        self._children: dict[int, ForkedProcess] = {}
        self.forks = 0

    def fork(self) -> "ForkedProcess":
        """Ask for a warm process (returns at once; its pid comes with the next report)."""
        cmd_r, cmd_w = os.pipe()
        ready_r, ready_w = os.pipe()
        try:
            socket.send_fds(self.ctl, [b"f"], [cmd_r, ready_w])
        finally:
            os.close(cmd_r)
            os.close(ready_w)
        child = ForkedProcess(self, os.fdopen(cmd_w, "wb"), os.fdopen(ready_r, "rb"))
        self._waiting.append(child)
        self.forks += 1
        return child

    def pump(self, timeout: float = 0.0) -> None:
        """Read what the zygote reported (waiting up to ``timeout`` for something)."""
        if timeout > 0:
            select.select([self._fd], [], [], timeout)
        chunks = []
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        if not chunks:
            return
        events, self._rest = parse_report(self._rest + b"".join(chunks))
        for kind, pid, code in events:
            if kind == "pid" and self._waiting:
                child = self._waiting.popleft()
                child._pid = pid
                self._children[pid] = child
            elif kind == "exit" and pid in self._children:
                self._children.pop(pid).returncode = code

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self, timeout: float = 5.0) -> None:
        """End the zygote (its children live on: they are jobs' or close themselves)."""
        self.ctl.close()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.pump()
        self.proc.stdout.close()


class ForkedProcess:
    """A process forked by a :class:`Zygote`, with the parts of ``subprocess.Popen`` the
    launcher and the warm pool use (pid, poll, wait, returncode, signals, stdin/stdout)."""

    def __init__(self, zygote: Zygote, stdin, stdout):
        self.zygote = zygote
        self.stdin, self.stdout = stdin, stdout
        self._pid: int | None = None
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        deadline = time.monotonic() + 30.0
        while self._pid is None:
            if not self.zygote.alive() or time.monotonic() > deadline:
                self.zygote.pump()
                if self._pid is None:
                    raise ProcessLookupError(f"the zygote on {self.zygote.host} forked no "
                                             "process for this request")
            self.zygote.pump(timeout=0.2)
        return self._pid

    def poll(self) -> int | None:
        if self.returncode is None:
            self.zygote.pump()
        if self.returncode is None and not self.zygote.alive():
            self.zygote.pump()          # its last reports
            if self.returncode is None and not _exists(self._pid):
                self.returncode = LOST
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            if left <= 0:
                raise subprocess.TimeoutExpired(f"forked process {self._pid}", timeout)
            self.zygote.pump(timeout=left)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _exists(pid: int | None) -> bool:
    return pid is not None and process_alive(pid)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
