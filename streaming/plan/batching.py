"""mosaicml-streaming 0.13's stream-aware batching methods, draw for draw. Pure numpy, no I/O.

'random' (the default) is `epoch.epoch_work`: one partition of the whole mixture. The three
methods here partition every stream on its own (`stream_work`: its resample, partition and shuffle,
the shuffle block scaled by the stream's proportion), then build batches from the pieces:

- "per_stream": each global batch comes from one stream. A stream's partition uses the real world
  shape, its global batches are read in traversal order (those with a hole are dropped), and the
  order of the streams' batches is one `shuffle` of their origins (seed + epoch when shuffling
  with 'balanced' sampling, else seed).
- "stratified": every global batch holds int(proportion x global batch) samples of each stream
  (the shortfall goes to the streams closest to one more); as many batches as the scarcest stream
  fills; the streams' partitions use one physical node and batch 1.
- "device_per_stream": each device batch comes from one stream. Streams are partitioned over
  `num_canonical_nodes` physical nodes with batch 1; each physical node takes its canonical nodes'
  device batches, shuffles their origins, pads to a common count, and the nodes' device batches
  are interleaved into global batches. num_canonical_nodes must be a multiple of the node count.

A resumption drops whole global batches (sample_in_epoch // global batch), as mosaic does: a
count in the middle of a global batch reads that batch again from its start. The result has
`epoch_work`'s shape: (nodes, ranks per node, workers per rank, batches per worker, batch size),
-1 = nothing. Unlike 'random', the batches of these methods are not all independent of the world
shape: they are mosaic's, for each shape (docs/sample-order.md says which changes keep them;
`resume_warning` tells a resumption that gets other batches).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from foundry.plugins.errors import ConfigError

from .partition import WorldShape, partition
from .sampling import resample
from .shuffle import default_block_size, shuffle_positions

if TYPE_CHECKING:  # epoch.py imports this module
    from .epoch import Layout, OrderConfig

BATCHING_METHODS = ("random", "stratified", "per_stream", "device_per_stream")


def check_batching(method: str, batch_size: int | None) -> None:
    if method not in BATCHING_METHODS:
        raise ConfigError(f"unknown batching_method {method!r}", hint=f"use one of {', '.join(BATCHING_METHODS)}")
    if method != "random" and batch_size is None:
        raise ConfigError(f"batching_method {method!r} needs batch_size",
                          hint="pass batch_size= (the per-device batch, the DataLoader's)")


def _block(cfg: OrderConfig) -> int:
    return cfg.block_size if cfg.block_size is not None else default_block_size(cfg.num_canonical_nodes)


def stream_work(layout: Layout, cfg: OrderConfig, epoch: int, stream: int, world: WorldShape,
                batch_size: int) -> np.ndarray:
    """One stream's epoch on its own (mosaic's per-stream block): resampled with a generator of its
    own, partitioned over `world` with `batch_size`, shuffled with its share of the block size.
    Global sample ids, -1 = nothing."""
    first, end = layout.stream_shards[stream]
    sizes = layout.shard_sizes[first:end]
    units, sample_of = resample(sizes, [(0, len(sizes))], [layout.choose[stream]], cfg.sampling_granularity,
                                cfg.seed, epoch, cfg.sampling_method, cfg.shuffle)
    big = partition(cfg.partition_algo, len(sample_of), cfg.num_canonical_nodes, world, batch_size, 0,
                    cfg.initial_physical_nodes)
    if cfg.shuffle:
        portion = int(_block(cfg) * layout.proportion[stream])
        # mosaic refuses this for device_per_stream; for the others its block shuffles fail in numpy
        if portion <= 0 and (cfg.batching_method == "device_per_stream" or cfg.algo in ("py1e", "py1br")):
            raise ConfigError(f"stream {stream} gets no samples in a shuffle block of {_block(cfg)}",
                              hint="raise shuffle_block_size or the stream's proportion")
        perm = shuffle_positions(cfg.algo, units, cfg.num_canonical_nodes, cfg.seed, epoch, portion)
        big = np.where(big != -1, perm[big], -1)
    return np.where(big != -1, sample_of[big] + layout.shard_offsets[first], -1)


def _in_order(work: np.ndarray) -> np.ndarray:
    """A partition's positions in traversal order (batch, worker, node, rank, sample)."""
    return work.transpose(3, 2, 0, 1, 4).reshape(-1)


