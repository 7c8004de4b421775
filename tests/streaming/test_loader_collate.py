"""StreamingDataLoader collates samples that are read-only views of mapped shards without warnings."""

import warnings

import numpy as np

from foundry.streaming import MDSWriter, StreamingDataLoader, StreamingDataset


def test_batches_of_mapped_arrays_collate_quietly(tmp_path):
    with MDSWriter(out=str(tmp_path / "data"), columns={"x": "ndarray:int32:16"}) as writer:
        for i in range(64):
            writer.write({"x": np.full(16, i, dtype=np.int32)})
    dataset = StreamingDataset(local=str(tmp_path / "data"), batch_size=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batches = list(StreamingDataLoader(dataset, batch_size=8))
    assert len(batches) == 8
    assert sorted(int(v) for b in batches for v in b["x"][:, 0]) == list(range(64))
    batches[0]["x"] += 1  # a fresh tensor, not the mapped shard
