"""One epoch's plan: which sample every node, rank and DataLoader worker reads, in which order.
A pure function of the data layout, the seed, the epoch, the canonical node count, the world shape
and the per-device batch size; the same as mosaicml-streaming 0.13's 'random' batching:

1. `sampling.resample`: the epoch's positions (big ids) and the sample each one reads;
2. `partition.partition`: positions per node/rank/worker/batch (-1 = nothing), after dropping the
   `sample_in_epoch` positions already consumed;
3. with shuffle, `shuffle.shuffle_positions` permutes the positions first.

The global sequence of global batches depends only on (data, seed, epoch, canonical nodes, global
batch); the world shape decides which rank reads which position of a global batch (see
partition.py). A single process reads every sample of the epoch exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from foundry.plugins.errors import ConfigError

from .batching import batched_work, check_batching
from .partition import WorldShape, epoch_total, keeps_first_run_batches, partition
from .sampling import resample
from .shuffle import check_algo, default_block_size, shuffle_positions


@dataclass(frozen=True)
class Layout:
    """Where samples live: global shard offsets and, per stream, its shard range and choose count."""

    shard_offsets: np.ndarray  # int64, len S+1
    stream_shards: tuple[tuple[int, int], ...]  # [first, end) shard indices per stream
    choose: tuple[int, ...]  # samples per epoch per stream
    # each stream's share as mosaic's Stream.apply_weights leaves it (sampling.stream_proportions):
    # the stream-aware batching methods size batches and shuffle blocks by it
    proportion: tuple[float, ...] = ()

    @property
    def num_samples(self) -> int:
        return int(self.shard_offsets[-1])

    @property
    def epoch_samples(self) -> int:
        return int(sum(self.choose))

    @property
    def shard_sizes(self) -> np.ndarray:
        return np.diff(self.shard_offsets)


@dataclass(frozen=True)
class OrderConfig:
    """Everything besides the layout and the world that decides an epoch's order (mosaic's names)."""

    seed: int = 9176
    shuffle: bool = False
    algo: str = "py1e"
    block_size: int | None = None
    num_canonical_nodes: int = 1
    batch_size: int = 1  # per device
    partition_algo: str = "relaxed"
    sampling_method: str = "balanced"
    sampling_granularity: int = 1
    initial_physical_nodes: int | None = None
    batching_method: str = "random"

    def check(self) -> None:
        check_algo(self.algo)
        check_batching(self.batching_method, self.batch_size)
        if self.batch_size <= 0 or self.num_canonical_nodes <= 0:
            raise ConfigError("batch_size and num_canonical_nodes must be positive")
        if self.seed < 0:
            raise ConfigError(f"shuffle_seed must be a non-negative integer, got {self.seed}")


def epoch_positions(layout: Layout, cfg: OrderConfig, epoch: int) -> tuple[np.ndarray, np.ndarray]:
    """(shuffle units, sample id per big id) of `epoch`."""
    return resample(layout.shard_sizes, layout.stream_shards, layout.choose, cfg.sampling_granularity,
                    cfg.seed, epoch, cfg.sampling_method, cfg.shuffle)


def epoch_work(layout: Layout, cfg: OrderConfig, world: WorldShape, epoch: int, sample_in_epoch: int = 0) -> np.ndarray:
    """Sample ids as (nodes, ranks per node, workers per rank, batches per worker, batch size);
    -1 where a worker reads nothing. Positions before `sample_in_epoch` are left out."""
    cfg.check()
    if cfg.batching_method != "random":
        return batched_work(layout, cfg, world, epoch, sample_in_epoch)
    units, sample_of = epoch_positions(layout, cfg, epoch)
    big = partition(cfg.partition_algo, len(sample_of), cfg.num_canonical_nodes, world, cfg.batch_size,
                    sample_in_epoch, cfg.initial_physical_nodes)
    if cfg.shuffle:
        block = cfg.block_size if cfg.block_size is not None else default_block_size(cfg.num_canonical_nodes)
        perm = shuffle_positions(cfg.algo, units, cfg.num_canonical_nodes, cfg.seed, epoch, block)
        big = np.where(big != -1, perm[big], -1)
    if np.array_equal(sample_of, np.arange(len(sample_of))):  # every sample once, in id order
        return big
    return np.where(big != -1, sample_of[big], -1)


def worker_ids(work: np.ndarray, node: int, rank_of_node: int, worker: int) -> np.ndarray:
    """What one DataLoader worker (0 without workers) of one rank yields, in order."""
    ids = work[node, rank_of_node, worker].reshape(-1)
    return ids[ids != -1]


def rank_ids(work: np.ndarray, node: int, rank_of_node: int) -> np.ndarray:
    """What one rank yields through a DataLoader: its workers' batches in turn."""
    ids = work[node, rank_of_node].transpose(1, 0, 2).reshape(-1)
    return ids[ids != -1]


