"""Port counters -> measured bandwidth per port and per link (pure).

The app polls ``OFPPortStatsRequest`` about once a second; each reply is fed here with
the switch's own ``duration`` so the rate does not depend on controller scheduling.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PortSample:
    t: float          # seconds (port duration from the switch)
    tx_bytes: int
    rx_bytes: int


@dataclass
class PortRate:
    tx_bps: float = 0.0     # bytes/s
    rx_bps: float = 0.0
    tx_bytes: int = 0
    rx_bytes: int = 0


class LinkStats:
    def __init__(self) -> None:
        self.last: dict[tuple[int, int], PortSample] = {}
        self.rates: dict[tuple[int, int], PortRate] = {}

    def update(self, dpid: int, port: int, t: float, tx_bytes: int, rx_bytes: int) -> None:
        key = (dpid, port)
        prev = self.last.get(key)
        rate = self.rates.setdefault(key, PortRate())
        rate.tx_bytes, rate.rx_bytes = tx_bytes, rx_bytes
        if prev is not None and t > prev.t and tx_bytes >= prev.tx_bytes \
                and rx_bytes >= prev.rx_bytes:
            dt = t - prev.t
            rate.tx_bps = (tx_bytes - prev.tx_bytes) / dt
            rate.rx_bps = (rx_bytes - prev.rx_bytes) / dt
        self.last[key] = PortSample(t, tx_bytes, rx_bytes)

    def forget_switch(self, dpid: int) -> None:
        for key in [k for k in self.last if k[0] == dpid]:
            self.last.pop(key, None)
            self.rates.pop(key, None)
