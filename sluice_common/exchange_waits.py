"""What one message round of a PS job waits at a shared shaped egress: the
standing queue of a FIFO, the drops of a shallow one, a fair queue's round; the terms of
:mod:`sluice_common.exchange`'s fixed point (its module doc has the formulas). Pure.
``c``: the model's constants (``ExchangeConstants``)."""

from __future__ import annotations

import math
from typing import Iterable, Protocol, Sequence

MSS_BYTES = 1448                # a full segment's payload (1500 MTU less IP, TCP, timestamps)
DUPACK_SEGMENTS = 3             # duplicate ACKs that trigger a fast retransmit
# what a loss-based congestion control keeps of its window after a drop (RFC 8312's
# beta_cubic; Reno halves it)
LOSS_BASED_BETA = {"cubic": 0.7, "reno": 0.5}


def standing_fill(cc: str | None, calibrated: float) -> float:
    """The share of a FIFO its senders keep full under the hosts' congestion control
    ``cc``: the ``calibrated`` one (the constants were fitted with BBR, which paces to the
    path's delivery rate and keeps the standing queue short; None: the machine's), unless
    the hosts run a loss-based control, whose windows grow until the FIFO drops and then
    fall to ``beta`` of themselves, so the queue saws between ``beta`` and all of the
    buffer: ``(1 + beta) / 2`` of it on average, never less than the calibrated share."""
    beta = LOSS_BASED_BETA.get((cc or "").lower())
    return calibrated if beta is None else max(calibrated, (1.0 + beta) / 2.0)


def backs_off_on_loss(cc: str | None) -> bool:
    """Does the hosts' congestion control ``cc`` shrink its window on a drop (CUBIC,
    Reno), so that a shallow FIFO bounds the backlog its senders keep? BBR (None: the
    machine's) paces to the delivery rate and keeps sending what a drop lost."""
    return (cc or "").lower() in LOSS_BASED_BETA


class WaitConstants(Protocol):
    """The constants these terms read (``sluice_common.exchange.ExchangeConstants``)."""
    queue_fill: float
    queue_fill_per_sender: float
    burst_bytes: float
    loss_timeouts: float
    rto_min_s: float
    fair_round_bytes: float
    backlog_bytes: float


def busy_share(ahead: Iterable[float]) -> float:
    """``busy_j = 1 - prod(1 - rho_i)``: the chance that one of the jobs ``ahead`` (each
    sending a share ``rho_i`` of its iteration) is sending when a message of job j comes."""
    # a share already in [0, 1] is its own clamp: the comparison costs less than min/max
    return 1.0 - math.prod([1.0 - (p if 0.0 <= p <= 1.0 else min(1.0, max(0.0, p)))
                            for p in ahead])


def queue_wait_s(ahead: Sequence[float], left: float, buffer_bytes: float,
                 c: WaitConstants) -> float:
    """What one message round of a job waits at a shared egress (module doc): ``busy_j *
    fill(m_j) * Q / C_k``. ``ahead``: the send shares ``rho_i`` of the other jobs in its
    class and the more urgent ones; ``left``: the rate its class has, bytes/s; ``Q``: the
    FIFO's bytes per class."""
    return _queue_wait(busy_share(ahead), sum(ahead), left, buffer_bytes, c)


def _queue_wait(busy: float, senders: float, left: float, buffer_bytes: float,
                c: WaitConstants) -> float:
    """:func:`queue_wait_s` of ``busy = busy_share(ahead)`` and ``senders = sum(ahead)``."""
    if not left > 0 or buffer_bytes < 0:
        raise ValueError("the class's rate must be > 0 and buffer_bytes >= 0")
    fill = min(1.0, c.queue_fill + c.queue_fill_per_sender * max(0.0, senders - 1))
    return busy * fill * buffer_bytes / left


