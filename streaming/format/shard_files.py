"""Turn a shard's streamed sample body into its final files, hashed (and compressed) on disk.

While writing, a shard's samples are appended to a body file and only their sizes are kept in
memory. Finishing a shard writes the header (mds) or header line + meta file (split formats),
copies the body after it in chunks while hashing, then compresses if asked. Memory stays bounded
by the chunk size, whatever the shard size.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import numpy as np

from foundry.plugins.errors import DataError
from foundry.plugins.storage import atomic_destination

from .block_digests import BlockHasher
from .compression import compress_file
from .hashing import hash_file, new_hashers

_CHUNK = 4 << 20
# Offsets are uint32: a shard file must stay strictly below this many bytes.
MAX_SHARD_BYTES = 1 << 32


def offsets_table(sizes: list[int], start: int, where: str) -> np.ndarray:
    offsets = np.empty(len(sizes) + 1, np.int64)
    offsets[0] = 0
    np.cumsum(np.asarray(sizes, np.int64), out=offsets[1:])
    offsets += start
    if offsets[-1] >= MAX_SHARD_BYTES:
        raise DataError(
            f"{where} would be {int(offsets[-1])} bytes; MDS offsets are uint32 so a shard must stay below 4 GiB",
            hint="use a smaller size_limit",
        )
    return offsets.astype("<u4")


def _write_with_body(path: str, head: bytes, body_path: str | None, algos: list[str],
                     blocks: BlockHasher | None = None) -> dict[str, Any]:
    hashers = new_hashers(algos)
    feeds = list(hashers.values()) + ([blocks] if blocks is not None else [])  # each sees every byte
    size = len(head)
    with atomic_destination(path) as tmp, open(tmp, "wb") as out:
        out.write(head)
        for h in feeds:
            h.update(head)
        if body_path is not None:
            with open(body_path, "rb") as body:
                if not feeds:
                    size += os.fstat(body.fileno()).st_size
                    _copy_plain(body, out)
                else:
                    while chunk := body.read(_CHUNK):
                        out.write(chunk)
                        size += len(chunk)
                        for h in feeds:
                            h.update(chunk)
    return {"basename": None, "bytes": size, "hashes": {a: h.hexdigest() for a, h in hashers.items()}}


def _copy_plain(src, dst) -> None:
    dst.flush()
    remaining = os.fstat(src.fileno()).st_size
    try:
        while remaining > 0:
            copied = os.copy_file_range(src.fileno(), dst.fileno(), min(remaining, 1 << 30))
            if copied == 0:
                break
            remaining -= copied
        if remaining == 0:
            return
    except (OSError, AttributeError):
        pass
    src.seek(os.fstat(src.fileno()).st_size - remaining)
    dst.seek(0, os.SEEK_END)
    while chunk := src.read(_CHUNK):
        dst.write(chunk)


def write_mds_file(path: str, config: bytes, sizes: list[int], body_path: str, algos: list[str],
                   block_digests: bool = False) -> tuple[dict[str, Any], bytes | None]:
    """`uint32 n, uint32 offsets[n+1], config, body` into `path`; returns ({bytes, hashes}, the
    shard's block digest record with `block_digests` and a hash to check, else None: the writer
    gathers the records into the dataset's one digest file, format.block_digests)."""
    n = len(sizes)
    start = 4 + 4 * (n + 1) + len(config)
    offsets = offsets_table(sizes, start, f"shard {os.path.basename(path)}")
    head = struct.pack("<I", n) + offsets.tobytes() + config
    blocks = BlockHasher() if block_digests and algos else None
    info = _write_with_body(path, head, body_path, algos, blocks)
    return info, (blocks.dump(info["bytes"], info["hashes"]) if blocks is not None else None)


def write_split_files(
    data_path: str, meta_path: str, header: bytes, config: bytes, sizes: list[int], body_path: str, algos: list[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Data file (`header` + body) and meta file (n, offsets into the data file, config)."""
    offsets = offsets_table(sizes, len(header), f"shard {os.path.basename(data_path)}")
    data_info = _write_with_body(data_path, header, body_path, algos)
    meta = struct.pack("<I", len(sizes)) + offsets.tobytes() + config
    meta_info = _write_with_body(meta_path, meta, None, algos)
    return data_info, meta_info


def finish_file(
    local_dir: str, raw_basename: str, raw_info: dict[str, Any], compression: str | None,
    algos: list[str],
) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    """Compress the raw file if asked; returns (raw_data, zip_data, basename to upload).

    A compressed shard keeps only its compressed file, as mosaicml-streaming's writer does: the
    raw file exists only in a reader's cache.
    """
    raw_info["basename"] = raw_basename
    if not compression:
        return raw_info, None, raw_basename
    from .compression import compression_extension

    zip_basename = f"{raw_basename}.{compression_extension(compression)}"
    raw_path = os.path.join(local_dir, raw_basename)
    zip_path = os.path.join(local_dir, zip_basename)
    compress_file(compression, raw_path, zip_path)
    zip_info = {"basename": zip_basename, "bytes": os.path.getsize(zip_path), "hashes": hash_file(zip_path, algos)}
    os.unlink(raw_path)
    return raw_info, zip_info, zip_basename
