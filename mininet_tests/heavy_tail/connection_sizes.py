"""The heavy-tail mix's per-connection byte distribution, from its generator (pure).

Each ps-lite connection of a heavy-tail job carries one direction of the job for its
whole life (ps-lite opens one ZMQ DEALER connection per peer and sends only over the
connections it opened: the worker's to its server carries the pushes, the server's to
its worker the pulls), so a connection's size is the job's bytes in that direction:
``batches * bytes_per_batch`` (:func:`mininet_tests.heavy_tail.mix.heavy_tail_mix`):

- batches: ``max(1, round(B))``, B bounded Pareto (shape ``alpha``) on
  ``[10 scale, 1000 scale]``: P(n) is the Pareto mass that rounds to n;
- bytes per batch: log-uniform on ``[bytes_lo, 10 bytes_lo]``.

So the size is a mixture, over n, of log-uniform laws on ``[n bytes_lo, 10 n bytes_lo]``
(:class:`mininet_fabric.pias_thresholds.SizeMixture`), exact up to the generator's
rounding of bytes per batch to 4 bytes. Derived from the generator's parameters, never
from measurements.
"""

from __future__ import annotations

from mininet_fabric.pias_thresholds import SizeMixture


def bounded_pareto_cdf(x: float, alpha: float, lo: float, hi: float) -> float:
    """P(B <= x) for B bounded Pareto (shape ``alpha``) on [lo, hi]."""
    if x <= lo:
        return 0.0
    if x >= hi:
        return 1.0
    return (1 - (lo / x) ** alpha) / (1 - (lo / hi) ** alpha)


def batch_counts(alpha: float, scale: float) -> dict[int, float]:
    """P(batches = n) of the mix: ``max(1, round(B))`` for B on [10 scale, 1000 scale]."""
    lo, hi = 10 * scale, 1000 * scale
    out: dict[int, float] = {}
    for n in range(1, int(round(hi)) + 1):
        below = 0.0 if n == 1 else bounded_pareto_cdf(n - 0.5, alpha, lo, hi)
        p = bounded_pareto_cdf(n + 0.5, alpha, lo, hi) - below
        if p > 0:
            out[n] = p
    return out


def connection_sizes(scale: float, bytes_lo: int, alpha: float = 1.1) -> SizeMixture:
    """The bytes one ps-lite connection of the heavy-tail mix carries (push or pull)."""
    if not scale > 0 or not bytes_lo > 0:
        raise ValueError(f"scale and bytes_lo must be > 0, got {scale}, {bytes_lo}")
    counts = batch_counts(alpha, scale)
    total = sum(counts.values())
    return SizeMixture(tuple((p / total, n * bytes_lo, 10.0 * n * bytes_lo)
                             for n, p in sorted(counts.items())))
