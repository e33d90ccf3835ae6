"""Hostile traffic for the spoofing experiment, run inside a Mininet host.

    python -m mininet_tests.spoof_traffic blast --src IP --dst IP --proto udp|tcp
        --dport N --sport N --tos T --mbps R --seconds S
    python -m mininet_tests.spoof_traffic count --proto udp|tcp --port N [--src IP]
        [--sport N] --seconds S

``blast`` crafts one packet with scapy (any source address, any TOS byte: what a
malicious host can do) and sends copies through a raw IP socket at a paced rate (scapy's
own send loop manages a few hundred packets per second here, far too few to fill a
link). ``count`` receives for ``seconds`` and prints JSON: bytes, Mbit/s and the DSCP
values the packets arrived with (UDP: a socket with IP_RECVTOS; TCP: a raw socket,
which sees segments no connection owns).
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import time
from collections import Counter
from dataclasses import dataclass

PAYLOAD = 1400


@dataclass(frozen=True)
class Blast:
    src: str
    dst: str
    dport: int
    proto: str = "udp"
    sport: int = 31337
    tos: int = 0
    mbps: float = 100.0
    seconds: float = 8.0


@dataclass(frozen=True)
class Count:
    port: int
    proto: str = "udp"
    src: str | None = None
    sport: int | None = None
    seconds: float = 8.0


def blast(spec: Blast) -> dict:
    from scapy.all import IP, TCP, UDP, Raw

    l4 = (UDP(sport=spec.sport, dport=spec.dport) if spec.proto == "udp"
          else TCP(sport=spec.sport, dport=spec.dport, flags="A", seq=1, ack=1))
    pkt = bytes(IP(src=spec.src, dst=spec.dst, tos=spec.tos) / l4 / Raw(b"x" * PAYLOAD))
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    interval = len(pkt) * 8 / (spec.mbps * 1e6)
    sent, t0 = 0, time.monotonic()
    end = t0 + spec.seconds
    while (now := time.monotonic()) < end:
        due = t0 + sent * interval
        if due > now:
            time.sleep(min(due - now, 0.01))
            continue
        try:
            s.sendto(pkt, (spec.dst, 0))
            sent += 1
        except OSError:           # a full queue: what a flooder ignores
            time.sleep(0.001)
    return {"sent_packets": sent, "sent_mbps": round(sent * len(pkt) * 8 / spec.seconds / 1e6, 2)}


def count(spec: Count) -> dict:
    dscps: Counter[int] = Counter()
    total = 0
    if spec.proto == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
        s.bind(("0.0.0.0", spec.port))
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    s.settimeout(0.2)
    end = time.monotonic() + spec.seconds
    while time.monotonic() < end:
        try:
            if spec.proto == "udp":
                data, anc, _flags, _addr = s.recvmsg(65535, socket.CMSG_SPACE(4))
                tos = next((c[2][0] for c in anc if c[1] == socket.IP_TOS), 0)
                size = len(data) + 28
            else:
                data, _addr = s.recvfrom(65535)
                ihl = (data[0] & 0xF) * 4
                src = socket.inet_ntoa(data[12:16])
                sport, dport = struct.unpack("!HH", data[ihl:ihl + 4])
                if dport != spec.port or (spec.src and src != spec.src) or \
                        (spec.sport and sport != spec.sport):
                    continue
                tos, size = data[1], len(data)
        except socket.timeout:
            continue
        total += size
        dscps[tos >> 2] += 1
    return {"bytes": total, "mbps": round(total * 8 / spec.seconds / 1e6, 3),
            "dscp_packets": {str(k): v for k, v in sorted(dscps.items())}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mininet_tests.spoof_traffic")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("blast")
    b.add_argument("--src", required=True)
    b.add_argument("--dst", required=True)
    b.add_argument("--proto", choices=["udp", "tcp"], default="udp")
    b.add_argument("--dport", type=int, required=True)
    b.add_argument("--sport", type=int, default=31337)
    b.add_argument("--tos", type=int, default=0)
    b.add_argument("--mbps", type=float, default=100)
    b.add_argument("--seconds", type=float, default=8)
    c = sub.add_parser("count")
    c.add_argument("--proto", choices=["udp", "tcp"], default="udp")
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--src", default=None)
    c.add_argument("--sport", type=int, default=None)
    c.add_argument("--seconds", type=float, default=8)
    given = vars(ap.parse_args(argv))
    cmd = given.pop("cmd")
    print(json.dumps(blast(Blast(**given)) if cmd == "blast" else count(Count(**given))),
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
