"""A request-rate limit as S3 enforces one per prefix: a FaultProxy gate that admits `rate` requests per
second (a token bucket holding at most `burst`) and answers the rest 503 SlowDown, as S3 does until the
request rate falls. It counts what it admitted and refused, by time, so a test can tell how much of the
allowed rate the client used.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional

from tests.fault_proxy import ErrorAnswer, ProxiedRequest, any_request

SLOW_DOWN = ErrorAnswer(503, "Slow Down", "SlowDown", "Please reduce your request rate.")


class Throttle:
    def __init__(
        self,
        rate: float,
        *,
        burst: Optional[float] = None,
        applies_to: Callable[[ProxiedRequest], bool] = any_request,
    ) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        self.rate = rate
        self.burst = burst if burst is not None else max(2.0, rate / 4)
        self._applies_to = applies_to
        self._lock = threading.Lock()
        self._tokens = self.burst
        self._refilled = time.monotonic()
        self.admitted: list[float] = []  # time.monotonic() of each admitted request
        self.refused: list[float] = []  # ... and of each refused one

    def __call__(self, request: ProxiedRequest) -> Optional[ErrorAnswer]:
        if not self._applies_to(request):
            return None
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._refilled) * self.rate)
            self._refilled = now
            if self._tokens >= 1:
                self._tokens -= 1
                self.admitted.append(now)
                return None
            self.refused.append(now)
            return SLOW_DOWN

    def admitted_rate(self) -> float:
        """Requests admitted per second, from the first request to the last admitted one."""
        with self._lock:
            if len(self.admitted) < 2:
                return 0.0
            first = min(self.admitted[0], self.refused[0]) if self.refused else self.admitted[0]
            return (len(self.admitted) - 1) / (self.admitted[-1] - first)
