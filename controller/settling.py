"""Rules kept on a reconnected switch until the controller knows the fabric again.

After a switch (re)connects with its flow table read back, rules the controller owns
but does not want (yet) are kept until the fabric is rediscovered (every described link
and host found) or :data:`SETTLE_S` seconds passed: a restarted controller knows no
hosts at first, and deleting their forwarding rules would cut traffic until it does.
"""

from __future__ import annotations

from typing import Callable

from controller import rules as R
from controller.state import Shared

SETTLE_S = 3.0


class Settling:
    """Reconnected switches and their deadlines (callers hold the shared lock)."""

    def __init__(self, shared: Shared) -> None:
        self.s = shared
        self.until: dict[int, float] = {}      # reconnected dpid -> clock() deadline

    def start(self, dpid: int) -> None:
        self.until[dpid] = self.s.clock() + SETTLE_S

    def forget_switch(self, dpid: int) -> None:
        self.until.pop(dpid, None)

    def expire(self) -> bool:
        """Drop the switches whose time is over; True when there were any."""
        now = self.s.clock()
        expired = [d for d, t in self.until.items() if t <= now]
        for dpid in expired:
            del self.until[dpid]
        return bool(expired)

    def _rediscovered(self) -> bool:
        f = self.s.fabric
        return len(f.links) >= 2 * len(f.described_pairs) and len(f.hosts) == len(self.s.known_ips)

    def keep(self) -> Callable[[R.Rule], bool] | None:
        """Which rules a diff must not delete now (None: none; settling is over)."""
        if not self.until:
            return None
        if self._rediscovered():
            self.until.clear()
            return None
        settling = set(self.until)
        owned = {R.COOKIE_BASE, R.COOKIE_FORWARDING, R.COOKIE_ADMISSION} | {
            j.cookie for j in self.s.registry.jobs.values()}
        return lambda r: r.dpid in settling and r.cookie in owned
