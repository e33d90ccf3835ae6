"""Per-job rate limit of progress reports: one token bucket per job."""

from __future__ import annotations

import threading
from typing import Callable


class TokenBucket:
    """``rate`` tokens per second, at most ``rate`` saved up; starts full."""

    def __init__(self, rate: float, now: float) -> None:
        self.rate, self.tokens, self.t = rate, rate, now

    def take(self, now: float) -> bool:
        self.tokens = min(self.rate, self.tokens + (now - self.t) * self.rate)
        self.t = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class RateLimiter:
    """A bucket per key (job id), made full on the key's first request and dropped by
    :meth:`forget` (a job removed and registered again starts with a full bucket)."""

    def __init__(self, rate: float, clock: Callable[[], float]) -> None:
        self.rate, self.clock = rate, clock
        self._buckets: dict[str, TokenBucket] = {}
        self._lock = threading.Lock()

    def admit(self, key: str) -> bool:
        with self._lock:
            now = self.clock()
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = TokenBucket(self.rate, now)
            return bucket.take(now)

    def forget(self, key: str) -> None:
        with self._lock:
            self._buckets.pop(key, None)
