"""`foundry dataset verify`: every file of every shard is present, the right size, matches every
recorded hash (stored and decompressed), and has a sound header (sample count, offsets, config).
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from foundry.plugins.errors import FoundryError

from ..format.compression import decompress_file
from ..format.hashing import hash_file
from ..format.index import ShardInfo
from ..format.reader import open_shard
from .inspect import has_unsafe_columns, open_dataset_store, read_index


@dataclass
class ShardCheck:
    shard: str
    samples: int
    ok: bool = True
    problems: list[str] = field(default_factory=list)

    def fail(self, problem: str) -> None:
        self.ok = False
        self.problems.append(problem)


@dataclass
class VerifyReport:
    url: str
    shards: list[ShardCheck]

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.shards)

    @property
    def bad(self) -> list[ShardCheck]:
        return [s for s in self.shards if not s.ok]

    def as_dict(self) -> dict[str, Any]:
        return {"url": self.url, "ok": self.ok, "shards": len(self.shards),
                "samples": sum(s.samples for s in self.shards),
                "bad_shards": [{"shard": s.shard, "problems": s.problems} for s in self.bad]}


def _check_file(path: str, expected_bytes: int, hashes: dict[str, str], label: str, check: ShardCheck) -> None:
    size = os.path.getsize(path)
    if size != expected_bytes:
        check.fail(f"{label}: {size} bytes, index.json says {expected_bytes}")
    known = dict(hashes)
    if known:
        try:
            got = hash_file(path, list(known))
        except FoundryError as exc:
            check.fail(f"{label}: {exc.message}")
            return
        for algo, digest in known.items():
            if got[algo] != digest:
                check.fail(f"{label}: {algo} mismatch (got {got[algo]}, index.json says {digest})")


def _check_mds_header(path: str, info: ShardInfo, check: ShardCheck) -> None:
    with open(path, "rb") as f:
        head = f.read(4)
        if len(head) < 4:
            return check.fail("header: truncated")
        (n,) = struct.unpack("<I", head)
        if n != info.samples:
            return check.fail(f"header: {n} samples, index.json says {info.samples}")
        offsets = np.frombuffer(f.read(4 * (n + 1)), "<u4")
        if len(offsets) != n + 1:
            return check.fail("header: truncated offsets table")
        config_start = 4 + 4 * (n + 1)
        if offsets[0] < config_start or np.any(np.diff(offsets.astype(np.int64)) < 0):
            return check.fail("header: offsets are not increasing")
        if int(offsets[-1]) != os.path.getsize(path):
            return check.fail(f"header: samples end at {int(offsets[-1])}, file is {os.path.getsize(path)} bytes")
        try:
            config = json.loads(f.read(int(offsets[0]) - config_start))
        except ValueError:
            return check.fail("header: the config JSON does not parse")
        for key in ("column_names", "column_encodings", "column_sizes"):
            if config.get(key) != info.entry.get(key):
                check.fail(f"header: config {key} differs from index.json")


def verify_shard(store, info: ShardInfo, workdir: str) -> ShardCheck:
    check = ShardCheck(info.remote_basename, info.samples)
    raw_paths = []
    try:
        for f in info.files:
            local = os.path.join(workdir, f.remote_basename)
            try:
                store.get_file(f.remote_basename, local)
            except FoundryError as exc:
                check.fail(f"{f.remote_basename}: cannot fetch ({exc.message})")
                continue
            _check_file(local, f.remote_bytes, f.remote_hashes, f.remote_basename, check)
            raw = local
            if f.zip_basename:
                raw = os.path.join(workdir, f.raw_basename)
                try:
                    decompress_file(info.compression, local, raw)
                except FoundryError as exc:
                    check.fail(f"{f.remote_basename}: {exc.message}")
                    continue
                finally:
                    os.unlink(local)
                _check_file(raw, f.raw_bytes, f.raw_hashes, f.raw_basename, check)
            raw_paths.append(raw)
        if check.ok and info.format == "mds":
            _check_mds_header(raw_paths[0], info, check)
        if check.ok:
            try:  # the first and last samples decode
                with open_shard(info, raw_paths[0], meta_path=raw_paths[1] if len(raw_paths) > 1 else None,
                                allow_unsafe_types=True) as reader:
                    for i in {0, len(reader) - 1} if len(reader) else ():
                        # Never unpickle while verifying: unsafe shards are checked as bytes only.
                        reader.get_sample_bytes(i) if has_unsafe_columns(info) else reader.get_sample(i)
            except Exception as exc:  # noqa: BLE001 - any failure here means a bad shard
                check.fail(f"decoding: {exc}")
    finally:
        for path in raw_paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    return check


def verify_dataset(url: str, workers: int = 4, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """Check every shard of the dataset at `url`; never raises for a bad shard, reports it."""
    store = open_dataset_store(url)
    shards = read_index(store)
    done = 0
    results: list[ShardCheck] = []
    with tempfile.TemporaryDirectory(prefix="foundry-verify-") as workdir, ThreadPoolExecutor(workers) as pool:
        for i, check in enumerate(pool.map(lambda s: verify_shard(store, s, workdir), shards)):
            results.append(check)
            done += 1
            if progress:
                progress(done, len(shards))
    return VerifyReport(url, results)
