"""`foundry dataset convert`: JSONL, CSV/TSV or an image folder -> an MDS dataset (local or remote).

With several workers, each converts a contiguous slice into `part-NNNNN/` under the destination
(a complete sub-dataset with its own index.json), and the top-level index.json, which names every
shard as `part-NNNNN/shard...` exactly as mosaicml-streaming's merge_index does, is written last.
"""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from foundry.plugins.errors import ConfigError, DataError

from .convert_sources import Part, detect_kind, infer_columns, samples, split
from .merge import merged_index
from ..format.index import INDEX_BASENAME, load_index
from ..writer import MDSWriter

# progress(done, total): samples written so far and the expected total (None when unknown).
ConvertProgress = Callable[[int, "int | None"], None]

_counter = None  # the shared sample counter, in worker processes


@dataclass
class ConvertResult:
    source_kind: str
    dst: str
    samples: int
    shards: int
    columns: dict[str, str]
    workers: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def parse_columns(text: str | None) -> dict[str, str] | None:
    """`name:encoding,name:encoding` -> dict (encodings may hold ':' themselves: ndarray:int32)."""
    if not text:
        return None
    columns = {}
    for item in text.split(","):
        name, sep, encoding = item.partition(":")
        if not sep or not name or not encoding:
            raise ConfigError(f"bad column spec {item!r}", hint="use NAME:ENCODING[,NAME:ENCODING...]")
        columns[name.strip()] = encoding.strip()
    return columns


def _join(dst: str, sub: str) -> str:
    return f"{dst.rstrip('/')}/{sub}"


def _write_part(part: Part, dst: str, columns: dict[str, str], options: dict[str, Any], counter=None) -> bytes:
    """Write one part as a whole dataset at `dst`; its index.json."""
    counter = counter if counter is not None else _counter
    pending = 0
    with MDSWriter(out=dst, columns=columns, **options) as writer:
        for sample in samples(part, columns):
            writer.write(sample)
            pending += 1
            if pending == 256 and counter is not None:
                with counter.get_lock():
                    counter.value += pending
                pending = 0
    if counter is not None and pending:
        with counter.get_lock():
            counter.value += pending
    return writer.index


class _LocalCounter:
    """The in-process stand-in for multiprocessing.Value("q") when there are no workers."""

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def get_lock(self) -> threading.Lock:
        return self._lock


def _init_worker(counter) -> None:
    global _counter
    _counter = counter


def convert(
    src: str,
    dst: str,
    *,
    columns: dict[str, str] | None = None,
    compression: str | None = None,
    hashes: list[str] | None = None,
    size_limit: int | str | None = 1 << 26,
    workers: int = 1,
    exist_ok: bool = False,
    progress: ConvertProgress | None = None,
) -> ConvertResult:
    """Convert `src` into an MDS dataset at `dst` (a path or any registered storage URL)."""
    kind = detect_kind(src)
    columns = columns or infer_columns(kind, src)
    if workers < 1:
        raise ConfigError("--workers must be at least 1")
    parts = split(kind, src, workers)
    total = sum(len(p.files) for p in parts) if kind == "images" else None
    options = {"compression": compression, "size_limit": size_limit, "exist_ok": exist_ok}
    if hashes is not None:  # None: the writer's default (MDSWriter reads hashes=None as "none")
        options["hashes"] = hashes
    ctx = multiprocessing.get_context("spawn")
    # A shared counter only when worker processes exist: creating one needs file descriptors that
    # hosts capturing stdio (the TUI) cannot hand over.
    counter = ctx.Value("q", 0) if len(parts) > 1 else _LocalCounter()
    done = threading.Event()

    def report() -> None:
        while not done.wait(0.2):
            progress(counter.value, total)

    reporter = threading.Thread(target=report, daemon=True) if progress else None
    if reporter:
        reporter.start()
    try:
        if len(parts) == 1:
            entries = [info.entry for info in load_index(_write_part(parts[0], dst, columns, options, counter))]
        else:
            entries = _convert_parallel(parts, dst, columns, options, counter, ctx)
    finally:
        done.set()
        if reporter:
            reporter.join()
    if progress:
        progress(counter.value, total if total is not None else counter.value)
    return ConvertResult(kind, dst, sum(e["samples"] for e in entries), len(entries), columns, len(parts))


def _convert_parallel(parts, dst, columns, options, counter, ctx) -> list[dict]:
    from foundry.plugins.manager import open_store

    is_remote = "://" in dst
    if is_remote:
        store = open_store(dst)
        if store.exists(INDEX_BASENAME) and not options["exist_ok"]:
            raise DataError(f"{dst} already holds a dataset (index.json)", hint="pass --overwrite to replace it")
    else:
        import os

        if os.path.isdir(dst) and os.listdir(dst) and not options["exist_ok"]:
            raise DataError(f"output directory {dst} is not empty", hint="pass --overwrite to replace it")
        if os.path.isdir(dst):
            import shutil

            shutil.rmtree(dst)
    names = [f"part-{i:05}" for i in range(len(parts))]
    with ProcessPoolExecutor(len(parts), mp_context=ctx, initializer=_init_worker, initargs=(counter,)) as pool:
        futures = [pool.submit(_write_part, part, _join(dst, name), columns, options)
                   for part, name in zip(parts, names)]
        results = [f.result() for f in futures]
    index = merged_index(list(zip(names, results)))
    merged = [info.entry for info in load_index(index)]  # what we publish must parse
    if is_remote:
        store.put(INDEX_BASENAME, index)
    else:
        from foundry.plugins.storage import atomic_destination

        with atomic_destination(_join(dst, INDEX_BASENAME)) as tmp, open(tmp, "wb") as f:
            f.write(index)
    return merged
