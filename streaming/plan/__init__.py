"""Pure planning: which sample each rank and worker reads, in which order. numpy only, no I/O."""

from .epoch import (
    Layout,
    OrderConfig,
    chunk_sizes,
    epoch_order,
    epoch_samples,
    locate,
    make_layout,
    padded_length,
    rank_batches,
    worker_samples,
)
from .sampling import SAMPLING_METHODS, choose_counts, sample_stream
from .shuffle import SHUFFLE_ALGOS, default_block_size

__all__ = [
    "Layout", "OrderConfig", "SAMPLING_METHODS", "SHUFFLE_ALGOS", "choose_counts", "chunk_sizes",
    "default_block_size", "epoch_order", "epoch_samples", "locate", "make_layout", "padded_length",
    "rank_batches", "sample_stream", "worker_samples",
]
