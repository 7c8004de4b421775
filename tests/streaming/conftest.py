"""Helpers for the StreamingDataset tests: small MDS datasets written byte-for-byte by hand (so
these tests do not depend on MDSWriter; the seed test uses MDSWriter itself)."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import pytest
import xxhash
import zstandard

sys.path.insert(0, str(Path(__file__).parent))  # logged_store, the reader script


def _shard_bytes(rows: list[tuple[int, bytes]]) -> bytes:
    # columns sorted: data (bytes, variable), id (int, 8 bytes)
    payloads = [struct.pack("<I", len(d)) + d + struct.pack("<q", i) for i, d in rows]
    config = json.dumps({"column_encodings": ["bytes", "int"], "column_names": ["data", "id"],
                         "column_sizes": [None, 8], "compression": None, "format": "mds", "hashes": ["xxh64"],
                         "size_limit": None, "version": 2}, sort_keys=True).encode()
    n = len(rows)
    start = 4 + 4 * (n + 1) + len(config)
    offsets = [start]
    for p in payloads:
        offsets.append(offsets[-1] + len(p))
    return struct.pack(f"<I{n + 1}I", n, *offsets) + config + b"".join(payloads)


def payload(i: int) -> bytes:
    return (b"%08d" % i) * (1 + i % 5)


def write_dataset(out: Path, num_samples: int, per_shard: int, compression: str | None = None) -> Path:
    """Samples {"id": i, "data": payload(i)} in shards of `per_shard`; index.json written last."""
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for k, first in enumerate(range(0, num_samples, per_shard)):
        rows = [(i, payload(i)) for i in range(first, min(num_samples, first + per_shard))]
        raw = _shard_bytes(rows)
        name = f"shard.{k:05d}.mds"
        raw_data = {"basename": name, "bytes": len(raw), "hashes": {"xxh64": xxhash.xxh64(raw).hexdigest()}}
        zip_data = None
        if compression == "zstd":
            z = zstandard.ZstdCompressor(level=3).compress(raw)
            zip_data = {"basename": name + ".zstd", "bytes": len(z), "hashes": {"xxh64": xxhash.xxh64(z).hexdigest()}}
            (out / (name + ".zstd")).write_bytes(z)
        else:
            (out / name).write_bytes(raw)
        entries.append({"column_encodings": ["bytes", "int"], "column_names": ["data", "id"], "column_sizes": [None, 8],
                        "compression": compression, "format": "mds", "hashes": ["xxh64"], "raw_data": raw_data,
                        "samples": len(rows), "size_limit": None, "version": 2, "zip_data": zip_data})
    (out / "index.json").write_text(json.dumps({"shards": entries, "version": 2}, sort_keys=True))
    return out


@pytest.fixture
def make_dataset(tmp_path):
    def make(num_samples=100, per_shard=10, compression=None, name="remote"):
        return write_dataset(tmp_path / name, num_samples, per_shard, compression)

    return make


def iterate_ranks(make_ds, world: int, workers: int, batch: int, monkeypatch):
    """Global sample sequence rebuilt from `world` simulated ranks (RANK/WORLD_SIZE env: one node),
    each reading through a torch DataLoader with `workers` workers and per-device batch `batch`."""
    import numpy as np
    from torch.utils.data import DataLoader

    from foundry.streaming.plan import interleave_ranks

    per_rank = []
    for rank in range(world):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", str(world))
        ds = make_ds(batch)
        loader = DataLoader(ds, batch_size=batch, num_workers=workers)
        per_rank.append(np.concatenate([b["id"].numpy() for b in loader]))
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    return interleave_ranks(per_rank, 1, world)  # one node of `world` ranks


@pytest.fixture
def ranks_iter(monkeypatch):
    return lambda make_ds, world, workers, batch: iterate_ranks(make_ds, world, workers, batch, monkeypatch)


@pytest.fixture
def sample_payload():
    return payload


@pytest.fixture
def logged():
    """The logged:// test store, registered in this process for the test."""
    import logged_store
    from foundry.plugins.manager import unregister_plugin

    logged_store.register()
    try:
        yield logged_store
    finally:
        unregister_plugin("test-logged-store")
