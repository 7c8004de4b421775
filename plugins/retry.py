"""Retries with exponential backoff and full jitter, shared by every backend.

`attempts` counts attempts, not retries: attempts=1 means no retry. Only errors the caller
classifies as transient are retried; anything else propagates at once. Why the storage backends use
this instead of the SDKs' own retry settings: docs/storage.md.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    base_delay: float = 0.2
    max_delay: float = 5.0
    # Give up starting new attempts once this much time has passed since the first one.
    deadline: float | None = 120.0

    def delay(self, attempt: int) -> float:
        """Seconds to sleep after failed attempt number `attempt` (1-based): full jitter."""
        return random.uniform(0, min(self.max_delay, self.base_delay * (2 ** (attempt - 1))))


def call_with_retries(
    fn: Callable[[], T],
    *,
    policy: RetryPolicy,
    is_transient: Callable[[BaseException], bool],
    on_give_up: Callable[[BaseException, int], BaseException] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call `fn` until it succeeds, a non-transient error occurs, or the attempts run out.

    When the attempts run out, `on_give_up(last_error, attempts_made)` may turn the last error
    into the exception to raise (for example a TransientStorageError with a hint).
    """
    start = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except BaseException as exc:  # noqa: BLE001 - classified below
            if not is_transient(exc):
                raise
            out_of_time = policy.deadline is not None and time.monotonic() - start > policy.deadline
            if attempt >= policy.attempts or out_of_time:
                if on_give_up is None:
                    raise
                raise on_give_up(exc, attempt) from exc
            sleep(policy.delay(attempt))
