"""The global sample order of one epoch: a pure function of the data layout, the seed, the epoch,
the canonical node count and the global batch size. No I/O, no topology.

Layout: `shard_offsets` (length S+1) gives each shard's first global sample id; streams own
contiguous shard ranges. The order is built in five steps:

1. every stream picks its samples for the epoch (`sampling.sample_stream`);
2. with shuffle, whole shard groups are permuted (so a shard is read in one place);
3. padding: when the epoch length N is not a multiple of the global batch G, the last
   `ceil(N/G)*G - N` samples of that sequence are appended again (documented padding: those
   samples are seen twice in that epoch);
4. the sequence is cut into `num_canonical_nodes` contiguous spans, each shuffled on its own;
5. global batch k takes the k-th chunk of every span, spans in order (chunk sizes G//C or +1).

With world size W dividing G, rank r reads columns [r*G/W, (r+1)*G/W) of every global batch; when
W equals C each rank reads exactly one span, so each node downloads only its spans' shards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from foundry.plugins.errors import ConfigError

from .sampling import rng_for, sample_stream
from .shuffle import default_block_size, shuffle_groups, shuffle_span

_SHARDS_KEY, _SPAN_KEY = 0x51A4D, 0x5BA11


@dataclass(frozen=True)
class Layout:
    """Where samples live: global shard offsets and, per stream, its shard range and choose count."""

    shard_offsets: np.ndarray  # int64, len S+1
    stream_shards: tuple[tuple[int, int], ...]  # [first, end) shard indices per stream
    choose: tuple[int, ...]  # samples per epoch per stream

    @property
    def num_samples(self) -> int:
        return int(self.shard_offsets[-1])

    @property
    def epoch_samples(self) -> int:
        return int(sum(self.choose))


@dataclass(frozen=True)
class OrderConfig:
    seed: int = 9176
    shuffle: bool = False
    algo: str = "py1e"
    block_size: int | None = None
    num_canonical_nodes: int = 1
    global_batch: int = 1
    sampling_method: str = "balanced"


def padded_length(n: int, global_batch: int) -> int:
    if n <= 0:
        return 0
    return -(-n // global_batch) * global_batch


def chunk_sizes(global_batch: int, num_canonical_nodes: int) -> np.ndarray:
    q, r = divmod(global_batch, num_canonical_nodes)
    return np.array([q + (1 if c < r else 0) for c in range(num_canonical_nodes)], dtype=np.int64)


def epoch_samples(layout: Layout, cfg: OrderConfig, epoch: int) -> np.ndarray:
    """Step 1: the sorted global ids every stream contributes to `epoch` (with repeats)."""
    parts = []
    for s, ((first, end), choose) in enumerate(zip(layout.stream_shards, layout.choose)):
        base = int(layout.shard_offsets[first])
        n = int(layout.shard_offsets[end]) - base
        parts.append(sample_stream(n, choose, cfg.seed, epoch, s, cfg.sampling_method) + base)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def epoch_order(layout: Layout, cfg: OrderConfig, epoch: int) -> np.ndarray:
    """The whole global order of `epoch`, length a multiple of the global batch."""
    if cfg.global_batch <= 0 or cfg.num_canonical_nodes <= 0:
        raise ConfigError("global batch size and num_canonical_nodes must be positive")
    ids = epoch_samples(layout, cfg, epoch)
    if cfg.shuffle and len(ids):
        shard_of = np.searchsorted(layout.shard_offsets, ids, side="right") - 1
        ids = shuffle_groups(ids, shard_of, rng_for(cfg.seed, _SHARDS_KEY, epoch))
    n, g, c = len(ids), cfg.global_batch, cfg.num_canonical_nodes
    total = padded_length(n, g)
    if total > n:
        pad = total - n
        ids = np.concatenate([ids, np.tile(ids, -(-pad // n))[-pad:]])
    k = total // g
    chunks = chunk_sizes(g, c)
    out = np.empty(total, dtype=np.int64)
    grid = out.reshape(k, g) if total else out.reshape(0, g)
    block = cfg.block_size or default_block_size(c)
    start, col = 0, 0
    for node, width in enumerate(chunks.tolist()):
        span = ids[start:start + width * k]
        if cfg.shuffle:
            span = shuffle_span(span, cfg.algo, block, rng_for(cfg.seed, _SPAN_KEY, epoch, node))
        grid[:, col:col + width] = span.reshape(k, width)
        start += width * k
        col += width
    return out


def rank_batches(order: np.ndarray, global_batch: int, world_size: int, rank: int, start: int = 0) -> np.ndarray:
    """This rank's per-device batches as a (batches, batch) array, skipping the first `start`
    global samples. A partial final global batch (only after a mid-batch resume) is padded with
    the first samples of what remains."""
    if global_batch % world_size:
        raise ConfigError(f"global batch {global_batch} is not divisible by world size {world_size}")
    rest = order[start:]
    total = padded_length(len(rest), global_batch)
    if total > len(rest):
        rest = np.concatenate([rest, np.tile(rest, -(-(total - len(rest)) // len(rest)))[: total - len(rest)]])
    per = global_batch // world_size
    return rest.reshape(-1, global_batch)[:, rank * per:(rank + 1) * per]


def worker_samples(batches: np.ndarray, worker: int, num_workers: int) -> np.ndarray:
    """The samples DataLoader worker `worker` yields: batches worker, worker+W, ... (the
    DataLoader collects one batch from each worker in turn)."""
    return np.ascontiguousarray(batches[worker::num_workers]).reshape(-1)


def locate(ids: np.ndarray, shard_offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(shard index, index within the shard) for each global sample id."""
    shard = np.searchsorted(shard_offsets, ids, side="right") - 1
    return shard, ids - shard_offsets[shard]


def make_layout(shard_sizes_per_stream: Sequence[Sequence[int]], choose: Sequence[int]) -> Layout:
    sizes: list[int] = []
    ranges = []
    for stream_sizes in shard_sizes_per_stream:
        ranges.append((len(sizes), len(sizes) + len(stream_sizes)))
        sizes.extend(int(x) for x in stream_sizes)
    offsets = np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))]).astype(np.int64)
    return Layout(offsets, tuple(ranges), tuple(int(c) for c in choose))
