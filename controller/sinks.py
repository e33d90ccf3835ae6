"""Where the controller's messages go: the os-ken app in production, a table in tests.

The service owns no sockets; whatever sends flow mods and packet-outs to the switches
implements :class:`FlowSink`, so the whole controller logic runs in a unit test with no
switch.
"""

from __future__ import annotations

from typing import Callable, Protocol

from controller import rules as R
from controller.flowtable import FlowTable

# (dpid, out port, Ethernet frame): a frame the controller sends out of a switch port
PacketOut = tuple[int, int, bytes]


class FlowSink(Protocol):
    def send(self, mods: list[R.FlowMod], on_done: Callable[[], None] | None) -> None:
        """Send ``mods`` (grouped per switch, in order), then a barrier per touched switch;
        call ``on_done`` once every barrier is answered (at once when ``mods`` is empty)."""

    def packet_out(self, outs: list[PacketOut]) -> None:
        """Send each frame out of its switch port (proxy-ARP answers and probes)."""


class TableSink:
    """A sink that applies flow mods to an in-memory table (tests, dry runs); its
    barriers are answered at once."""

    def __init__(self) -> None:
        self.table = FlowTable()
        self.sent: list[R.FlowMod] = []
        self.frames: list[PacketOut] = []

    def send(self, mods, on_done=None) -> None:
        self.sent.extend(mods)
        self.table.apply(mods)
        if on_done:
            on_done()

    def packet_out(self, outs) -> None:
        self.frames.extend(outs)
