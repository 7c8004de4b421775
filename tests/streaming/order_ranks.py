"""One script, two libraries: `python order_ranks.py LIB WORLD OUT JOBS_JSON` runs the same
jobs with mosaicml-streaming (LIB=mosaic, in the peer venv) or Foundry (LIB=foundry) on WORLD ranks,
each a separate process on one node (RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, torch.distributed over
gloo, as torchrun would start them). Rank r writes OUT.r.json: one answer per job.

Jobs (the dataset folder in "data", keyword arguments in "kw", per-device "batch"; a mixture
gives kw["streams"]: a list of Stream keyword arguments, each with its "remote"):
- "epochs": two epochs through one DataLoader with "workers" workers: the ids of each, in order.
- "stop": "stop" batches through a StreamingDataLoader (after "skip" whole epochs, if given), then
  its state_dict(): (ids, state).
- "resume": a fresh StreamingDataLoader that loads "state" and reads the rest of the epoch.
- "plain": `for sample in dataset` (after loading "state", if given), "limit" samples at most;
  with a limit, also the state after limit x WORLD samples (dataset.state_dict(n, True)).
"""

import gc
import json
import os
import socket
import subprocess
import sys
import time

lib, world, out, jobs_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

if world > 1 and "RANK" not in os.environ:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, *sys.orig_argv[1:]],
                              env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world),
                                       LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)))
             for r in range(world)]
    sys.exit(max(p.wait(600) for p in procs))

import torch.distributed as dist  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

if lib == "mosaic":
    from streaming import Stream, StreamingDataLoader, StreamingDataset
else:
    from foundry.streaming import Stream, StreamingDataLoader, StreamingDataset

rank = int(os.environ.get("RANK", 0))
if world > 1:
    dist.init_process_group("gloo", rank=rank, world_size=world)
jobs = json.loads(open(jobs_path).read())
counter = [0]


def dataset(data, kw, batch):
    counter[0] += 1  # mosaic refuses two live datasets on one local folder
    local = f"{out}-cache-{counter[0]}"  # per dataset (mosaic trusts an existing index), shared by the ranks
    if "streams" in kw:  # a mixture: kw["streams"] lists each stream's remote and weights
        kw = dict(kw, streams=[Stream(local=f"{local}-{i}", **s) for i, s in enumerate(kw["streams"])])
        data = local = None
    for attempt in range(20):
        try:
            return StreamingDataset(remote=data, local=local, batch_size=batch, **kw)
        except FileExistsError:  # mosaic picks a /dev/shm prefix another process took meanwhile
            time.sleep(0.2 * (attempt + 1))
    raise RuntimeError("no free shared-memory prefix for mosaic's StreamingDataset")


def ids_of(batches):
    return [int(i) for b in batches for i in b["id"]]


answers = []
for job in jobs:
    kind, kw, batch = job["kind"], job.get("kw", {}), job.get("batch", 1)
    if kind == "epochs":
        loader = DataLoader(dataset(job["data"], kw, batch), batch_size=batch, num_workers=job["workers"])
        answers.append([ids_of(loader), ids_of(loader)])
    elif kind == "stop":
        loader = StreamingDataLoader(dataset(job["data"], kw, batch), batch_size=batch, num_workers=job["workers"])
        for _ in range(job.get("skip", 0)):
            for _ in loader:
                pass
        head = []
        for i, b in enumerate(loader):
            head.append(b)
            if i + 1 == job["stop"]:
                break
        answers.append({"ids": ids_of(head), "state": loader.state_dict()})
    elif kind == "resume":
        loader = StreamingDataLoader(dataset(job["data"], kw, batch), batch_size=batch, num_workers=job["workers"])
        loader.load_state_dict(job["state"])
        answers.append(ids_of(loader))
    elif kind == "plain":
        ds = dataset(job["data"], kw, batch)
        if job.get("state"):
            ds.load_state_dict(job["state"])
        limit, seen = job.get("limit"), []
        for sample in ds:
            seen.append(int(sample["id"]))
            if limit is not None and len(seen) == limit:
                break
        state = ds.state_dict(limit * world, True) if limit is not None else None
        answers.append({"ids": seen, "state": state, "len": len(ds)})
    gc.collect()  # release mosaic's shared memory of the datasets done with
    if world > 1:
        dist.barrier()
with open(f"{out}.{rank}.json", "w") as f:
    json.dump(answers, f)
if world > 1:
    dist.destroy_process_group()
