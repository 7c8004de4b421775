"""The seed's mosaicml-streaming code, with only the import changed, and remote stores."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image
from torch.utils.data import DataLoader

from foundry.streaming import MDSWriter, StreamingDataset


def _jpeg(i: int) -> Image.Image:
    img = Image.new("RGB", (8, 8), (i % 256, (3 * i) % 256, 7))
    buf = io.BytesIO()
    img.save(buf, format="JPEG")
    return Image.open(io.BytesIO(buf.getvalue()))


def _write(out, n=300):
    columns = {"image": "jpeg", "class": "int", "tokens": "ndarray:int32:16"}
    with MDSWriter(out=out, columns=columns, compression="zstd", hashes=["sha1", "xxh64"], size_limit=1 << 12) as w:
        for i in range(n):
            w.write({"image": _jpeg(i), "class": i, "tokens": np.arange(i, i + 16, dtype=np.int32)})


def test_seed_code_runs_with_only_the_import_changed(tmp_path):
    remote, local = str(tmp_path / "remote"), str(tmp_path / "local")
    _write(remote)
    dataset = StreamingDataset(local=local, remote=remote, shuffle=True, batch_size=16)
    dataloader = DataLoader(dataset, batch_size=16, num_workers=2,
                            collate_fn=lambda batch: batch)
    seen = []
    for batch in dataloader:
        for sample in batch:
            assert isinstance(sample["image"], Image.Image)
            assert np.array_equal(sample["tokens"], np.arange(sample["class"], sample["class"] + 16, dtype=np.int32))
            seen.append(sample["class"])
    assert sorted(set(seen)) == list(range(300))
    assert len(seen) == len(dataset) == 300  # one process: every sample once
    assert dataset[7]["class"] == 7


def _read_remote(url, tmp_path):
    ds = StreamingDataset(remote=url, local=str(tmp_path / "cache"), shuffle=True, batch_size=8, validate_hash="sha1",
                          download_timeout=15)
    batches = [b for b in DataLoader(ds, batch_size=8, num_workers=2, collate_fn=lambda b: [s["class"] for s in b])]
    return sorted(set(c for b in batches for c in b))


@pytest.mark.integration
def test_s3_remote(s3_bucket, tmp_path):
    url = s3_bucket.url + "/data/train"
    _write(url, 120)
    assert _read_remote(url, tmp_path) == list(range(120))


@pytest.mark.integration
def test_gcs_remote(gcs_bucket, tmp_path):
    url = gcs_bucket.url + "/data"
    _write(url, 120)
    assert _read_remote(url, tmp_path) == list(range(120))


@pytest.mark.subprocess
def test_import_pulls_no_cloud_sdk():
    import subprocess
    import sys

    code = ("import sys, foundry.streaming as s; s.StreamingDataset; s.Stream; s.StreamingDataLoader; s.MDSWriter; "
            "bad = [m for m in ('boto3', 'botocore', 'google.cloud.storage', 'oci') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
