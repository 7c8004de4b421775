"""A StreamingDataset subclass that transforms samples (mosaicml-streaming's usual pattern) is used
by iteration too, not only by `ds[i]`: in workers, from a remote with zstd shards, and on resume."""

import numpy as np
import pytest

from foundry.streaming import StreamingDataLoader, StreamingDataset


class Doubled(StreamingDataset):
    """mosaic's documented way: `__getitem__` calls super() and returns a new sample."""

    def __getitem__(self, index):
        sample = super().__getitem__(index)
        return {"id": sample["id"], "twice": 2 * sample["id"], "length": len(sample["data"])}


class Tagged(StreamingDataset):
    """The other hook mosaic has: `get_item`, which `ds[i]` and iteration both call."""

    def get_item(self, index):
        return {"id": super().get_item(index)["id"], "tag": index % 7}


def _ids(batches):
    return np.concatenate([b["id"].numpy() for b in batches]).tolist()


@pytest.mark.parametrize("workers", [0, 2])
def test_iteration_goes_through_the_subclass(make_dataset, tmp_path, sample_payload, workers):
    remote = make_dataset(120, 16, compression="zstd")

    def make(cls):
        return cls(remote=str(remote), local=str(tmp_path / f"cache-{cls.__name__}"), shuffle=True, batch_size=8)

    plain = _ids(StreamingDataLoader(make(StreamingDataset), batch_size=8, num_workers=workers))
    batches = list(StreamingDataLoader(make(Doubled), batch_size=8, num_workers=workers))
    assert _ids(batches) == plain  # the same order, every sample transformed
    for batch in batches:
        assert batch.keys() == {"id", "twice", "length"}
        assert batch["twice"].tolist() == [2 * i for i in batch["id"].tolist()]
        assert batch["length"].tolist() == [len(sample_payload(i)) for i in batch["id"].tolist()]
    assert make(Tagged)[30] == {"id": 30, "tag": 30 % 7}
    in_order = [s["id"] for s in make(StreamingDataset)]
    assert [s["tag"] for s in make(Tagged)] == [i % 7 for i in in_order]


def test_a_resumed_subclass_continues_with_transformed_samples(make_dataset, tmp_path):
    remote = make_dataset(96, 10)
    def make():
        return Doubled(remote=str(remote), local=str(tmp_path / "cache"), shuffle=True, batch_size=4)

    whole = list(StreamingDataLoader(make(), batch_size=4, num_workers=2))
    loader = StreamingDataLoader(make(), batch_size=4, num_workers=2)
    seen = []
    for k, batch in enumerate(loader):
        seen.append(batch)
        if k == 9:
            state = loader.state_dict()
            break
    resumed = make()
    resumed.load_state_dict(state)
    rest = list(StreamingDataLoader(resumed, batch_size=4, num_workers=2))
    assert _ids(seen + rest) == _ids(whole)
    assert all(b["twice"].tolist() == [2 * i for i in b["id"].tolist()] for b in rest)


class Evens(StreamingDataset):
    """A subclass that filters the stream in `__iter__`: it gets samples from super(), not batches."""

    def __iter__(self):
        return (s for s in super().__iter__() if s["id"] % 2 == 0)


def test_a_subclass_that_wraps_iteration_gets_samples_in_workers(make_dataset, tmp_path):
    remote = make_dataset(120, 16)
    ds = Evens(remote=str(remote), local=str(tmp_path / "cache"), shuffle=True, batch_size=8)
    got = [b["id"].tolist() for b in StreamingDataLoader(ds, batch_size=8, num_workers=2)]
    from torch.utils.data import DataLoader

    ref = Evens(remote=str(remote), local=str(tmp_path / "cache"), shuffle=True, batch_size=8)
    assert got == [b["id"].tolist() for b in DataLoader(ref, batch_size=8, num_workers=2)]
    assert sorted(i for b in got for i in b) == list(range(0, 120, 2))
