"""Parallel transfers shared by the remote stores: ranged downloads and part uploads.

Memory stays bounded: each worker holds at most one part, and parts are read from (or written to)
the local file by offset, so a 100 GiB file moves with `concurrency * part_size` bytes in memory.
Each part is retried on its own by the caller's `fetch`/`upload` function.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

from foundry.plugins.errors import ConfigError
from foundry.plugins.part_digests import PartDigests, current_digests
from foundry.plugins.retry import RetryPolicy
from foundry.plugins.storage import ProgressCallback, atomic_destination

from .request_gate import RequestGate

T = TypeVar("T")
MiB = 1 << 20
MAX_PARTS = 10_000


@dataclass(frozen=True)
class TransferConfig:
    part_size: int = 8 * MiB
    concurrency: int = 8
    # Objects up to this size move in one request.
    threshold: int = 8 * MiB

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> "TransferConfig":
        part = int(options.get("part_size", cls.part_size))
        if part < 5 * MiB and not options.get("allow_small_parts"):
            raise ConfigError(f"part_size {part} is below 5 MiB", hint="object stores reject smaller parts")
        return cls(
            part_size=part,
            concurrency=max(1, int(options.get("concurrency", cls.concurrency))),
            threshold=int(options.get("multipart_threshold", max(part, cls.threshold))),
        )

    def part_size_for(self, size: int) -> int:
        """The part size to use for an object of `size` bytes (never more than MAX_PARTS parts)."""
        return max(self.part_size, math.ceil(size / MAX_PARTS))


def _begin_digests() -> PartDigests | None:
    digests = current_digests()
    if digests is not None:
        digests.begin()
    return digests


def retry_policy_from(options: dict[str, Any]) -> RetryPolicy:
    """RetryPolicy from store options: attempts, retry_base_delay, retry_max_delay, retry_deadline."""
    default = RetryPolicy()
    attempts = int(options.get("attempts", default.attempts))
    if attempts < 1:
        raise ConfigError(f"attempts must be at least 1, not {attempts}")
    return RetryPolicy(
        attempts=attempts,
        base_delay=float(options.get("retry_base_delay", default.base_delay)),
        max_delay=float(options.get("retry_max_delay", default.max_delay)),
        deadline=options.get("retry_deadline", default.deadline),
    )


def part_ranges(size: int, part_size: int) -> list[tuple[int, int]]:
    """[start, end) byte ranges covering `size` bytes."""
    return [(start, min(start + part_size, size)) for start in range(0, size, part_size)]


def locked_progress(progress: ProgressCallback | None) -> ProgressCallback | None:
    """Serialize calls to `progress` from worker threads."""
    if progress is None:
        return None
    lock = threading.Lock()

    def report(n: int) -> None:
        with lock:
            progress(n)

    return report


def run_parallel(items: Sequence[T], fn: Callable[[T], Any], concurrency: int) -> list[Any]:
    """`[fn(item) for item in items]` on `concurrency` threads; the first failure cancels the rest."""
    if concurrency <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(concurrency, len(items)), thread_name_prefix="foundry-xfer") as pool:
        futures = [pool.submit(fn, item) for item in items]
        done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        for future in futures:
            if future.done() and future.exception() is not None:
                for other in pending:
                    other.cancel()
                raise future.exception()
        return [f.result() for f in futures]


def parallel_download(
    path: str | os.PathLike,
    size: int,
    fetch: Callable[[int, int], bytes],
    config: TransferConfig,
    progress: ProgressCallback | None = None,
    gate: RequestGate | None = None,
    ticket: int = 0,
) -> None:
    """Download `size` bytes with `fetch(start, end)` into `path` atomically, parts in parallel;
    with a `gate`, each part holds one of its slots, in line by (`ticket`, offset)."""
    report = locked_progress(progress)
    digests = _begin_digests()
    with atomic_destination(path) as tmp:
        fd = os.open(tmp, os.O_WRONLY)
        try:
            os.ftruncate(fd, size)

            def one(byte_range: tuple[int, int]) -> None:
                try:
                    with gate.slot(ticket, byte_range[0]) if gate else contextlib.nullcontext():
                        data = fetch(*byte_range)
                    os.pwrite(fd, data, byte_range[0])
                    if digests is not None:
                        digests.feed(byte_range[0], data)
                except BaseException:
                    if digests is not None:
                        digests.fail()
                    raise
                if report:
                    report(len(data))

            ranges = part_ranges(size, config.part_size_for(size))
            if gate:
                gate.line_up(ticket, [start for start, _ in ranges])
            run_parallel(ranges, one, config.concurrency)
        finally:
            os.close(fd)


def parallel_upload_parts(
    path: str | os.PathLike,
    size: int,
    upload: Callable[[int, bytes], Any],
    config: TransferConfig,
    progress: ProgressCallback | None = None,
) -> list[Any]:
    """Read `path` in parts and call `upload(part_number, data)` (1-based) in parallel.

    Returns the results of `upload` in part order. Each worker reads its own part by offset.
    """
    report = locked_progress(progress)
    ranges = part_ranges(size, config.part_size_for(size))
    digests = _begin_digests()
    fd = os.open(path, os.O_RDONLY)
    try:

        def one(numbered: tuple[int, tuple[int, int]]) -> Any:
            number, (start, end) = numbered
            try:
                data = os.pread(fd, end - start, start)
                if len(data) != end - start:
                    raise ConfigError(f"{path} changed size during the upload",
                                      hint="upload a file that is not being written")
                if digests is not None:  # hashed before it is sent: the digests describe the bytes uploaded
                    digests.feed(start, data)
            except BaseException:
                if digests is not None:
                    digests.fail()
                raise
            result = upload(number, data)
            if report:
                report(len(data))
            return result

        return run_parallel(list(enumerate(ranges, start=1)), one, config.concurrency)
    finally:
        os.close(fd)
