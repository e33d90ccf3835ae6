"""A TCP relay between one switch and the controller that can go silent.

A switch that dies without any port going down (power, a hung CPU, a wedged agent) is
not a closed connection: the controller simply stops hearing from it. ``ovs-vsctl
del-controller`` or a killed connection would be seen at once, so to emulate the silent
case the experiment points the switch at this relay and, at the fault, ``freeze()`` s
it: both directions are read and thrown away, no socket is closed. ``thaw()`` closes the
switch side so the switch reconnects afresh.
"""

from __future__ import annotations

import socket
import threading


class SilentRelay:
    def __init__(self, controller: tuple[str, int]) -> None:
        self.controller = controller
        self.frozen = threading.Event()
        self._listen = socket.socket()
        self._listen.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listen.bind(("127.0.0.1", 0))
        self._listen.listen(8)
        self.port = self._listen.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="of-relay").start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                sw, _ = self._listen.accept()
            except OSError:
                return
            try:
                ctl = socket.create_connection(self.controller, timeout=5)
                ctl.settimeout(None)
            except OSError:
                sw.close()
                continue
            with self._lock:
                self._conns += [sw, ctl]
            for a, b in ((sw, ctl), (ctl, sw)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                if not self.frozen.is_set():      # silent: never pass a close on
                    self._close(dst)
                return
            if self.frozen.is_set():
                continue
            try:
                dst.sendall(data)
            except OSError:
                if not self.frozen.is_set():
                    self._close(src)
                return

    @staticmethod
    def _close(s: socket.socket) -> None:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()

    def freeze(self) -> None:
        self.frozen.set()

    def thaw(self) -> None:
        """Drop every connection (the switch reconnects through the relay again)."""
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            self._close(s)
        self.frozen.clear()

    def close(self) -> None:
        self._closed = True
        self._listen.close()
        self.thaw()
