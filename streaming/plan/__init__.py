"""Pure planning: which sample each node, rank and worker reads, in which order: mosaicml-streaming
0.13's order, reproduced exactly. numpy only, no I/O."""

# numpy loads numpy.random on first attribute access: ~6 ms that would land on the first epoch's
# first sample. Loaded with the package instead (numpy only: the CLI may import this).
import numpy.random  # noqa: F401

from .batching import BATCHING_METHODS, check_batching, resume_warning
from .epoch import (
    Layout,
    OrderConfig,
    epoch_length,
    epoch_positions,
    epoch_work,
    locate,
    make_layout,
    rank_ids,
    rank_length,
    worker_ids,
)
from .partition import PARTITION_ALGOS, WorldShape, interleave_ranks, partition
from .sampling import SAMPLING_METHODS, resample, shard_choose, stream_choose, stream_proportions
from .shuffle import SHUFFLE_ALGOS, check_algo, default_block_size, shuffle_positions

__all__ = [
    "BATCHING_METHODS", "Layout", "OrderConfig", "PARTITION_ALGOS", "SAMPLING_METHODS", "SHUFFLE_ALGOS", "WorldShape", "check_algo",
    "default_block_size", "epoch_length", "epoch_positions", "epoch_work", "interleave_ranks", "locate", "make_layout", "partition",
    "rank_ids", "rank_length", "resample", "shard_choose", "shuffle_positions", "stream_choose", "stream_proportions", "worker_ids", "check_batching",
    "resume_warning",
]
