"""Run a blocking call with a time limit (a shard download whose client has no timeout of its own)."""

from __future__ import annotations

import threading
from typing import Any, Callable


def call_with_timeout(fn: Callable[[], Any], timeout: float | None, name: str) -> Any:
    """`fn()`, or TimeoutError after `timeout` seconds (None or 0: no limit). The call runs in a
    daemon thread, left to finish on its own when it overruns: a stuck socket cannot be interrupted."""
    if not timeout:
        return fn()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True, name=name)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise TimeoutError(f"{name} took more than {timeout}s")
    if "error" in box:
        raise box["error"]
    return box["value"]
