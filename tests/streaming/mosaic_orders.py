"""Peer script, run next to mosaicml-streaming 0.13: reads a JSON list of cases on stdin and prints
the answers of mosaic's own planning code as JSON, so one process answers many cases.

kinds: "shuffle" (get_shuffle), "partition" (get_partitions), "sampling" (get_sampling) and "work":
the whole epoch plan of mosaic's StreamingDataset (Stream.apply_weights, resample_streams and the
case's "batching" method, 'random' by default) for a layout given as shard sizes per stream,
without any files.
"""

import json
import sys
import types
import warnings

import numpy as np

from streaming.base.batching import generate_work
from streaming.base.dataset import StreamingDataset
from streaming.base.partition import get_partitions
from streaming.base.sampling import get_sampling
from streaming.base.shuffle import get_shuffle
from streaming.base.stream import Stream
from streaming.base.world import World

warnings.simplefilter("ignore")


def work(case):
    streams = [Stream(local=f"/nonexistent/{i}", **{k: v for k, v in weights.items() if v is not None})
               for i, weights in enumerate(case["weights"])]
    sizes = [s for stream in case["shards"] for s in stream]
    per_stream = np.array([sum(x) for x in case["shards"]], np.int64)
    ds = types.SimpleNamespace(
        streams=streams, num_streams=len(streams), samples_per_shard=np.array(sizes, np.int64),
        shards_per_stream=np.array([len(x) for x in case["shards"]], np.int64),
        shuffle_seed=case["seed"], sampling_method=case["sampling_method"],
        sampling_granularity=case["granularity"], shuffle=case["shuffle"],
        epoch_seed_change=case["shuffle"] and case["sampling_method"] == "balanced",
        num_canonical_nodes=case["c"], batch_size=case["b"], partition_algo=case["partition_algo"],
        initial_physical_nodes=case["initial"], shuffle_algo=case["algo"], shuffle_block_size=case["block"])
    ds.shard_offset_per_stream = np.cumsum(ds.shards_per_stream) - ds.shards_per_stream
    ds.sample_offset_per_shard = ds.samples_per_shard.cumsum() - ds.samples_per_shard
    ds.epoch_size = Stream.apply_weights(streams, per_stream, case["epoch_size"], case["seed"])
    ds.resample_streams = types.MethodType(StreamingDataset.resample_streams, ds)
    world = World(case["p"], case["r"], case["w"], 0)
    return generate_work(case.get("batching", "random"), ds, world, case["epoch"], case["drop"])


out = []
for case in json.load(sys.stdin):
    kind = case.pop("kind")
    try:
        if kind == "shuffle":
            res = get_shuffle(case["algo"], np.array(case["units"], np.int64), case["c"], case["seed"], case["epoch"],
                              case["block"])
        elif kind == "partition":
            res = get_partitions(case["algo"], case["n"], case["c"], case["p"], case["r"], case["w"], case["b"],
                                 case.get("drop", 0), case.get("initial"))
        elif kind == "sampling":
            res = get_sampling(np.array(case["sizes"], np.int64), case["choose"], case["g"], case["seed"],
                               case["epoch"], case["use_epoch"])
        else:
            res = work(case)
    except Exception as e:  # noqa: BLE001 - the caller compares refusals too
        out.append({"error": f"{type(e).__name__}: {e}"})
        continue
    res = np.asarray(res)
    out.append({"shape": list(res.shape), "ids": res.reshape(-1).tolist()})
json.dump(out, sys.stdout)
