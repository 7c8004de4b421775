"""One iteration of one process, decided once when it starts: what it reads (`EpochPlan`) and how
(`ReadPolicy`). StreamingDataset builds both in `__iter__`; everything downstream (the hot loop,
the shard source, the early readers, the worker's batches, the decompression slot) takes them
instead of asking the process (torch's worker info, the topology) or a global again.

docs/streaming-internals.md says what each mechanism costs and the measurement behind it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EpochPlan:
    """What one DataLoader worker of one rank reads in one epoch; built by StreamingDataset."""

    shards: np.ndarray   # global shard of each sample, in the order the worker yields them
    offsets: np.ndarray  # index of each sample within its shard
    window: int          # samples to fetch ahead of the reader
    prefetch: bool       # some shard may need a download or decompression first
    threads: int = 4     # download/decompression threads when prefetching


@dataclass(frozen=True)
class ReadPolicy:
    """Which read mechanisms this iteration uses. The defaults: a process that is not alone on its
    node and not a DataLoader worker, reading whole local shards (what a test's fake source wants)."""

    # A DataLoader worker: it copies every sample into a batch anyway.
    in_worker: bool = False
    # Shards are read through maps (else one pread a sample: a worker's RSS would hold every shard's
    # pages, format.reader.MDSShardFileReader).
    mapped: bool = True
    # A compressed shard's first samples come from its seekable file, frame by frame, while it is
    # decompressed (read.early). Not in workers: their cores are busy making shards whole.
    framed_early: bool = False
    # An uncompressed shard of a far store is read with ranged reads while it downloads (read.early):
    # only by the node's only reader (ranks of a node share one download of each shard).
    ranged_early: bool = False
    # The reader's core decompresses while the reader does not read (cache.decompress_slot): only
    # the node's only reader, or more decompressions would run than the node has cores.
    lend_reader_core: bool = False
    # Prefetch threads start after the first sample (batch), not before: every shard is on this
    # machine and this process is its only reader. Until then the reader reads early frames or
    # decompresses the first shard itself (holding the decompression slot: nothing else could
    # decompress), and prefetch threads starting meanwhile take the GIL from it. Local zstd tokens:
    # first sample 8.4 -> 6.2 ms; the decompressions start those ms later (epoch of 3 shards ~67 -> ~75 ms).
    prefetch_after_first: bool = False
    # A worker makes whole batches (loader.worker_batches), and reads rows of fixed columns straight
    # into them unless a dataset subclass makes the samples.
    batches_in_worker: bool = False
    reads_rows: bool = False
    # Samples read twice from a map get arrays of their own (an in-place change must not show in
    # the next read); a worker's pread samples own their bytes already.
    own_repeats: bool = True

    @classmethod
    def decide(cls, *, alone_on_node: bool, in_worker: bool, far_store: bool, on_this_machine: bool,
               transforms_samples: bool, worker_batches: bool, early: bool = True) -> "ReadPolicy":
        """The policy of one iteration from the topology (`alone_on_node`: the node's only reader),
        the process's role (`in_worker`, `worker_batches`: a StreamingDataLoader has its workers
        make whole batches), the streams (`far_store`: some remote is far; `on_this_machine`: no
        remote at all) and the dataset (`transforms_samples`: a subclass makes the samples).
        `early=False` switches early reading off alone."""
        batches = worker_batches and in_worker
        return cls(
            in_worker=in_worker,
            mapped=not in_worker,
            framed_early=early and not in_worker,
            ranged_early=early and alone_on_node and far_store and not in_worker,
            lend_reader_core=alone_on_node,
            prefetch_after_first=on_this_machine and alone_on_node,
            batches_in_worker=batches,
            reads_rows=batches and not transforms_samples,
            own_repeats=not in_worker and not transforms_samples,
        )
