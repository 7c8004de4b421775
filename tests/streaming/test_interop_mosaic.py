"""Interop with the real mosaicml-streaming 0.13.0, both ways, sample for sample.

The peer runs in its own venv (tests/support/peers.py). Each direction compares one library's
decoding of a dataset with the other's: what mosaicml-streaming writes, Foundry reads identically
(index.json parsed bit-exactly, every hash verified, every encoding and compression), and what
Foundry writes, mosaicml-streaming's StreamingDataset reads identically. For deterministic
encodings and no compression, both writers must produce byte-identical files.
"""

from __future__ import annotations

import json
import pickle
import runpy
from pathlib import Path

import pytest

from foundry.streaming.tools.convert import convert
from foundry.streaming.format import decompress_file, dump_index, load_index, open_shard, verify_file
from foundry.streaming.format.block_digests import DATASET_BASENAME, INDEX_KEY
from foundry.streaming.writer import CSVWriter, JSONWriter, MDSWriter, TSVWriter, XSVWriter

pytestmark = pytest.mark.slow

SAMPLES_FILE = Path(__file__).with_name("interop_samples.py")
S = runpy.run_path(str(SAMPLES_FILE))
N = 12
HASHES = ["md5", "sha1", "xxh3_128", "xxh64"]
COMPRESSIONS = [None, "zstd", "zstd:7", "gz", "bz2:5", "br", "snappy"]
SMALL = 12000  # bytes: several shards per dataset, several samples per shard


def _name(fmt: str, compression: str | None) -> str:
    return f"{fmt}-{(compression or 'raw').replace(':', '-')}"


MOSAIC_WRITE = """
import pickle, runpy, sys
from pathlib import Path
from streaming import CSVWriter, JSONWriter, MDSWriter, TSVWriter, XSVWriter, StreamingDataset
S = runpy.run_path(sys.argv[1])
base, n, compressions, hashes, small = Path(sys.argv[2]), int(sys.argv[3]), eval(sys.argv[4]), eval(sys.argv[5]), int(sys.argv[6])
decoded = {}
def name(fmt, c):
    return f"{fmt}-{(c or 'raw').replace(':', '-')}"
for c in compressions:
    jobs = [("mds", MDSWriter, {"columns": S["MDS_COLUMNS"]}, S["make_samples"](n)),
            ("json", JSONWriter, {"columns": S["TEXT_COLUMNS"]}, S["text_samples"](n)),
            ("csv", CSVWriter, {"columns": S["TEXT_COLUMNS"]}, S["text_samples"](n)),
            ("tsv", TSVWriter, {"columns": S["TEXT_COLUMNS"]}, S["text_samples"](n)),
            ("xsv", XSVWriter, {"columns": S["TEXT_COLUMNS"], "separator": "|"}, S["text_samples"](n))]
    for fmt, cls, kw, samples in jobs:
        if fmt != "mds" and c not in (None, "zstd"):
            continue
        out = base / "mosaic" / name(fmt, c)
        with cls(out=str(out), compression=c, hashes=hashes, size_limit=small, **kw) as w:
            for s in samples:
                w.write(s)
        ds = StreamingDataset(remote=str(out), local=str(base / "mosaic-cache" / name(fmt, c)),
                              allow_unsafe_types=True, validate_hash=hashes[0], batch_size=1)
        decoded[name(fmt, c)] = [S["normalize"](ds[i]) for i in range(len(ds))]
# Deterministic columns, uncompressed: the byte-identical reference.
cols = {k: S["MDS_COLUMNS"][k] for k in S["DETERMINISTIC"]}
with MDSWriter(out=str(base / "mosaic" / "identical"), columns=cols, hashes=hashes, size_limit=small) as w:
    for s in S["make_samples"](n):
        w.write({k: s[k] for k in cols})
(base / "mosaic-decoded.pkl").write_bytes(pickle.dumps(decoded, protocol=4))
"""

MOSAIC_READ = """
import pickle, runpy, sys
from pathlib import Path
from streaming import StreamingDataset
S = runpy.run_path(sys.argv[1])
base = Path(sys.argv[2])
decoded = {}
for remote in sorted((base / "foundry-remote").iterdir()):
    ds = StreamingDataset(remote=str(remote), local=str(base / "peer-cache" / remote.name),
                          allow_unsafe_types=True, validate_hash="sha1", batch_size=1)
    decoded[remote.name] = [S["normalize"](ds[i]) for i in range(len(ds))]
    assert sum(1 for _ in ds) == len(ds)
(base / "foundry-decoded.pkl").write_bytes(pickle.dumps(decoded, protocol=4))
"""


