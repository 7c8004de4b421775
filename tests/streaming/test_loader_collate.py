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


def test_collate_matches_default_collate_in_workers_and_in_process(tmp_path):
    import torch
    from torch.utils.data import default_collate

    cols = {"x": "ndarray:float32:2,3", "v": "ndarray", "n": "int", "s": "str", "u": "uint8"}
    rows = [{"x": np.full((2, 3), i, np.float32), "v": np.arange(4, dtype=np.int64) + i, "n": i, "s": f"t{i}",
             "u": np.uint8(i)} for i in range(48)]
    with MDSWriter(out=str(tmp_path / "data"), columns=cols) as writer:
        for row in rows:
            writer.write(row)
    for workers in (0, 2):
        dataset = StreamingDataset(local=str(tmp_path / "data"), batch_size=8)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            batches = list(StreamingDataLoader(dataset, batch_size=8, num_workers=workers))
        assert len(batches) == 6
        for batch in batches:
            want = default_collate([rows[int(n)] for n in batch["n"]])
            assert batch.keys() == want.keys()
            for key in want:
                if isinstance(want[key], torch.Tensor):
                    assert batch[key].dtype == want[key].dtype and torch.equal(batch[key], want[key]), key
                else:
                    assert batch[key] == want[key], key


def test_positional_arguments_mean_what_they_mean_to_torch(tmp_path):
    import pytest

    with MDSWriter(out=str(tmp_path / "data"), columns={"x": "ndarray:int32:16"}) as writer:
        for i in range(64):
            writer.write({"x": np.full(16, i, dtype=np.int32)})

    def batches(*args, **kw):
        dataset = StreamingDataset(local=str(tmp_path / "data"), shuffle=True, batch_size=8)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the read-only-safe collate, not torch's warning one
            loader = StreamingDataLoader(dataset, *args, **kw)
            return loader, [b["x"][:, 0].tolist() for b in loader]

    by_name = batches(batch_size=8, num_workers=2)[1]
    loader, by_position = batches(8, False, None, None, 2)
    assert (loader.batch_size, loader.num_workers) == (8, 2)
    assert by_position == by_name and len(by_name) == 8
    with pytest.raises(TypeError, match="multiple values for argument 'batch_size'"):
        StreamingDataLoader(StreamingDataset(local=str(tmp_path / "data"), batch_size=8), 8, batch_size=8)
