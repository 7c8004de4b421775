"""One mosaic script, run by mosaicml-streaming 0.13 and, with only its imports changed, by Foundry
(issue 29.4): what it prints must be the same. It uses the API a switching user's scripts use:
clean_stale_shared_memory, the parallel-writer pattern with merge_index, epoch_size and cache_limit
strings, the built-in exceptions of bad input, shards / prepare_shard / evict_shard, fancy indexing,
LocalDataset, a registered custom Stream, hashes=None, and in-place changes to a sample's tensor."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.subprocess  # Foundry's run is its own process (the peer mark comes from mosaic_peer)

SCRIPT = r"""
import json, os, sys
import numpy as np
import torch
from torch.utils.data import DataLoader
from streaming import LocalDataset, MDSWriter, Stream, StreamingDataset
from streaming.base.util import clean_stale_shared_memory, merge_index
from streaming.base.stream import streams_registry

root = sys.argv[1]
clean_stale_shared_memory()
out = {}
columns = {"id": "int", "x": "ndarray:float32:3"}
for k in range(2):  # two "workers", each writing a sub-folder
    with MDSWriter(out=f"{root}/parts/part-{k}", columns=columns, size_limit=400) as w:
        for i in range(50 * k, 50 * k + 50):
            w.write({"id": i, "x": np.full(3, i, np.float32)})
merge_index(f"{root}/parts")
parts = f"{root}/parts"

ds = StreamingDataset(remote=parts, local=f"{root}/cache-a", epoch_size="0.15k", batch_size=4)
out["size"], out["epoch_size"], out["num_shards"] = ds.size, ds.epoch_size, ds.num_shards
out["shard_samples"] = [len(s) for s in ds.shards]
ids = lambda samples: [int(s["id"]) for s in samples]
out["list"], out["slice"], out["array"] = ids(ds[[3, 60, 99]]), ids(ds[2:12:3]), ids(ds[np.array([7, 8])])
out["last"] = int(ds[-1]["id"])
ds.prepare_shard(5)
shard5 = os.path.join(f"{root}/cache-a", ds.shards[5].raw_data.basename)
out["shard5"] = [ds.shards[5].raw_data.basename, ds.shards[5].zip_data, len(ds.shards[5])]  # (bytes: the hashes differ)
out["prepared"] = os.path.exists(shard5)
ds.evict_shard(5)
out["evicted"] = not os.path.exists(shard5)

# in-place changes to a sample's tensor: no crash, and the data stays as stored
x = ds[3]["x"]
torch.from_numpy(x).mul_(2)
out["after_mul"], out["reread"] = x.tolist(), ds[3]["x"].tolist()
firsts = []
for b in DataLoader(StreamingDataset(local=parts, batch_size=1), batch_size=None):
    b["x"].add_(1)
    firsts.append(b["x"].tolist())
out["added"] = firsts[:3]

def kind(make):
    try:
        make()
    except ValueError:
        return "ValueError"
    except FileExistsError:
        return "FileExistsError"
    except RuntimeError:
        return "RuntimeError"
    except Exception as exc:
        return "other " + type(exc).__name__
    return "no error"

out["errors"] = {
    "cache_limit": kind(lambda: StreamingDataset(remote=parts, local=f"{root}/cache-b", cache_limit="1kb")),
    "epoch_size": kind(lambda: StreamingDataset(local=parts, epoch_size="1kb")),
    "sampling": kind(lambda: StreamingDataset(local=parts, sampling_method="nope")),
    "no_index": kind(lambda: StreamingDataset(local=f"{root}/nowhere")),
    "not_empty": kind(lambda: MDSWriter(out=parts, columns=columns)),
    "writer_arg": kind(lambda: MDSWriter(out=f"{root}/w", columns=columns, no_such_argument=1)),
    "two_weights": kind(lambda: Stream(local=parts, proportion=0.5, repeat=2)),
}
os.makedirs(f"{root}/corrupt")
with open(f"{root}/corrupt/index.json", "w") as f:
    f.write('{"version": 2, "shards": [')
try:
    StreamingDataset(local=f"{root}/corrupt")
except json.JSONDecodeError:
    out["errors"]["corrupt_index"] = "JSONDecodeError"

local = LocalDataset(parts)
out["local"] = [len(local), int(local[5]["id"]), ids(local[[1, 98]])]

class Tagged(Stream):
    def __init__(self, *, tag, **kwargs):
        super().__init__(**kwargs)
        self.tag = tag

streams_registry.register("tagged", func=Tagged)
tagged = StreamingDataset(local=parts, stream_name="tagged", stream_config={"tag": "mine"}, batch_size=1)
out["stream"] = [type(tagged.streams[0]).__name__, tagged.streams[0].tag, len(list(tagged))]

with MDSWriter(out=f"{root}/nohash", columns=columns, hashes=None) as w:
    w.write({"id": 0, "x": np.zeros(3, np.float32)})
index = json.load(open(f"{root}/nohash/index.json"))
out["nohash"] = [sorted(os.listdir(f"{root}/nohash")), index["shards"][0]["hashes"], sorted(index)]
print(json.dumps(out, sort_keys=True))
"""

FOUNDRY_IMPORTS = [
    ("from streaming import", "from foundry.streaming import"),
    ("from streaming.base.util import", "from foundry.streaming import"),
    ("from streaming.base.stream import", "from foundry.streaming.stream import"),
]


def test_a_mosaic_script_with_only_its_imports_changed_prints_the_same(mosaic_peer, tmp_path):
    theirs = json.loads(mosaic_peer(SCRIPT, str(tmp_path / "mosaic")).strip().splitlines()[-1])
    script = SCRIPT
    for old, new in FOUNDRY_IMPORTS:
        script = script.replace(old, new)
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "foundry")], capture_output=True, text=True,
                          timeout=300, env={"FOUNDRY_DISABLE_PLUGIN_AUTOLOAD": "1", "PATH": "/usr/bin:/bin",
                                            "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-4000:]
    ours = json.loads(proc.stdout.strip().splitlines()[-1])
    assert theirs["errors"]["cache_limit"] == "ValueError" and theirs["epoch_size"] == 150  # what mosaic does
    assert ours == theirs