def _read_with_foundry(root: Path, cache: Path) -> list:
    """Every sample of a dataset directory, through Foundry's reader API (hashes verified)."""
    raw_index = (root / "index.json").read_bytes()
    shards = load_index(raw_index)
    extra = {k: v for k, v in json.loads(raw_index).items() if k not in ("version", "shards")}  # block digests
    assert dump_index([s.entry for s in shards], extra) == raw_index  # bit-exact parse and re-dump
    samples = []
    for info in shards:
        paths = []
        for f in info.files:
            remote = root / f.remote_basename
            assert verify_file(remote, f.remote_hashes), f.remote_basename
            local = remote
            if f.zip_basename:
                local = cache / f.raw_basename
                decompress_file(info.compression, remote, local)
            assert local.stat().st_size == f.raw_bytes
            assert verify_file(local, f.raw_hashes), f.raw_basename
            paths.append(local)
        with open_shard(info, paths[0], meta_path=paths[1] if len(paths) > 1 else None,
                        allow_unsafe_types=True) as reader:
            samples += [S["normalize"](reader.get_sample(i)) for i in range(len(reader))]
    return samples


@pytest.fixture(scope="module")
def mosaic_written(mosaic_peer, tmp_path_factory):
    base = tmp_path_factory.mktemp("interop-mosaic")
    mosaic_peer(MOSAIC_WRITE, str(SAMPLES_FILE), str(base), str(N), repr(COMPRESSIONS), repr(HASHES), str(SMALL))
    return base, pickle.loads((base / "mosaic-decoded.pkl").read_bytes())


def test_foundry_reads_every_dataset_mosaic_writes(mosaic_written, tmp_path):
    base, expected = mosaic_written
    assert len(expected) == len(COMPRESSIONS) + 4 * 2
    for name, want in expected.items():
        got = _read_with_foundry(base / "mosaic" / name, tmp_path / name)
        assert len(got) == N, name
        for i, (g, w) in enumerate(zip(got, want)):
            assert g == w, f"{name} sample {i}"
        if name.startswith("mds-"):
            shards = load_index((base / "mosaic" / name / "index.json").read_bytes())
            assert len(shards) > 1, "the size limit should split the dataset"


def test_same_input_gives_byte_identical_dataset(mosaic_written, tmp_path):
    base, _ = mosaic_written
    cols = {k: S["MDS_COLUMNS"][k] for k in S["DETERMINISTIC"]}
    out = tmp_path / "foundry"
    with MDSWriter(out=str(out), columns=cols, hashes=HASHES, size_limit=SMALL) as w:
        for s in S["make_samples"](N):
            w.write({k: s[k] for k in cols})
    theirs = base / "mosaic" / "identical"
    names = sorted(p.name for p in theirs.iterdir())
    ours = sorted(p.name for p in out.iterdir())
    # every file mosaic writes, byte for byte, and one file of block digests (format.block_digests),
    # which index.json locates at its top level (mosaic reads only version and shards)
    assert ours == sorted(names + [DATASET_BASENAME])
    for name in names:
        if name == "index.json":
            index = json.loads((out / name).read_text())
            assert set(index.pop(INDEX_KEY)) == {s["raw_data"]["basename"] for s in index["shards"]}
            assert json.dumps(index, sort_keys=True).encode() == (theirs / name).read_bytes()
            continue
        assert (out / name).read_bytes() == (theirs / name).read_bytes(), name


def test_mosaic_reads_every_dataset_foundry_writes(mosaic_peer, tmp_path):
    remote_root = tmp_path / "foundry-remote"
    expected = {}
    for c in COMPRESSIONS:
        jobs = [("mds", MDSWriter, {"columns": S["MDS_COLUMNS"]}, S["make_samples"](N, seed=1)),
                ("json", JSONWriter, {"columns": S["TEXT_COLUMNS"]}, S["text_samples"](N)),
                ("csv", CSVWriter, {"columns": S["TEXT_COLUMNS"]}, S["text_samples"](N)),
                ("tsv", TSVWriter, {"columns": S["TEXT_COLUMNS"]}, S["text_samples"](N)),
                ("xsv", XSVWriter, {"columns": S["TEXT_COLUMNS"], "separator": "|"}, S["text_samples"](N))]
        for fmt, cls, kw, samples in jobs:
            if fmt != "mds" and c not in (None, "zstd"):
                continue
            name = _name(fmt, c)
            # A remote URL: shards are staged locally, only compressed files reach the store.
            with cls(out=(remote_root / name).as_uri(), compression=c, hashes=["sha1", "xxh64"],
                     size_limit=SMALL, **kw) as w:
                for s in samples:
                    w.write(s)
            if c:
                assert not any(p.suffix == f".{fmt}" for p in (remote_root / name).glob("shard.*"))
            expected[name] = _read_with_foundry(remote_root / name, tmp_path / "cache" / name)
    # A parallel conversion: shards under part-NNNNN/, one merged index.json (upstream's merge layout).
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": i, "text": "t" * (i % 9), "x": i / 3}) + "\n" for i in range(300)))
    converted = remote_root / "converted-parallel"
    convert(str(rows), converted.as_uri(), workers=2, size_limit=2000, compression="zstd", hashes=["sha1"])
    expected["converted-parallel"] = _read_with_foundry(converted, tmp_path / "cache" / "converted")
    assert len(expected["converted-parallel"]) == 300
    mosaic_peer(MOSAIC_READ, str(SAMPLES_FILE), str(tmp_path))
    got = pickle.loads((tmp_path / "foundry-decoded.pkl").read_bytes())
    assert sorted(got) == sorted(expected)
    for name, want in expected.items():
        assert len(got[name]) == len(want), name
        for i, (g, w) in enumerate(zip(got[name], want)):
            assert g == w, f"{name} sample {i}"


