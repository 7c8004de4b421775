"""One side of the checkpoint throughput bench (ckpt_throughput.py starts it; one process per rank).

    python ckpt_side.py SIDE LAYOUT WIDTH DEPTH PREFIX RUN_DIR      # plain, or under torchrun

SIDE foundry: a Trainer saves once to s3://PREFIX (timed from the hand-off to the background thread
to `latest` published, the training thread idle meanwhile), then a new Trainer with autoresume
restores it (timed from fit() to fit_start, which fires right before the first step). SIDE floor: the
same state, torch.save to a local file + boto3's transfer manager (tuned) upload_file; then
download_file + torch.load. Under FSDP, full: rank 0 writes the gathered state; sharded: every rank
its own shards. Prints one JSON line per rank (rank 0 prints every rank's): save_s, restore_s,
bytes (this rank's), rss_mib (peak).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

import torch
from bench_models import data, mlp

MiB = 1 << 20
PART = int(os.environ.get("FLOOR_PART_MIB", "16")) * MiB
THREADS = int(os.environ.get("FLOOR_THREADS", "16"))


def world() -> tuple[int, int]:
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def trainer(layout, width, depth, url, run_dir, steps, save_every, callbacks, autoresume=False):
    from foundry.trainer import Trainer

    par = "fsdp" if world()[1] > 1 else "none"
    xfer = None
    if os.environ.get("FOUNDRY_PART_MIB"):  # else the store's defaults
        part = int(os.environ["FOUNDRY_PART_MIB"]) * MiB
        xfer = {"part_size": part, "multipart_threshold": part, "concurrency": int(os.environ["FOUNDRY_THREADS"])}
    return Trainer(checkpoint_transfer=xfer, run_name="ckpt-bench", model=mlp(width, depth), train_dataloader=data(width, steps, 8),
                   max_duration=f"{steps}ba", loss_fn=torch.nn.functional.mse_loss, save_folder=url,
                   save_interval=f"{save_every}ba", checkpoint_layout=layout, device="cpu", parallelism=par,
                   run_dir=run_dir, progress_bar=False, console_log_interval=10**9, callbacks=callbacks,
                   autoresume=autoresume, save_overwrite=not autoresume)


def time_stages(stages: dict) -> None:
    """Accumulate seconds per stage of Foundry's save and restore (module functions wrapped in place),
    for the bench's "where the time goes" table. Stages may overlap their parents (upload holds verify)."""
    import functools

    import torch.distributed.checkpoint as dcp

    from foundry.trainer.checkpoint import loader, saver, store_ops

    def wrap(owner, name, label):
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                stages[label] = stages.get(label, 0.0) + time.perf_counter() - start
        setattr(owner, name, timed)

    for owner, name, label in (
            (saver.torch, "save", "save: torch.save"), (dcp, "save", "save: dcp.save"),
            (store_ops, "upload_files", "save: upload (hash in pass, verify)"),
            (store_ops, "verify_object", "save: verify in store"), (store_ops, "publish", "save: publish"),
            (store_ops, "prune", "save: prune"),
            (loader, "download", "restore: download (sha256 in pass)"), (loader, "restore", "restore: load into model"),
            (loader, "load_file", "restore: torch.load"), (dcp, "load", "restore: dcp.load"),
            (loader, "model_optim_state", "restore: get_state_dict"),
            (loader, "apply_model_optim_state", "restore: set_state_dict")):
        wrap(owner, name, label)


def foundry_side(layout, width, depth, prefix, run_dir) -> dict:
    url = f"s3://{prefix}"
    out: dict = {"stages": {}}
    running: dict = {}
    time_stages(running)

    class TimeSave:
        """Wraps the saver's save: the hand-off returns, then the training thread just waits."""

        def fit_start(self, t):
            saver = t.checkpoints.saver
            original = saver.save
            if getattr(saver, "_bench_wrapped", False):
                return
            saver._bench_wrapped = True

            def save(*args, **kwargs):
                before = dict(running)
                name = original(*args, **kwargs)
                start = time.perf_counter()
                saver._done.wait()
                if "save_s" not in out:  # the first save only
                    out["stages"].update({k: v - before.get(k, 0.0) for k, v in running.items()})
                out.setdefault("save_s", time.perf_counter() - start)
                out.setdefault("stall_s", saver.last_stall_s)
                return name

            saver.save = save

    # 2 steps, one save (at the end): a second upload would still be flushing in the store during the restore
    t = trainer(layout, width, depth, url, f"{run_dir}/save", 2, 2, [TimeSave()])
    t.fit()
    del t

    class Ready:
        def fit_start(self, t):
            out["restore_s"] = time.perf_counter() - out.pop("_fit")
            out["stages"].update({k: v for k, v in running.items() if k.startswith("restore")})

    t = trainer(layout, width, depth, url, f"{run_dir}/restore", 3, 100, [Ready()], autoresume=True)
    running.clear()
    out["_fit"] = time.perf_counter()
    t.fit()
    assert t.checkpoints.resumed_from, "did not resume"
    out["bytes"] = _local_state_bytes(t, layout)
    return out


