"""`LocalDataset`: mosaicml-streaming's map-style dataset over a dataset folder on this machine
(`LocalDataset(local, split=None)`): `len(ds)`, `ds[i]`, `ds[2:5]`, `ds[[1, 7]]`, for torch's
DataLoader with any sampler. Compressed shards are decompressed beside them on first use; a
missing shard is an error (there is no remote to fetch it from)."""

from __future__ import annotations

from typing import Any

import numpy as np
from torch.utils.data import Dataset

from .cache import ShardCache
from .indexing import index_samples, own_arrays
from .read.pool import ReaderPool
from .stream import Stream


class LocalDataset(Dataset):
    def __init__(self, local: str, split: str | None = None, allow_unsafe_types: bool = False):
        self.local, self.split = local, split or ""
        stream = Stream(local=local, split=split or None)
        self.shards = stream.load_index()
        self._cache = ShardCache(stream.local_dir, None, self.shards, name=str(stream.local_dir))
        self._readers = ReaderPool(self.shards, self._cache.ensure, allow_unsafe_types)
        self._offsets = np.cumsum([0] + [int(x.samples) for x in self.shards])
        self.num_samples = int(self._offsets[-1])

    @property
    def size(self) -> int:
        return self.num_samples

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: Any) -> Any:
        return index_samples(index, self.num_samples, self.get_item, self.__getitem__)

    def get_item(self, sample_id: int) -> dict[str, Any]:
        if not 0 <= sample_id < self.num_samples:
            raise IndexError(f"sample {sample_id} out of range for {self.num_samples} samples")
        shard = int(np.searchsorted(self._offsets, sample_id, side="right") - 1)
        return own_arrays(self._readers.get(shard).get_sample(sample_id - int(self._offsets[shard])))
