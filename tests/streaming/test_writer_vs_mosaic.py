"""What MDSWriter leaves on disk is what mosaicml-streaming 0.13's MDSWriter leaves (issue 13.4):
the same file names, modes that follow the umask, no extra files, the same index and, for the same
samples and compression, total bytes within a few percent. And the default hash (issue 15.7) is
one mosaic reads and validates."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from foundry.streaming.format.block_digests import DATASET_BASENAME, INDEX_KEY
from foundry.streaming.writer import JSONWriter, MDSWriter

pytestmark = pytest.mark.slow

COLUMNS = {"id": "int", "text": "str", "tokens": "ndarray:int32"}
COMPRESSIONS = [None, "zstd", "gz"]
SAMPLES = """
import numpy as np
def samples(n=1500):
    rng = np.random.default_rng(0)
    for i in range(n):
        tokens = rng.integers(0, 50000, 64 + i % 13).astype(np.int32)
        yield {"id": i, "text": "hello world " * (i % 7), "tokens": tokens}
"""

MOSAIC = """
import json, os, sys
from pathlib import Path
from streaming import JSONWriter, MDSWriter, StreamingDataset
exec(sys.argv[1])
base, columns, compressions = Path(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
os.umask(0o022)
for c in compressions:
    for hashes in ([], ["xxh3_64"]):
        out = base / f"mosaic-{c}-{'-'.join(hashes) or 'nohash'}"
        with MDSWriter(out=str(out), columns=columns, compression=c, hashes=hashes, size_limit=1 << 16) as w:
            for s in samples():
                w.write(s)
# a split format too: data + meta files per shard, compressed
with JSONWriter(out=str(base / "mosaic-json"), columns={"id": "int", "text": "str"}, compression="zstd",
                size_limit=1 << 14) as w:
    for s in samples():
        w.write({"id": s["id"], "text": s["text"]})
# mosaic reads what Foundry writes by default, validating the default hash on every shard
counts = {}
for remote in sorted(base.glob("foundry-*-default")):
    ds = StreamingDataset(remote=str(remote), local=str(base / "cache" / remote.name), validate_hash="xxh3_64",
                          batch_size=1)
    counts[remote.name] = [int(ds[i]["id"]) for i in range(len(ds))]
print(json.dumps(counts))
"""


def _files(root: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (stat.S_IMODE(p.stat().st_mode), p.stat().st_size) for p in sorted(root.iterdir())}


def _foundry_write(out: Path, compression, **hashes) -> None:
    """`hashes=` only when given: not passing it is Foundry's default (xxh3_64)."""
    scope: dict = {}
    exec(SAMPLES, scope)
    with MDSWriter(out=str(out), columns=COLUMNS, compression=compression, size_limit=1 << 16, **hashes) as w:
        for s in scope["samples"]():
            w.write(s)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_files_modes_index_and_bytes_match_mosaic(mosaic_peer, tmp_path, umask_022):
    for c in COMPRESSIONS:
        _foundry_write(tmp_path / f"foundry-{c}-default", c)
        _foundry_write(tmp_path / f"foundry-{c}-xxh3_64", c, hashes=["xxh3_64"])
        _foundry_write(tmp_path / f"foundry-{c}-none", c, hashes=None)  # passed: none, as mosaic's default
    counts = json.loads(mosaic_peer(MOSAIC, SAMPLES, str(tmp_path), json.dumps(COLUMNS), json.dumps(COMPRESSIONS)))
    for c in COMPRESSIONS:
        ours, theirs = tmp_path / f"foundry-{c}-default", tmp_path / f"mosaic-{c}-nohash"
        mine, peer = _files(ours), _files(theirs)
        assert {m for m, _ in mine.values()} == {0o644} == {m for m, _ in peer.values()}, c
        # plus one file of block digests for the checked uncompressed shards (format.block_digests),
        # which mosaic ignores: it reads this dataset below
        digests = [n for n in mine if n == DATASET_BASENAME]
        assert digests == ([DATASET_BASENAME] if c is None else []), c
        mine = {n: v for n, v in mine.items() if n not in digests}
        assert list(mine) == list(peer), c  # same names, no raw copy beside compressed shards, no temporaries
        ours_bytes, peer_bytes = sum(s for _, s in mine.values()), sum(s for _, s in peer.values())
        assert abs(ours_bytes - peer_bytes) <= 0.03 * peer_bytes, (c, ours_bytes, peer_bytes)
        # with the same hash list the index is mosaic's, entry for entry (compressed bytes may differ
        # by the zstd/zlib build, so compare those by size only)
        # (plus, at the top level, where the block digests are: mosaic reads only version and shards)
        a = json.loads((tmp_path / f"foundry-{c}-xxh3_64" / "index.json").read_text())
        b = json.loads((tmp_path / f"mosaic-{c}-xxh3_64" / "index.json").read_text())
        assert (INDEX_KEY in a) == (c is None), c
        a.pop(INDEX_KEY, None)
        for entry in a["shards"] + b["shards"]:
            if entry["zip_data"]:
                zipped = entry["zip_data"]
                entry["zip_data"] = {"basename": zipped["basename"], "hashes": sorted(zipped["hashes"])}
        assert a == b, c
        if c is None:
            assert json.dumps(a, sort_keys=True).encode() == \
                (tmp_path / "mosaic-None-xxh3_64" / "index.json").read_bytes()
        # hashes=None: exactly mosaic's files and index.json (compressed bytes may differ by the codec build)
        none, nohash = tmp_path / f"foundry-{c}-none", tmp_path / f"mosaic-{c}-nohash"
        assert list(_files(none)) == list(_files(nohash)), c
        if c is None:
            assert _files(none) == _files(nohash)
            assert (none / "index.json").read_bytes() == (nohash / "index.json").read_bytes()
        assert counts[ours.name] == list(range(1500)), c
    scope: dict = {}
    exec(SAMPLES, scope)
    with JSONWriter(out=str(tmp_path / "foundry-json"), columns={"id": "int", "text": "str"}, compression="zstd",
                    size_limit=1 << 14, hashes=[]) as w:
        for s in scope["samples"]():
            w.write({"id": s["id"], "text": s["text"]})
    mine, peer = _files(tmp_path / "foundry-json"), _files(tmp_path / "mosaic-json")
    assert mine == peer and {m for m, _ in mine.values()} == {0o644}  # names, modes and sizes