def epoch_length(layout: Layout, cfg: OrderConfig, world: WorldShape) -> int:
    """Samples all ranks read together in a whole epoch (a few repeats when the ranks need them)."""
    if cfg.batching_method != "random":  # whole batches are dropped: count them
        return int(_batched_counts(layout, cfg, world).sum())
    return epoch_total(layout.epoch_samples, cfg.num_canonical_nodes, world, cfg.initial_physical_nodes,
                       cfg.partition_algo)


def rank_length(layout: Layout, cfg: OrderConfig, world: WorldShape, node: int, rank_of_node: int) -> int:
    """Samples one rank reads in a whole epoch."""
    if cfg.batching_method != "random":
        return int(_batched_counts(layout, cfg, world)[node, rank_of_node])
    if not keeps_first_run_batches(cfg.partition_algo, cfg.num_canonical_nodes, world.num_nodes,
                                   cfg.initial_physical_nodes):
        return epoch_length(layout, cfg, world) // world.num_ranks  # every rank reads as many
    shares = partition(cfg.partition_algo, layout.epoch_samples, cfg.num_canonical_nodes, world, cfg.batch_size, 0,
                       cfg.initial_physical_nodes)[node, rank_of_node]
    return int((shares != -1).sum())


_COUNTS: dict[tuple, np.ndarray] = {}


def _batched_counts(layout: Layout, cfg: OrderConfig, world: WorldShape) -> np.ndarray:
    """Samples each (node, rank) reads in a whole epoch of a stream-aware batching method: a whole
    plan to count (~0.2 s for 800k samples), the same every epoch (the streams' sizes and the
    partitions' holes do not change; the shuffles only move ids), so kept for state_dict's sake."""
    key = (cfg, world, layout.choose, layout.stream_shards, layout.proportion, layout.shard_offsets.tobytes())
    if key not in _COUNTS:
        if len(_COUNTS) >= 8:
            _COUNTS.clear()
        _COUNTS[key] = (epoch_work(layout, cfg, world, 0) != -1).sum(axis=(2, 3, 4))
    return _COUNTS[key]


def locate(ids: np.ndarray, shard_offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(shard index, index within the shard) for each global sample id."""
    shard = np.searchsorted(shard_offsets, ids, side="right") - 1
    return shard, ids - shard_offsets[shard]


def make_layout(shard_sizes_per_stream: Sequence[Sequence[int]], choose: Sequence[int],
                proportion: Sequence[float] | None = None) -> Layout:
    """`proportion` defaults to each stream's share of the epoch (mosaic's, without weights)."""
    sizes: list[int] = []
    ranges = []
    for stream_sizes in shard_sizes_per_stream:
        ranges.append((len(sizes), len(sizes) + len(stream_sizes)))
        sizes.extend(int(x) for x in stream_sizes)
    offsets = np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))]).astype(np.int64, copy=False)
    if proportion is None:
        total = sum(int(c) for c in choose)
        proportion = [int(c) / total if total else 0.0 for c in choose]
    return Layout(offsets, tuple(ranges), tuple(int(c) for c in choose), tuple(float(p) for p in proportion))
