"""Shard + index -> samples or rows: the reader pool (pool.py), one iteration's shards (source.py),
the hot loop (iterator.py), rows of fixed columns (rows.py), the epoch's gc freeze (fork_gc.py) and
all of reading a shard before it is whole (early/). Below the loader, above the cache: see
docs/streaming-internals.md."""