def _as_is(sample):
    return sample


@pytest.mark.parametrize("name", ["mds-zstd", "mds-gz", "mds-bz2-5", "mds-snappy", "json-zstd", "csv-zstd"])
def test_local_only_compressed_mosaic_dataset_reads_every_sample(mosaic_written, tmp_path, name):
    """A compressed dataset mosaic wrote, opened with local= only: shards decompress from the folder."""
    import shutil

    from foundry.streaming import StreamingDataset, StreamingDataLoader

    base, expected = mosaic_written
    local = tmp_path / name
    shutil.copytree(base / "mosaic" / name, local)
    zipped = sorted(p.name for p in local.rglob("shard.*"))
    assert zipped and all(p.rsplit(".", 1)[-1] in ("zstd", "gz", "bz2", "snappy") for p in zipped)
    ds = StreamingDataset(local=str(local), allow_unsafe_types=True, shuffle=True, batch_size=2)
    assert [S["normalize"](ds[i]) for i in range(N)] == expected[name]
    want = sorted(map(repr, expected[name]))
    assert sorted(repr(S["normalize"](s)) for s in ds) == want
    loader = StreamingDataLoader(ds, batch_size=None, num_workers=2, collate_fn=_as_is)  # workers share the decompressed files
    assert sorted(repr(S["normalize"](s)) for s in loader) == want
    # The user's compressed files stay; nothing half-written or temporary is left behind.
    assert set(zipped) <= {p.name for p in local.rglob("shard.*")}
    # (locks, and stamps of the shards known good, are the cache's state, not leftovers)
    assert not [p for p in (local / ".foundry").rglob("*") if p.is_file() and not {"locks", "verified"} & set(p.parts)]


# every column of the mosaic-written MDS samples that torch's default_collate takes as it is (not u64:
# torch.as_tensor refuses uint64 scalars above int64's range)
_COLLATABLE = ["b", "s", "i", "u8", "u16", "u32", "i8", "i16", "i32", "i64", "f16", "f32", "f64", "si", "sf", "nds"]


class _Collatable:
    """Mixed into StreamingDataset: each sample cut to the columns default_collate takes."""

    def __getitem__(self, index):
        sample = super().__getitem__(index)
        return {k: sample[k] for k in _COLLATABLE}


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")  # torch's own collate, below
def test_batches_of_a_mosaic_written_zstd_dataset_are_torch_default_collate_s(mosaic_written, tmp_path):
    """Bytes, str, Python int and numpy-scalar columns of shards mosaic wrote and compressed cross
    from StreamingDataLoader's workers in their ring slots (batch_ring.py): every batch is the one
    torch's own DataLoader makes with default_collate, tensor dtypes and value types included."""
    import shutil

    import torch
    from torch.utils.data import DataLoader, default_collate

    from foundry.streaming import StreamingDataLoader, StreamingDataset

    class Cut(_Collatable, StreamingDataset):
        pass

    base, _ = mosaic_written
    shutil.copytree(base / "mosaic" / "mds-zstd", tmp_path / "mds-zstd")
    src = str(tmp_path / "mds-zstd")

    def batches(loader_class, **kw):
        ds = Cut(local=src, allow_unsafe_types=True, shuffle=True, batch_size=4)
        return list(loader_class(ds, batch_size=4, num_workers=2, multiprocessing_context="fork", **kw))

    got, want = batches(StreamingDataLoader), batches(DataLoader, collate_fn=default_collate)
    assert len(got) == len(want) == -(-N // 4)
    for a, b in zip(got, want):
        assert a.keys() == b.keys()
        for key, value in b.items():
            if isinstance(value, torch.Tensor):
                assert a[key].dtype == value.dtype and torch.equal(a[key], value), key
            else:
                assert a[key] == value and [type(v) for v in a[key]] == [type(v) for v in b[key]], key