def _local_state_bytes(t, layout) -> int:
    from foundry.trainer.checkpoint.state import _leaves, live_model_optim_state
    from foundry.trainer.torch_compat import local_tensor

    rank, w = world()
    n = sum(local_tensor(x).numel() * x.element_size()
            for _, x in _leaves(live_model_optim_state(t.model, t.optimizers)))
    if layout == "full":
        return n * w if rank == 0 else 0
    return n


def floor_state(model, opt, layout):
    """What the plain client writes: the model + optimizer state, full on rank 0 or this rank's shards."""
    rank, w = world()
    if w == 1:
        return {"model": model.state_dict(), "optim": opt.state_dict()}
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    full = layout == "full"
    msd, osd = get_state_dict(model, opt, options=StateDictOptions(full_state_dict=full, cpu_offload=full))
    if full:
        return {"model": msd, "optim": osd} if rank == 0 else None

    def local(x):
        return x.to_local() if hasattr(x, "to_local") else x
    return {"model": {k: local(v) for k, v in msd.items()},
            "optim": {"state": {k: {n: local(v) for n, v in s.items()} for k, s in osd["state"].items()},
                      "param_groups": osd["param_groups"]}}


def floor_side(layout, width, depth, prefix, run_dir) -> dict:
    import boto3
    from boto3.s3.transfer import TransferConfig
    from botocore.config import Config

    rank, w = world()
    model = mlp(width, depth)
    if w > 1:
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard

        dist.init_process_group("gloo")
        fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for x, y in data(width, 2, 8):  # AdamW state exists
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    client = boto3.session.Session().client(
        "s3", endpoint_url=os.environ["S3_ENDPOINT_URL"], region_name="us-east-1",
        config=Config(max_pool_connections=THREADS * 2, retries={"max_attempts": 3}))
    cfg = TransferConfig(multipart_threshold=PART, multipart_chunksize=PART, max_concurrency=THREADS,
                         use_threads=True)
    bucket, _, key_prefix = prefix.partition("/")
    key = f"{key_prefix}/floor/rank{rank}.pt"
    local = Path(run_dir) / f"floor-rank{rank}.pt"
    local.parent.mkdir(parents=True, exist_ok=True)
    out: dict = {"bytes": 0}
    if w > 1:
        dist.barrier()
    start = time.perf_counter()
    # the full layout's gather under FSDP is part of writing its file (Foundry's save does it after the
    # hand-off, in the background thread): timed here too
    state = floor_state(model, opt, layout)
    if state is not None:
        torch.save(state, local)
        client.upload_file(str(local), bucket, key, Config=cfg)
        out["bytes"] = local.stat().st_size
    out["save_s"] = time.perf_counter() - start
    del state
    local.unlink(missing_ok=True)
    if w > 1:
        dist.barrier()
    start = time.perf_counter()
    if out["bytes"]:
        client.download_file(bucket, key, str(local), Config=cfg)
        loaded = torch.load(local, weights_only=True)
        if w == 1:
            model.load_state_dict(loaded["model"])
            opt.load_state_dict(loaded["optim"])
        else:  # the same amount of work: the tensors copied into place
            del loaded
    if w > 1:
        dist.barrier()
    out["restore_s"] = time.perf_counter() - start
    local.unlink(missing_ok=True)
    return out


def main() -> None:
    side, layout, width, depth, prefix, run_dir = sys.argv[1:7]
    torch.set_num_threads(1)
    fn = foundry_side if side == "foundry" else floor_side
    mine = fn(layout, int(width), int(depth), prefix, run_dir)
    mine["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rank, w = world()
    per_rank = [mine]
    if w > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group("gloo")
        per_rank = [None] * w
        dist.all_gather_object(per_rank, mine)
    if rank == 0:
        print("RESULT " + json.dumps(per_rank), flush=True)


if __name__ == "__main__":
    main()
