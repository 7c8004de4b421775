"""StreamingDataset: a torch IterableDataset over MDS shards in any object store.

This module wires the parts together; the work lives beside it: `plan/` (pure order, and the
iteration's EpochPlan and ReadPolicy), `cache/` (make a shard whole on the node), `read/` (shard
-> samples or rows, the hot loop), `loader/` (the DataLoader side), `state.py` (epochs, resume),
`stream.py` (what each source contributes), `topology.py` (who we are, at iteration time). The
path of one sample through them: docs/streaming-internals.md.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Iterator, Sequence

import numpy as np
from torch.utils.data import IterableDataset, get_worker_info

from foundry.plugins.errors import ConfigError, ConfigValueError, DataValueError, config_errors_as_value_errors

from .cache import Evictor, ShardCache, UseSchedule, check_cache_limit
from .format import encodings_image, encodings_ndarray  # noqa: F401  (codecs load here, not on the first sample)
from .plan.iteration import EpochPlan, ReadPolicy
from .plan import (PARTITION_ALGOS, SAMPLING_METHODS, OrderConfig, WorldShape, check_algo, epoch_length, epoch_work,
                   check_batching, locate, make_layout, rank_ids, rank_length, resume_warning, stream_choose,
                   stream_proportions, worker_ids)
from .state import EpochCounter, build_state, check_state
from .indexing import index_samples, own_arrays
from .loader.worker_batches import WorkerBatches
from .read.iterator import iterate, iterate_batches
from .read.pool import ReaderPool
from .read.source import DatasetShards, ShardLocator
from .stream import Stream, streams_registry
from .topology import Topology
from .units import parse_bytes, parse_count


class StreamingDataset(IterableDataset):
    """Samples of one or more MDS datasets in mosaicml-streaming 0.13's order (the same arguments
    give the same samples on every rank, see docs/sample-order.md), downloaded once per node into
    a local cache.

    - remote/local/split: the dataset (any registered URL scheme) and its cache folder (default: a
      per-remote folder under the temp dir); or `streams=[Stream(...), ...]` to mix several.
    - batch_size: the per-device batch; pass the DataLoader's. The global batch (batch_size x world
      size) is part of the order, so the same global batches come out for any ranks/workers.
    - shuffle, shuffle_seed, shuffle_algo ("py1e" default, "py1br", "py1s", "py2s", "naive"),
      shuffle_block_size: see `plan/shuffle.py`. num_canonical_nodes defaults to the number of
      physical nodes of the first run (64 x that for py1s/py2s; saved in the state, reused on
      resume). partition_algo: "relaxed" (default) or "orig", see `plan/partition.py`.
    - predownload: samples to fetch ahead (default max(8 x batch, two shards)); cache_limit: bytes
      or "10gb" (units of 1024, as mosaic; at least 4 of the largest shard), least recently used re-downloadable shards are evicted; validate_hash: an
      algorithm name, False for none, None for the fastest xxhash the index carries (sizes are
      always checked). download_retry, download_timeout: per shard.
    - epoch_size (an int, or mosaic's "100k", "2.5m", "1b" = 10**9 samples), sampling_method ("balanced" redraws partial streams every epoch, "fixed" keeps the
      draw), sampling_granularity: see `plan/sampling.py`. allow_unsafe_types: permit pickle columns.
    - batching_method: "random" (default), "stratified", "per_stream" or "device_per_stream" (each
      batch from one stream, or each stream's share in every batch; need batch_size): `plan/batching.py`.
    - stream_name, stream_config: without streams=, the one stream is the class registered under
      stream_name in `stream.streams_registry`, made with stream_config plus remote/local/split.
    - One process reads every sample of an epoch once; several ranks repeat a few samples so that
      every rank reads as many (at most ranks - 1, as mosaic does).
    """

    @config_errors_as_value_errors  # mosaic refuses a bad argument with ValueError: so does this
    def __init__(
        self,
        remote: str | None = None,
        local: str | None = None,
        split: str | None = None,
        shuffle: bool = False,
        shuffle_seed: int = 9176,
        shuffle_algo: str = "py1e",
        shuffle_block_size: int | None = None,
        batch_size: int | None = None,
        num_canonical_nodes: int | None = None,
        predownload: int | None = None,
        cache_limit: int | str | None = None,
        validate_hash: str | bool | None = None,
        download_retry: int = 2,
        download_timeout: float | None = 60,
        keep_zip: bool = False,
        epoch_size: int | str | None = None,
        streams: Sequence[Stream] | None = None,
        allow_unsafe_types: bool = False,
        sampling_method: str = "balanced",
        download_threads: int = 4,
        sampling_granularity: int = 1,
        partition_algo: str = "relaxed",
        batching_method: str = "random",
        replication: int | None = None,
        stream_name: str = "stream",
        stream_config: dict[str, Any] | None = None,
        **unused: Any,
    ):
        if unused:
            import warnings

            warnings.warn(f"StreamingDataset ignores {', '.join(sorted(unused))} (mosaicml-streaming options "
                          "Foundry does not need)", stacklevel=2)
        check_algo(shuffle_algo)
        check_batching(batching_method, batch_size)  # plan/batching.py
        if replication not in (None, 1):
            raise ConfigError("replication is not supported", hint="leave replication unset")
        if int(shuffle_seed) < 0:
            raise ConfigError(f"shuffle_seed must be a non-negative integer, got {shuffle_seed}")
        if int(sampling_granularity) <= 0:
            raise ConfigError(f"sampling_granularity must be positive, got {sampling_granularity}")
        if partition_algo not in PARTITION_ALGOS:
            raise ConfigError(f"unknown partition_algo {partition_algo!r}", hint=f"use one of {', '.join(PARTITION_ALGOS)}")
        if sampling_method not in SAMPLING_METHODS:
            raise ConfigError(f"unknown sampling_method {sampling_method!r}", hint=f"use one of {', '.join(SAMPLING_METHODS)}")
        if batch_size is not None and int(batch_size) <= 0:
            raise ConfigError(f"batch_size must be positive, got {batch_size}")
        if streams:
            if remote is not None or local is not None:
                raise ConfigError("pass either streams= or remote=/local=, not both")
            self.streams = list(streams)
        else:
            config = dict(stream_config or {})
            config.update(remote=remote, local=local, split=split, download_retry=download_retry,
                          download_timeout=download_timeout, validate_hash=validate_hash, keep_zip=keep_zip)
            self.streams = [streams_registry.get(stream_name)(**config)]
        self.shuffle = bool(shuffle)
        self.shuffle_seed = int(shuffle_seed)
        self.shuffle_algo = shuffle_algo
        self.shuffle_block_size = shuffle_block_size
        self.batch_size = int(batch_size) if batch_size is not None else None
        self.num_canonical_nodes = num_canonical_nodes
        self.predownload = predownload
        self.sampling_method = sampling_method
        self.sampling_granularity = int(sampling_granularity)
        self.batching_method = batching_method
        self.partition_algo = partition_algo
        self.allow_unsafe_types = allow_unsafe_types
        self._download_threads = max(1, int(download_threads))

        self._caches: list[ShardCache] = []
        infos: list[Any] = []
        sizes: list[list[int]] = []
        for s in self.streams:
            shards = s.load_index()
            self._caches.append(ShardCache(
                s.local_dir, s.remote_url, shards,
                validate_hash=s.validate_hash if s.validate_hash is not None else validate_hash,
                download_retry=s.download_retry if s.download_retry is not None else download_retry,
                download_timeout=s.download_timeout if s.download_timeout is not None else download_timeout,
                keep_zip=s.keep_zip if s.keep_zip is not None else keep_zip,
                name=s.remote_url or str(s.local_dir), index_fetch_s=s.index_fetch_s))
            infos.extend(shards)
            sizes.append([int(x.samples) for x in shards])
        self._infos = infos
        self._needs_work = any(c.needs_work for c in self._caches)
        self._on_this_machine = all(c.remote is None for c in self._caches)
        self._locator = ShardLocator(self._caches)
        stream_totals = [sum(x) for x in sizes]
        epoch_samples = parse_count(epoch_size) or None  # as mosaic: 0 or "" is no epoch size
        if epoch_samples is not None and epoch_samples < 0:
            raise ConfigValueError(f"epoch_size cannot be negative, got {epoch_size!r}")
        choose = stream_choose(stream_totals, [s.proportion for s in self.streams], [s.repeat for s in self.streams],
                               [s.choose for s in self.streams], epoch_samples, self.shuffle_seed)
        shares = stream_proportions(stream_totals, [s.proportion for s in self.streams], choose.tolist(), epoch_size)
        self._layout = make_layout(sizes, choose.tolist(), shares.tolist())
        limit = parse_bytes(cache_limit) or None  # as mosaic: 0 is no limit
        check_cache_limit(self._caches, limit)
        self._evictor = Evictor(self._caches, limit)
        self._readers = ReaderPool(self._infos, self._locator.ensure, allow_unsafe_types, refetch_deleted=self._needs_work)
        self._counter = EpochCounter()
        self._worker_batches: WorkerBatches | None = None  # set by StreamingDataLoader for its workers
        self._work_cache: tuple[tuple, np.ndarray] | None = None
        self._len_cache: tuple[tuple, int] | None = None
        self._initial_physical_nodes: int | None = None
        self._resume_global_batch: int | None = None
        self.fingerprint = self._fingerprint()

    # ---- sizes --------------------------------------------------------------------------------
    @property
    def num_samples(self) -> int:
        """Samples in the underlying data (all streams, each once)."""
        return self._layout.num_samples

    @property
    def size(self) -> int:
        """Samples in the underlying data, as mosaic's `size` (the range of `ds[i]`)."""
        return self._layout.num_samples

    @property
    def epoch_size(self) -> int:
        """Samples one epoch takes (streams' proportion/repeat/choose, epoch_size), before the few
        repeats canonical nodes and ranks may need: mosaic's `epoch_size` attribute."""
        return self._layout.epoch_samples

    def __len__(self) -> int:
        """Samples this rank yields in a whole epoch (what iterating from the epoch's start yields)."""
        topo = Topology.detect()
        cfg, world = self._order_config(), self._world(topo, workers=1)
        key = (cfg, world, topo.rank)
        if self._len_cache is None or self._len_cache[0] != key:
            self._len_cache = (key, rank_length(self._layout, cfg, world, topo.node, topo.rank % topo.local_world_size))
        return self._len_cache[1]

    # ---- random access ------------------------------------------------------------------------
    def __getitem__(self, index: Any) -> Any:
        """Sample `index` of the underlying data (0..num_samples-1, negative from the end); fetches
        only its shard. A slice, list or numpy array of indices gives a list of samples, as in
        mosaicml-streaming. `ds[i]` calls `get_item(i)`, and a subclass may override either."""
        return index_samples(index, self.num_samples, self.get_item, self.__getitem__)  # checks the range

    def get_item(self, index: int) -> Any:
        """The stored sample `index`, decoded (no transform a subclass adds in `__getitem__`). Its
        arrays are its own (writable, copied out of the shard): an in-place change never reaches
        the next read of the same sample."""
        if not 0 <= index < self.num_samples:
            raise IndexError(f"sample {index} out of range for {self.num_samples} samples")
        shard = int(np.searchsorted(self._layout.shard_offsets, index, side="right") - 1)
        return own_arrays(self._readers.get(shard).get_sample(index - int(self._layout.shard_offsets[shard])))

    # ---- shards (mosaic's names) ----------------------------------------------------------------
    @property
    def shards(self) -> list[Any]:
        """Every stream's shards in order: ShardInfo records (samples, compression, column_names,
        raw_basename, ...; `len(shard)` is its samples), not mosaic's reader objects."""
        return list(self._infos)

    @property
    def num_shards(self) -> int:
        return len(self._infos)

    def prepare_shard(self, shard_id: int, blocking: bool = True) -> None:
        """Make shard `shard_id` local (download, check, decompress), evicting others under
        cache_limit. `blocking` is accepted for mosaic's signature: it always waits."""
        self._locator.ensure(int(shard_id))
        if self._evictor.limit is not None:
            self._evictor.maybe_evict((int(shard_id),))

    def evict_shard(self, shard_id: int) -> None:
        """Delete shard `shard_id`'s local files; the next read downloads it again. A shard whose
        only copy is the local folder (no remote, or remote == local) is never deleted."""
        self._readers.drop(int(shard_id))
        self._locator.evict(int(shard_id))

    def _transforms_samples(self) -> bool:
        """A subclass changes what a sample is (mosaic's usual pattern: `__getitem__` calls
        `super().__getitem__` and transforms the result): iteration must go through it too."""
        cls = type(self)
        return cls.__getitem__ is not StreamingDataset.__getitem__ or cls.get_item is not StreamingDataset.get_item

    # ---- iteration ----------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        topo = Topology.detect()
        if self._initial_physical_nodes is None:
            self._initial_physical_nodes = topo.num_nodes
        g = self._global_batch(topo)
        if self._resume_global_batch is not None and int(self._resume_global_batch) != g:
            raise DataValueError(f"the loaded data state used global batch {self._resume_global_batch}, this run's is {g} "
                            f"(batch_size {self.batch_size} x {topo.world_size} ranks)",
                            hint="keep the global batch: per-device batch = global batch / ranks")
        epoch, start = self._counter.begin(topo.worker_id, topo.num_workers)
        # what this iteration reads, and how: decided once, here; everything below takes them
        plan = self._epoch_plan(topo, epoch, start)
        policy = self._read_policy(topo)
        shards = DatasetShards(self._locator, self._readers, self._evictor, policy,
                               self._use_schedule(topo, epoch, start), plan.window)
        sample = None
        if self._transforms_samples():  # the plan's shards still drive prefetch, open and eviction
            first = self._layout.shard_offsets.tolist()
            sample = lambda shard, index: self[first[shard] + index]  # noqa: E731
        if policy.batches_in_worker:
            return iterate_batches(plan, shards, self._worker_batches, policy, sample)
        # a sample the plan yields twice from a map would share it: an in-place change to the first
        # would show in the second. Its shard's samples get arrays of their own (DataLoader workers
        # read with pread: each sample has its own bytes already)
        own = _shards_repeating_a_sample(plan, self._layout.shard_offsets) if policy.own_repeats else set()
        return iterate(plan, shards, policy, sample, own)

    def _read_policy(self, topo: Topology) -> ReadPolicy:
        """How this iteration reads (plan/iteration.py): from the topology, the process's role and
        the streams."""
        in_worker = get_worker_info() is not None
        return ReadPolicy.decide(alone_on_node=topo.alone_on_node, in_worker=in_worker,
                                 far_store=self._locator.far_remote, on_this_machine=self._on_this_machine,
                                 transforms_samples=self._transforms_samples(),
                                 worker_batches=self._worker_batches is not None)

    def can_batch_in_workers(self) -> bool:
        """Whether StreamingDataLoader may have this dataset's iteration yield whole batches: not
        when a subclass wraps `__iter__` (it expects samples from `super().__iter__()`)."""
        return type(self).__iter__ is StreamingDataset.__iter__

    @contextmanager
    def batched_in_workers(self, batches: WorkerBatches) -> Iterator[None]:
        """While a StreamingDataLoader starts its workers: their copies of this dataset yield whole
        batches (loader/worker_batches.py), every epoch; this process's copy is left as it was."""
        saved = self._worker_batches
        self._worker_batches = batches
        try:
            yield
        finally:
            self._worker_batches = saved

    @contextmanager
    def planned_for_workers(self, num_workers: int) -> Iterator[None]:
        """While a DataLoader starts its `num_workers` workers: the epoch they are about to begin
        is planned once, here, and every worker (forked, or pickled with the dataset) finds it
        instead of building the whole world's plan again. Anything unexpected (another epoch, a
        plan that fails) is left to the workers, which plan and report as before."""
        saved = self._work_cache
        try:
            topo = replace(Topology.detect(), worker_id=0, num_workers=num_workers)
            if self._initial_physical_nodes is None:
                self._initial_physical_nodes = topo.num_nodes
            self._epoch_work(topo, *self._counter.peek(0, num_workers))
        except Exception:  # noqa: BLE001 - the workers meet it again and raise it where they always did
            pass
        try:
            yield
        finally:
            self._work_cache = saved  # this process does not iterate that plan: do not keep it

    def _epoch_plan(self, topo: Topology, epoch: int, start: int) -> EpochPlan:
        """What this rank's worker reads this epoch, from global sample `start` on: all the hot loop sees."""
        shards, offsets = locate(self._worker_sample_ids(topo, epoch, start), self._layout.shard_offsets)
        return EpochPlan(shards, offsets, window=self._predownload_samples(), prefetch=self._needs_work,
                         threads=self._download_threads)

    def _use_schedule(self, topo: Topology, epoch: int, start: int) -> UseSchedule | None:
        """When the ranks of this node use each shard: the eviction order under cache_limit."""
        if self._evictor.limit is None:
            return None
        work = self._epoch_work(topo, epoch, start)
        ranks = [locate(rank_ids(work, topo.node, r), self._layout.shard_offsets)[0]
                 for r in range(topo.local_world_size)]
        return UseSchedule.build(ranks, self._global_batch(topo) // topo.world_size, topo.worker_id,
                                 topo.num_workers)

    def _canonical_nodes(self) -> int:
        if self.num_canonical_nodes is not None:
            return int(self.num_canonical_nodes)
        if self._initial_physical_nodes is None:
            self._initial_physical_nodes = Topology.detect().num_nodes
        return self._initial_physical_nodes * (64 if self.shuffle_algo in ("py1s", "py2s") else 1)

    def _global_batch(self, topo: Topology) -> int:
        return (self.batch_size or 1) * topo.world_size

    @staticmethod
    def _world(topo: Topology, workers: int | None = None) -> WorldShape:
        return WorldShape(topo.num_nodes, topo.local_world_size, topo.num_workers if workers is None else workers)

    def _order_config(self) -> OrderConfig:
        return OrderConfig(seed=self.shuffle_seed, shuffle=self.shuffle, algo=self.shuffle_algo,
                           block_size=self.shuffle_block_size, num_canonical_nodes=self._canonical_nodes(),
                           batch_size=self.batch_size or 1, partition_algo=self.partition_algo,
                           sampling_method=self.sampling_method, sampling_granularity=self.sampling_granularity,
                           batching_method=self.batching_method,
                           initial_physical_nodes=self._initial_physical_nodes)

    def _worker_sample_ids(self, topo: Topology, epoch: int, start: int) -> np.ndarray:
        """The global sample ids this rank's DataLoader worker yields from `start` of `epoch`."""
        return worker_ids(self._epoch_work(topo, epoch, start), topo.node, topo.rank % topo.local_world_size,
                          topo.worker_id)

    def _epoch_work(self, topo: Topology, epoch: int, start: int) -> np.ndarray:
        """The whole world's sample ids of `epoch` from `start` (plan.epoch_work), cached per epoch."""
        key = (self._order_config(), self._world(topo), epoch, start)
        if self._work_cache is None or self._work_cache[0] != key:
            self._work_cache = (key, epoch_work(self._layout, key[0], key[1], epoch, start))
        return self._work_cache[1]

    def _predownload_samples(self) -> int:
        if self.predownload is not None:
            return max(1, int(self.predownload))
        mean_shard = self.num_samples // max(1, len(self._infos))
        return max(8 * (self.batch_size or 1), 2 * mean_shard)

    @property
    def bytes_downloaded(self) -> int:
        """Bytes this process downloaded from remotes."""
        return self._locator.bytes_downloaded

    # ---- state --------------------------------------------------------------------------------
    def _fingerprint(self) -> str:
        parts = [[[x.raw_basename, int(x.samples)] for x in c.shards] for c in self._caches]
        facts = {"shards": parts, "choose": list(self._layout.choose), "sampling": self.sampling_method}
        if self.sampling_granularity != 1:  # only then, so that older states keep loading
            facts["granularity"] = self.sampling_granularity
        if self.batching_method != "random":  # another method is another order
            facts["batching"] = self.batching_method
        blob = json.dumps(facts, sort_keys=True).encode()
        return hashlib.sha1(blob).hexdigest()

    def state_dict(self, num_samples: int | None = None, from_beginning: bool = True) -> dict[str, Any]:
        """The resumption state after `num_samples` global samples were consumed.

        `from_beginning=True`: counted from the start of the current epoch; False: counted from
        where this iteration started (a resumed iteration starts mid-epoch)."""
        topo = Topology.detect()
        epoch, start, _ = self._counter.position()
        consumed = int(num_samples or 0) if from_beginning else start + int(num_samples or 0)
        g = self._global_batch(topo)
        # the stream-aware batching methods' order depends on nodes x ranks: kept to tell a resume elsewhere
        shape = {"world_shape": [topo.num_nodes, topo.local_world_size]} if self.batching_method != "random" else {}
        return build_state(epoch, consumed, epoch_length(self._layout, self._order_config(), self._world(topo, 1)),
                           num_canonical_nodes=self._canonical_nodes(), shuffle_seed=self.shuffle_seed,
                           initial_physical_nodes=self._initial_physical_nodes or topo.num_nodes,
                           global_batch_size=g, fingerprint=self.fingerprint, **shape)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state` at the next iteration; a state that does not fit is a DataError."""
        topo = Topology.detect()
        check_state(state, shuffle_seed=self.shuffle_seed, fingerprint=self.fingerprint,
                    num_canonical_nodes=self.num_canonical_nodes,
                    global_batch=self._global_batch(topo) if self.batch_size is not None else None)
        if state.get("initial_physical_nodes") is not None:
            self._initial_physical_nodes = int(state["initial_physical_nodes"])
        if self.num_canonical_nodes is None and state.get("num_canonical_nodes") is not None:
            self.num_canonical_nodes = int(state["num_canonical_nodes"])
        self._resume_global_batch = state.get("global_batch_size")
        epoch, sample = int(state["epoch"]), int(state["sample_in_epoch"])
        length = epoch_length(self._layout, self._order_config(), self._world(topo, 1))
        if length and sample >= length:
            epoch, sample = epoch + 1, 0
        if state.get("world_shape") is not None:  # other batches on another world shape: say so (plan/batching.py)
            note = resume_warning(self._layout, self._order_config(), state["world_shape"], self._world(topo, 1),
                                  epoch, sample)
            if note:
                import warnings

                warnings.warn(note, stacklevel=2)
        self._counter.resume(epoch, sample)


def _shards_repeating_a_sample(plan: EpochPlan, shard_offsets: np.ndarray) -> set[int]:
    """The shards of which this epoch yields some sample more than once (a stream upsampled with
    repeat, choose or proportion)."""
    if len(plan.shards) < 2:
        return set()
    ids = shard_offsets[plan.shards] + plan.offsets
    twice = np.bincount(ids)[ids] > 1
    return set(np.unique(plan.shards[twice]).tolist()) if twice.any() else set()
