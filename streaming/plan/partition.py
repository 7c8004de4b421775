"""Which epoch position each node, rank and DataLoader worker reads: mosaicml-streaming 0.13's
partitioning ('orig' and its default 'relaxed'), reproduced exactly. Pure numpy, no I/O.

The epoch's N positions (big ids) are cut into `num_canonical_nodes` (C) contiguous rows of
ceil(N/C) positions (a short row repeats its last-but-one position). The global sequence reads the
rows interleaved: row 0's first, row 1's first, ... (0, 1250, 2500, 3750, 1, ... for N=5,000, C=4).
It depends only on N and C. A resumed epoch drops its first `drop_first` positions (rounded down
to a multiple of the physical node count). Then position i of what is left goes to physical node
i % P, and a node's j-th position to its local rank j % R: global batch t (B per rank) is always
positions [t*G, (t+1)*G) of the sequence, whatever P, R and the DataLoader workers are. A node whose
share is not a multiple of R repeats a few of its last positions; each rank's share is then cut
into batches of B, dealt to its W workers in turn (worker w: batches w, w+W, ...), and the tail is
filled with -1 (nothing to read).

'relaxed' differs from 'orig' only for a resumption on a node count that neither divides nor is a
multiple of C: it keeps the first run's global batches (partitioned over `initial_physical_nodes`)
and deals each one to the current ranks in order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from foundry.plugins.errors import ConfigError, DataError

PARTITION_ALGOS = ("relaxed", "orig")


@dataclass(frozen=True)
class WorldShape:
    """Physical nodes, ranks per node and DataLoader workers per rank (1 without workers)."""

    num_nodes: int = 1
    ranks_per_node: int = 1
    workers_per_rank: int = 1

    @property
    def num_ranks(self) -> int:
        return self.num_nodes * self.ranks_per_node


def _divides_either(c: int, p: int) -> bool:
    return (p <= c and c % p == 0) or (p > c and p % c == 0)


def canonical_rows(num_samples: int, c: int, p: int) -> np.ndarray:
    """The (C, padded row length) matrix of positions; read column by column."""
    n = num_samples
    per_row = -(-n // c)
    ratio = p // c if c < p else 0
    pad = (ratio - per_row % ratio) % ratio if ratio else 0
    width = per_row + pad
    if n > c or (n == c and c >= p):
        starts = (np.arange(c, dtype=np.int64) * n // c)[:, None]
        stops = (np.arange(1, c + 1, dtype=np.int64) * n // c)[:, None]
        rows = starts + np.arange(width, dtype=np.int64)[None, :]
        rows[:, per_row - 1:per_row] -= (stops - starts < per_row)
        if pad:  # a node's share must split evenly over the physical nodes of its canonical node
            if width - 2 * pad - ratio + 1 < 0:  # mosaic fails here too (no samples to repeat)
                raise ConfigError(f"{n} samples are too few for {p} physical nodes on {c} canonical nodes",
                                  hint="set num_canonical_nodes to the number of nodes, or use fewer nodes")
            rows[:, -pad:] = rows[:, -2 * pad - ratio + 1:-pad - ratio + 1]
        return rows
    # fewer samples than canonical nodes: repeat the whole epoch to fill the rows
    need = c * width
    return np.resize(np.arange(n, dtype=np.int64), need).reshape(c, width)


def _deal_to_ranks(nodes: np.ndarray, r: int) -> np.ndarray:
    """(P, L) node shares -> (P, L', R): pad each share to a multiple of R, local rank j % R."""
    length = nodes.shape[1]
    over = length % r
    if over:
        under = r - over
        if r + under - 1 <= length:
            extra = nodes[:, -r - under + 1:-r + 1]
        else:  # fewer samples than ranks: repeat what there is
            reps, left = divmod(under, length)
            extra = np.concatenate([np.tile(nodes, reps), nodes[:, :left]], 1)
        nodes = np.concatenate([nodes, extra], 1)
    return nodes.reshape(nodes.shape[0], -1, r)


def partition_orig(num_samples: int, c: int, world: WorldShape, batch_size: int, drop_first: int = 0) -> np.ndarray:
    """(nodes, ranks per node, workers per rank, batches per worker, batch size); -1 = no sample."""
    p, r, w, b = world.num_nodes, world.ranks_per_node, world.workers_per_rank, batch_size
    if not _divides_either(c, p):
        raise ConfigError(f"num_canonical_nodes={c} and {p} physical nodes: one must divide the other",
                          hint="choose num_canonical_nodes as a multiple or a divisor of the node count")
    drop_first -= drop_first % p
    seq = canonical_rows(num_samples, c, p).T.reshape(-1)[drop_first:]
    ranks = _deal_to_ranks(seq.reshape(-1, p).T, r)  # (P, per rank, R)
    per_rank = ranks.shape[1]
    rounded = -(-per_rank // (w * b)) * (w * b)
    if rounded > per_rank:
        ranks = np.concatenate([ranks, np.full((p, rounded - per_rank, r), -1, np.int64)], 1)
    return ranks.transpose(0, 2, 1).reshape(p, r, -1, w, b).transpose(0, 1, 3, 2, 4)


def partition(algo: str, num_samples: int, c: int, world: WorldShape, batch_size: int, drop_first: int = 0,
              initial_physical_nodes: int | None = None) -> np.ndarray:
    """mosaic's `get_partitions` for 'orig' or 'relaxed'."""
    if algo not in PARTITION_ALGOS:
        raise ConfigError(f"unknown partition_algo {algo!r}", hint=f"use one of {', '.join(PARTITION_ALGOS)}")
    n_ranks = world.num_ranks
    if drop_first > num_samples + n_ranks - num_samples % n_ranks:
        raise DataError(f"resuming at sample {drop_first} of an epoch of {num_samples} samples",
                        hint="the state belongs to a larger dataset or epoch_size; resume with the same data")
    p0 = initial_physical_nodes
    if not keeps_first_run_batches(algo, c, world.num_nodes, p0):
        return partition_orig(num_samples, c, world, batch_size, drop_first)
    global_batch = n_ranks * batch_size
    first_devices = p0 * world.ranks_per_node
    if global_batch % first_devices:
        raise DataError(f"global batch {global_batch} does not divide over the first run's {first_devices} devices",
                        hint="keep the global batch of the first run when resuming")
    first = partition_orig(num_samples, c, WorldShape(p0, world.ranks_per_node, world.workers_per_rank),
                           global_batch // first_devices, drop_first)
    steps = first.transpose(3, 2, 0, 1, 4).reshape(-1)  # the first run's global batches, in order
    return steps.reshape(-1, world.workers_per_rank, world.num_nodes, world.ranks_per_node, batch_size) \
        .transpose(2, 3, 1, 0, 4)


def keeps_first_run_batches(algo: str, c: int, num_nodes: int, initial_physical_nodes: int | None) -> bool:
    """Whether 'relaxed' deals the first run's global batches (the node count fits C no more)."""
    return algo == "relaxed" and initial_physical_nodes is not None and not _divides_either(c, num_nodes)


def epoch_total(num_samples: int, c: int, world: WorldShape, initial_physical_nodes: int | None = None,
                algo: str = "relaxed") -> int:
    """Samples all ranks together read in a whole epoch (padding repeats included, -1 excluded)."""
    p = world.num_nodes
    if keeps_first_run_batches(algo, c, p, initial_physical_nodes):
        p = initial_physical_nodes
    r = world.ranks_per_node
    per_row = -(-num_samples // c)
    ratio = p // c if c < p else 0
    width = per_row + ((ratio - per_row % ratio) % ratio if ratio else 0)
    per_node = c * width // p
    return p * r * -(-per_node // r)


def interleave_ranks(per_rank: list[np.ndarray], num_nodes: int, ranks_per_node: int) -> np.ndarray:
    """The global sequence from every rank's samples (global rank order: node-major, equal
    lengths): rank (node p, local rank r) reads global positions j*P*R + r*P + p."""
    streams = np.stack([np.asarray(x).reshape(-1) for x in per_rank])
    return streams.reshape(num_nodes, ranks_per_node, -1).transpose(2, 1, 0).reshape(-1)
