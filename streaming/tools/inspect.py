"""`foundry dataset inspect`: what a dataset holds, from its index.json and its first shard.

Works on any registered storage URL (or a local path); reads index.json and, for the sample preview,
downloads only the first shard.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from typing import Any

import numpy as np

from foundry.plugins.errors import DataError, ObjectNotFoundError

from ..format.compression import decompress_file
from ..format.hashing import check_shard_file
from ..format.index import INDEX_BASENAME, ShardInfo, load_index
from ..format.reader import open_shard


def open_dataset_store(url: str):
    from foundry.plugins.manager import open_store

    return open_store(url)


def read_index(store) -> list[ShardInfo]:
    try:
        data = store.get(INDEX_BASENAME)
    except ObjectNotFoundError:
        raise DataError(f"no index.json at {store.url}", hint="is this the dataset's root folder?") from None
    return load_index(data, store.url)


def fetch_shard(store, info: ShardInfo, workdir: str) -> list[str]:
    """Download a shard's files into `workdir`, checked against their fastest recorded hash and
    decompressed; returns their local raw paths. A corrupt file raises rather than previewing garbage."""
    paths = []
    for f in info.files:
        remote_local = os.path.join(workdir, f.remote_basename)
        store.get_file(f.remote_basename, remote_local)
        check_shard_file(remote_local, f.remote_hashes or {}, shard=f.remote_basename, dataset=store.url)
        raw_local = os.path.join(workdir, f.raw_basename)
        if f.zip_basename:
            decompress_file(info.compression, remote_local, raw_local)
            os.unlink(remote_local)
        paths.append(raw_local)
    return paths


def preview(value: Any, width: int = 60) -> Any:
    """A short, JSON-friendly rendering of a decoded value."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    if isinstance(value, np.ndarray):
        return f"<ndarray {value.dtype} {list(value.shape)}>"
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "mode") and hasattr(value, "size") and hasattr(value, "tobytes"):
        return f"<image {value.mode} {value.size[0]}x{value.size[1]}>"
    if isinstance(value, str):
        return value if len(value) <= width else value[: width - 1] + "…"
    if isinstance(value, (list, tuple)):
        return [preview(v, width) for v in value[:5]] + (["…"] if len(value) > 5 else [])
    if isinstance(value, dict):
        return {k: preview(v, width) for k, v in list(value.items())[:10]}
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    return f"<{type(value).__name__}>"


def inspect_dataset(url: str, samples: int = 3, allow_unsafe_types: bool = False) -> dict[str, Any]:
    """Summary of a dataset: shards, samples, bytes, columns, compression, and a few samples."""
    store = open_dataset_store(url)
    shards = read_index(store)
    columns = []
    if shards:
        first = shards[0]
        columns = [{"name": n, "encoding": e, "size": s}
                   for n, e, s in zip(first.column_names, first.column_encodings, first.column_sizes)]
    summary: dict[str, Any] = {
        "url": url,
        "shards": len(shards),
        "samples": sum(s.samples for s in shards),
        "raw_bytes": sum(f.raw_bytes for s in shards for f in s.files),
        "stored_bytes": sum(s.remote_bytes for s in shards),
        "formats": sorted(Counter(s.format for s in shards)),
        "compression": sorted({s.compression or "none" for s in shards}),
        "hashes": sorted({h for s in shards for h in s.hashes}),
        "size_limit": shards[0].size_limit if shards else None,
        "columns": columns,
        "samples_preview": [],
    }
    if samples > 0 and shards:
        first = next((s for s in shards if s.samples), None)
        if first is not None:
            with tempfile.TemporaryDirectory(prefix="foundry-inspect-") as workdir:
                paths = fetch_shard(store, first, workdir)
                decode_all = allow_unsafe_types or not has_unsafe_columns(first)
                # Opened with the opt-in, but unsafe columns are decoded only when the caller asked.
                with open_shard(first, paths[0], meta_path=paths[1] if len(paths) > 1 else None,
                                allow_unsafe_types=True) as reader:
                    for i in range(min(samples, len(reader))):
                        sample = reader.get_sample(i) if decode_all else _safe_sample(reader, first, i)
                        summary["samples_preview"].append({k: preview(v) for k, v in sample.items()})
    return summary


def has_unsafe_columns(info: ShardInfo) -> bool:
    from ..format.encodings import get_encoding

    return info.format == "mds" and any(not get_encoding(e).safe for e in info.column_encodings)


def _safe_sample(reader, info: ShardInfo, i: int) -> dict[str, Any]:
    """A sample with unsafe columns shown as their size only (never unpickled)."""
    from ..format.encodings import get_encoding

    raw = reader.get_sample_bytes(i)
    sizes = [s for s in info.column_sizes]
    nvar = sum(1 for s in sizes if s is None)
    var = iter(np.frombuffer(raw, "<u4", nvar).tolist())
    pos, out = 4 * nvar, {}
    for name, enc, size in zip(info.column_names, info.column_encodings, sizes):
        size = next(var) if size is None else size
        data = raw[pos:pos + size]
        codec = get_encoding(enc)
        out[name] = codec.decode(data) if codec.safe else f"<{enc}: {size} bytes, not decoded>"
        pos += size
    return out
