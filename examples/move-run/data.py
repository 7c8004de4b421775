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


if __name__ == "__main__":  # python examples/move-run/data.py s3://my-bucket/tiny-gpt/data [--secret r2]
    import argparse
    import time

    p = argparse.ArgumentParser(description="Write the tiny GPT's dataset (MDS shards) to a storage URL.")
    p.add_argument("url", help="where to write it, e.g. s3://my-bucket/tiny-gpt/data or file:///some/folder")
    p.add_argument("--samples", type=int, default=512)
    p.add_argument("--secret", help="a stored secret to write with (`foundry create secret s3 NAME`), "
                                    "instead of keys exported in the environment")
    a = p.parse_args()
    t0 = time.time()
    if a.secret:
        from foundry.app.sdk import use_secret

        with use_secret(a.secret):
            write_dataset(a.url, n=a.samples)
    else:
        write_dataset(a.url, n=a.samples)
    print(f"wrote {a.samples} samples to {a.url} ({time.time() - t0:.1f}s)")
