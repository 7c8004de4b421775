"""One rank of the real multi-process test: `python rank_worker.py RANK WORLD REMOTE CACHE OUT [streaming]`.

Joins a gloo process group through a file rendezvous, reads one epoch with a 2-worker DataLoader
(torch's, or StreamingDataLoader with `streaming`), saves its batches to OUT.RANK.npy."""

import os
import sys

import numpy as np

rank, world, remote, cache, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))

import torch.distributed as dist  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from foundry.streaming import StreamingDataLoader, StreamingDataset  # noqa: E402

dist.init_process_group("gloo", init_method=f"file://{out}.rdzv", rank=rank, world_size=world)
ds = StreamingDataset(remote=remote, local=cache, shuffle=True, batch_size=4, shuffle_block_size=30)
loader = StreamingDataLoader if sys.argv[6:] == ["streaming"] else DataLoader
batches = [b["id"].numpy() for b in loader(ds, batch_size=4, num_workers=2)]
np.save(f"{out}.{rank}.npy", np.stack(batches))
dist.barrier()
dist.destroy_process_group()