def _full_rows(rows: np.ndarray) -> int:
    return int(np.count_nonzero(rows.min(axis=1) >= 0)) if rows.size else 0


def _interleave_origins(counts: list[int], rng: np.random.Generator) -> np.ndarray:
    """Index into the streams' batches (stream by stream) in the order of one shuffle of their
    origins; each stream's batches keep their own order."""
    origins = np.concatenate([np.full(n, i) for i, n in enumerate(counts)])
    rng.shuffle(origins)
    index = np.empty(len(origins), dtype=np.int64)
    index[np.argsort(origins, kind="stable")] = np.arange(len(origins), dtype=np.int64)
    return index


def _epoch_rng(cfg: OrderConfig, epoch: int) -> np.random.Generator:
    change = cfg.shuffle and cfg.sampling_method == "balanced"  # mosaic's epoch_seed_change
    return np.random.default_rng(cfg.seed + epoch if change else cfg.seed)


def _finish(batches: np.ndarray, world: WorldShape, batch_size: int, sample_in_epoch: int) -> np.ndarray:
    """Global batches (rows) -> the work array, after dropping the finished ones and padding with
    empty global batches to a whole number per worker."""
    g = batch_size * world.num_ranks
    batches = batches.reshape(-1, g)[sample_in_epoch // g:]
    short = (-batches.shape[0]) % world.workers_per_rank
    if short:
        batches = np.concatenate([batches, np.full((short, g), -1, np.int64)])
    return batches.reshape(-1, world.workers_per_rank, world.num_nodes, world.ranks_per_node, batch_size) \
        .transpose(2, 3, 1, 0, 4)


def per_stream(layout: Layout, cfg: OrderConfig, world: WorldShape, epoch: int, sample_in_epoch: int) -> np.ndarray:
    b = cfg.batch_size
    g = b * world.num_ranks
    counts, parts = [], []
    for s in range(len(layout.stream_shards)):
        rows = _in_order(stream_work(layout, cfg, epoch, s, world, b)).reshape(-1, g)
        full = _full_rows(rows)
        if full == 0:
            raise ConfigError(f"stream {s} has too few samples for one global batch of {g}",
                              hint="use a smaller batch, more samples from that stream, or batching_method='random'")
        counts.append(full)
        parts.append(rows[:full])
    batches = np.concatenate(parts)[_interleave_origins(counts, _epoch_rng(cfg, epoch))]
    return _finish(batches, world, b, sample_in_epoch)


def stratified_portions(proportion: np.ndarray, global_batch: int) -> np.ndarray:
    """Samples of each stream in every global batch."""
    portions = (np.asarray(proportion, dtype=np.float64) * global_batch).astype(np.int64)
    missing = global_batch - int(portions.sum())
    if missing:  # to the streams closest to one more (mosaic's default argsort, then reversed)
        leftover = global_batch * np.asarray(proportion, dtype=np.float64) - portions
        portions[np.flip(np.argsort(leftover))[:missing]] += 1
    for s, n in enumerate(portions.tolist()):
        if n <= 0:
            raise ConfigError(f"stream {s} gets {n} samples of each global batch of {global_batch}",
                              hint="raise the global batch or that stream's proportion")
    return portions


def stratified(layout: Layout, cfg: OrderConfig, world: WorldShape, epoch: int, sample_in_epoch: int) -> np.ndarray:
    b = cfg.batch_size
    g = b * world.num_ranks
    portions = stratified_portions(np.asarray(layout.proportion), g)
    one_node = WorldShape(1, world.ranks_per_node, world.workers_per_rank)
    parts = []
    for s in range(len(layout.stream_shards)):
        seq = _in_order(stream_work(layout, cfg, epoch, s, one_node, 1))
        k = int(portions[s])
        seq = np.concatenate([seq, np.full((-len(seq)) % k, -1, np.int64)])
        parts.append(seq.reshape(-1, k))
    rows = min(_full_rows(p) for p in parts)
    batches = np.concatenate([p[:rows] for p in parts], axis=1)
    return _finish(batches, world, b, sample_in_epoch)


def device_per_stream(layout: Layout, cfg: OrderConfig, world: WorldShape, epoch: int,
                      sample_in_epoch: int) -> np.ndarray:
    c, p, b = cfg.num_canonical_nodes, world.num_nodes, cfg.batch_size
    if c % p:
        raise ConfigError(f"batching_method 'device_per_stream' needs num_canonical_nodes ({c}) to be a multiple "
                          f"of the number of nodes ({p})", hint="set num_canonical_nodes to a multiple of the node count")
    canonical = WorldShape(c, world.ranks_per_node, world.workers_per_rank)
    works = [stream_work(layout, cfg, epoch, s, canonical, 1) for s in range(len(layout.stream_shards))]
    per_node = c // p
    nodes, counts = [], []
    for node in range(p):
        rows, n_rows = [], []
        for s, work in enumerate(works):
            seq = _in_order(work[node * per_node:(node + 1) * per_node])
            seq = np.concatenate([seq, np.full(b - len(seq) % b, -1, np.int64)]).reshape(-1, b)  # always pads
            full = _full_rows(seq)
            if full == 0:
                raise ConfigError(f"stream {s} has too few samples for one device batch of {b} on node {node}",
                                  hint="use a smaller batch, more samples from that stream, or batching_method='random'")
            rows.append(seq[:full])
            n_rows.append(full)
        nodes.append(np.concatenate(rows))
        counts.append(n_rows)
    devices = world.num_ranks
    most = max(len(x) for x in nodes)
    most += devices - most % devices  # always pads, as mosaic does
    rng = _epoch_rng(cfg, epoch)
    for node in range(p):
        ordered = nodes[node][_interleave_origins(counts[node], rng)]
        nodes[node] = np.concatenate([ordered, np.full((most - len(ordered), b), -1, np.int64)])
    batches = np.stack(nodes, axis=1).reshape(-1, b)
    return _finish(batches, world, b, sample_in_epoch)


def _global_batch_sets(layout: Layout, cfg: OrderConfig, world: WorldShape, epoch: int, sample: int) -> np.ndarray:
    rows = _in_order(batched_work(layout, cfg, world, epoch, sample)).reshape(-1, cfg.batch_size * world.num_ranks)
    return np.sort(rows[(rows != -1).any(axis=1)], axis=1)


def resume_warning(layout: Layout, cfg: OrderConfig, saved: tuple[int, int], world: WorldShape, epoch: int,
                   sample_in_epoch: int) -> str | None:
    """A line for a resumption on another nodes x ranks than the run that saved the state
    (`saved`), when this method gives other global batches from there on (mosaic's order depends
    on the world shape for per_stream and device_per_stream); None when they are the same."""
    before = WorldShape(int(saved[0]), int(saved[1]), 1)
    now = WorldShape(world.num_nodes, world.ranks_per_node, 1)
    if cfg.batching_method == "random" or before == now:
        return None
    g = cfg.batch_size * now.num_ranks
    if g % before.num_ranks:
        return None  # the global batch check refuses this state
    try:
        was = _global_batch_sets(layout, replace(cfg, batch_size=g // before.num_ranks), before, epoch, sample_in_epoch)
        will = _global_batch_sets(layout, cfg, now, epoch, sample_in_epoch)
    except ConfigError:
        return None  # this world cannot run the method at all: iteration says so
    common = min(len(was), len(will)) - 1  # the epoch's last batch holds the ranks' repeats: it may differ, as 'random''s
    if np.array_equal(was[:common], will[:common]):
        return None
    return (f"batching_method {cfg.batching_method!r} gives other global batches on {now.num_nodes} node(s) x "
            f"{now.ranks_per_node} rank(s) than on {before.num_nodes} x {before.ranks_per_node}, where this state was "
            f"saved (its order depends on the world shape, as in mosaicml-streaming): resume on "
            f"{before.num_nodes} x {before.ranks_per_node} for the same batches")


def batched_work(layout: Layout, cfg: OrderConfig, world: WorldShape, epoch: int, sample_in_epoch: int) -> np.ndarray:
    """The work array of a stream-aware batching method (see the module docstring)."""
    fn = {"per_stream": per_stream, "stratified": stratified, "device_per_stream": device_per_stream}
    return fn[cfg.batching_method](layout, cfg, world, epoch, sample_in_epoch)