def overflow_share(ahead: Sequence[float], buffer_bytes: float,
                   c: WaitConstants) -> float:
    """The share of what arrives at once at a busy FIFO that does not fit in it: the
    message's own sender and the others sending at the same time (``1 + sum(ahead)`` on
    average) may each bring one burst (``burst_bytes``: what a host's shaper or TCP's
    window releases back to back); a FIFO of ``buffer_bytes`` holds that much of it.
    0 for a FIFO deeper than every sender's burst together (the deep FIFO)."""
    return _overflow(sum(ahead), buffer_bytes, c)


def _overflow(senders: float, buffer_bytes: float, c: WaitConstants) -> float:
    """:func:`overflow_share` of ``senders = sum(ahead)``."""
    arriving = (1.0 + senders) * c.burst_bytes
    return max(0.0, 1.0 - buffer_bytes / arriving) if arriving > 0 else 0.0


def tail_share(message_bytes: float | None) -> float:
    """The chance that a drop in a message of ``message_bytes`` needs a timeout: it hits one
    of the message's last ``DUPACK_SEGMENTS`` segments, after which too few segments follow
    to send the three duplicate ACKs of a fast retransmit, ``min(1, 3 MSS / bytes)``. None:
    a control message (one segment)."""
    if message_bytes is None or message_bytes <= DUPACK_SEGMENTS * MSS_BYTES:
        return 1.0
    return DUPACK_SEGMENTS * MSS_BYTES / message_bytes


def loss_wait_s(ahead: Sequence[float], buffer_bytes: float,
                c: WaitConstants, message_bytes: float | None = None) -> float:
    """The loss and timeout term of a shallow FIFO: what one message round
    loses, on average, to drops, ``busy_j * overflow * tail * loss_timeouts * rto_min_s``.
    A round that meets the egress busy (``busy_j``) has the share ``overflow`` of its burst
    dropped (:func:`overflow_share`); a drop costs a timeout only where fast retransmit
    cannot recover it (``tail``, :func:`tail_share` of the round's message: 1 for control
    messages and small keys, small for a bulk key, whose drops are recovered while others
    fill the link, bench.fabric.shallow_loss); ``loss_timeouts`` (fitted on the
    calibration's own probe mix on the short FIFO) is how many retransmission timeouts of
    ``rto_min_s`` such a round pays: a lost tail segment, a lost SYN, a lost retransmission."""
    return _loss_wait(busy_share(ahead), sum(ahead), buffer_bytes, c, message_bytes)


def _loss_wait(busy: float, senders: float, buffer_bytes: float, c: WaitConstants,
               message_bytes: float | None) -> float:
    """:func:`loss_wait_s` of ``busy = busy_share(ahead)`` and ``senders = sum(ahead)``."""
    if buffer_bytes < 0:
        raise ValueError("buffer_bytes must be >= 0")
    return (busy * _overflow(senders, buffer_bytes, c) * tail_share(message_bytes)
            * c.loss_timeouts * c.rto_min_s)


def backlog_bytes(buffer_bytes: float, c: WaitConstants) -> float:
    """The bytes a round waits behind at a busy FIFO of ``buffer_bytes``: the FIFO's own,
    but never less than the senders' backlog (``backlog_bytes``). What a FIFO shorter
    than the backlog cannot hold is dropped and waits at its sender to be resent, still
    ahead of the round: a shorter FIFO moves the wait, it does not remove it (the link
    drains the same bytes either way; fitted on the calibration's mid-depth stage)."""
    return max(buffer_bytes, c.backlog_bytes)


def fifo_round_wait_s(ahead: Sequence[float], left: float, buffer_bytes: float,
                      c: WaitConstants,
                      message_bytes: float | None = None) -> float:
    """One message round's wait at a FIFO leaf: the backlog ahead of it (:func:`queue_wait_s`
    of :func:`backlog_bytes`) plus what drops cost it when the FIFO is shallow
    (:func:`loss_wait_s`; ``message_bytes``: the round's message, None a control message)."""
    # both terms read the same busy share and sum of ``ahead``: computed once. A
    # simulation asks this at every uplink of every job it re-times, so the terms of
    # _queue_wait, backlog_bytes, _loss_wait and _overflow are written out here, each
    # the same floating-point operations in the same order.
    busy = 1.0 - math.prod([1.0 - (p if 0.0 <= p <= 1.0 else min(1.0, max(0.0, p)))
                            for p in ahead])
    return fifo_wait_of_sums(busy, sum(ahead), left, buffer_bytes, c, message_bytes)


