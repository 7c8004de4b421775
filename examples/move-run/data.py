"""The proof's dataset: N deterministic token sequences (arithmetic progressions mod VOCAB), each with
an `id`, written as MDS shards straight to object storage."""

import numpy as np

from foundry.streaming import MDSWriter

VOCAB, SEQ = 64, 16


def write_dataset(url: str, n: int = 512, shard_bytes: int = 4096) -> None:
    rng = np.random.default_rng(0)
    with MDSWriter(out=url, columns={"id": "int", "tokens": "ndarray:int64"}, size_limit=shard_bytes) as writer:
        for i in range(n):
            start, step = rng.integers(0, VOCAB), rng.integers(1, 4)
            tokens = (start + step * np.arange(SEQ + 1)) % VOCAB
            writer.write({"id": i, "tokens": tokens.astype(np.int64)})