def fifo_wait_of_sums(busy: float, senders: float, left: float, buffer_bytes: float,
                      c: WaitConstants, message_bytes: float | None = None) -> float:
    """:func:`fifo_round_wait_s` of the two figures it reads of ``ahead``: ``busy =
    busy_share(ahead)`` and ``senders = sum(ahead)``, for a caller that keeps them summed."""
    if not left > 0 or buffer_bytes < 0:
        raise ValueError("the class's rate must be > 0 and buffer_bytes >= 0")
    fill = min(1.0, c.queue_fill + c.queue_fill_per_sender * max(0.0, senders - 1))
    backlog = max(buffer_bytes, c.backlog_bytes)
    arriving = (1.0 + senders) * c.burst_bytes
    overflow = max(0.0, 1.0 - buffer_bytes / arriving) if arriving > 0 else 0.0
    return (busy * fill * backlog / left
            + busy * overflow * tail_share(message_bytes) * c.loss_timeouts * c.rto_min_s)


def fifo_wait_of_sums_at(buffer_bytes: float, c: WaitConstants, mbps_to_Bps: float,
                         message_bytes: float | None = None):
    """:func:`fifo_wait_of_sums` as a function of ``(busy, senders, class_rate_mbps)``
    alone, the class's rate in Mbit/s (``left = class_rate_mbps * mbps_to_Bps * 1e6 / 8``
    bytes/s) and everything else read once: a simulation asks for it at every uplink of
    every job it re-times. The same floating-point operations in the same order."""
    if buffer_bytes < 0:
        raise ValueError("the class's rate must be > 0 and buffer_bytes >= 0")
    fill0, fill_per, burst = c.queue_fill, c.queue_fill_per_sender, c.burst_bytes
    backlog = max(buffer_bytes, c.backlog_bytes)
    tail, loss_timeouts, rto = tail_share(message_bytes), c.loss_timeouts, c.rto_min_s

    def wait(busy: float, senders: float, class_rate_mbps: float) -> float:
        left = class_rate_mbps * mbps_to_Bps * 1e6 / 8
        if not left > 0:
            raise ValueError("the class's rate must be > 0 and buffer_bytes >= 0")
        extra = senders - 1
        fill = fill0 + fill_per * (extra if extra > 0.0 else 0.0)    # max(0.0, extra)
        if not fill < 1.0:                                           # min(1.0, fill)
            fill = 1.0
        arriving = (1.0 + senders) * burst
        overflow = 1.0 - buffer_bytes / arriving if arriving > 0 else 0.0
        if not overflow > 0.0:                                       # max(0.0, overflow)
            overflow = 0.0
        return busy * fill * backlog / left + busy * overflow * tail * loss_timeouts * rto
    return wait


def fair_round_wait_s(same_class: Sequence[float], left: float,
                      c: WaitConstants) -> float:
    """The per-flow fair-share term of a fair-queued leaf: a message of a
    flow that has just become active leaves after one DRR round of every other flow of its
    class that has bytes queued, ``sum(rho_i) * fair_round_bytes / C_k``: ``sum(rho_i)``
    the others sending at once on average, ``fair_round_bytes`` what each sends per round
    ahead of it (a quantum, and the flows the hash puts in its bucket; fitted on the
    calibration's own probe mix on the fair queue)."""
    if not left > 0:
        raise ValueError("the class's rate must be > 0")
    return sum(min(1.0, max(0.0, p)) for p in same_class) * c.fair_round_bytes / left
