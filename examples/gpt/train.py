"""Train the tiny GPT: data streamed from a storage URL (MDS, from prep.py), checkpoints to another.

    python examples/gpt/train.py --data file:///tmp/pystdlib --save-folder 's3://bucket/{run_name}/checkpoints'
    torchrun --nproc_per_node=2 examples/gpt/train.py ...     # same global batch, split over ranks
    torchrun --nproc_per_node=8 examples/gpt/train.py --parallelism fsdp --precision bf16 ...

The GPU is used when there is one (--device auto); --precision auto is bf16 autocast on a GPU that
supports it (TF32 matmuls otherwise), fp32 on CPU. FSDP shards each block, keeps the tied
embedding/head in one group, and works on CPU (gloo) too.

Rerunning with --autoresume continues the run from its latest checkpoint; SIGTERM pauses it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import torch

if __package__:  # python -m foundry.examples.gpt.train, or imported as examples.gpt.train
    from .model import GPT, GPTConfig
else:  # python examples/gpt/train.py
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from model import GPT, GPTConfig  # type: ignore[no-redef]
from foundry.streaming import StreamingDataLoader, StreamingDataset  # noqa: E402
from foundry.trainer import Trainer, WarmupCosine  # noqa: E402
from foundry.trainer.dist import DistEnv  # noqa: E402


def default_cache_dir(run_name: str) -> str:
    """Node-local by default: $FOUNDRY_CACHE_DIR, else the node's temp folder (TMPDIR is local on clusters)."""
    root = os.environ.get("FOUNDRY_CACHE_DIR") or os.path.join(tempfile.gettempdir(), "foundry-cache")
    return os.path.join(root, run_name)


def build_trainer(data: str, save_folder: str | None, run_name: str = "tiny-gpt", max_duration: str = "300ba",
                  global_batch: int = 16, lr: float = 2e-3, save_interval: str = "100ba", eval_interval: str = "100ba",
                  autoresume: bool = False, save_overwrite: bool = True, run_dir: str | None = None,
                  cache_dir: str | None = None, model_cfg: GPTConfig | None = None, **trainer_kwargs) -> Trainer:
    env = DistEnv.detect()
    if global_batch % env.world_size:
        raise SystemExit(f"global batch {global_batch} is not divisible by {env.world_size} ranks")
    per_rank = global_batch // env.world_size
    # One cache per node, shared by the node's ranks (the loader coordinates them through the folder):
    # each shard is downloaded once per node, not once per rank. The script passes a node-local folder;
    # library callers that give only run_dir keep the cache there.
    cache = Path(cache_dir or (os.path.join(run_dir, "data-cache") if run_dir else default_cache_dir(run_name)))
    train = StreamingDataset(remote=f"{data.rstrip('/')}/train", local=str(cache / "train"),
                             shuffle=True, shuffle_seed=17, batch_size=per_rank, num_canonical_nodes=1)
    val = StreamingDataset(remote=f"{data.rstrip('/')}/val", local=str(cache / "val"),
                           shuffle=False, batch_size=per_rank, num_canonical_nodes=1)
    torch.manual_seed(17)
    model = GPT(model_cfg or GPTConfig())
    return Trainer(
        run_name=run_name, model=model, max_duration=max_duration,
        train_dataloader=StreamingDataLoader(train, batch_size=per_rank, num_workers=0),
        eval_dataloader=StreamingDataLoader(val, batch_size=per_rank, num_workers=0),
        optimizers=lambda params: torch.optim.AdamW(params, lr=lr, weight_decay=0.01, betas=(0.9, 0.95)),
        schedulers=WarmupCosine(warmup="0.05dur", alpha_f=0.1), eval_interval=eval_interval,
        save_folder=save_folder, save_interval=save_interval, save_num_checkpoints_to_keep=2,
        autoresume=autoresume, save_overwrite=save_overwrite, grad_clip_norm=1.0, seed=17, run_dir=run_dir,
        config={"model": vars(model.cfg), "data": data, "global_batch": global_batch}, **trainer_kwargs)


def train_loader(data: str, global_batch: int = 16, cache_dir: str = "data-cache") -> StreamingDataLoader:
    """A factory for run specs' `parameters` (`train_dataloader: foundry.examples.gpt.train:train_loader`)."""
    env = DistEnv.detect()
    per_rank = global_batch // env.world_size
    train = StreamingDataset(remote=f"{data.rstrip('/')}/train", local=f"{cache_dir}/train",
                             shuffle=True, shuffle_seed=17, batch_size=per_rank, num_canonical_nodes=1)
    return StreamingDataLoader(train, batch_size=per_rank, num_workers=0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="URL of the MDS dataset written by prep.py")
    p.add_argument("--save-folder", help="checkpoint URL; {run_name} is replaced")
    p.add_argument("--run-name", default=os.environ.get("RUN_NAME", "tiny-gpt"))
    p.add_argument("--max-duration", default="300ba")
    p.add_argument("--global-batch", type=int, default=16)
    p.add_argument("--save-interval", default="100ba")
    p.add_argument("--autoresume", action="store_true")
    p.add_argument("--load-path", help="start from this checkpoint (a save folder or one checkpoint's URL)")
    p.add_argument("--run-dir")
    p.add_argument("--cache-dir", help="shard cache shared by this node's ranks (default: node-local "
                                       "$FOUNDRY_CACHE_DIR or TMPDIR/foundry-cache, per run)")
    p.add_argument("--device", default="auto", help="auto (the GPU when present), cpu, cuda")
    p.add_argument("--precision", default="auto", help="auto, fp32, bf16 or fp16")
    p.add_argument("--parallelism", default="auto", help="auto (DDP when distributed), ddp, fsdp or none")
    p.add_argument("--checkpoint-layout", default="full", help="full (portable) or sharded (DCP, per rank)")
    p.add_argument("--dropout", type=float, default=0.0, help="dropout in every block (resumes exactly too)")
    a = p.parse_args()
    trainer = build_trainer(a.data, a.save_folder, a.run_name, a.max_duration, a.global_batch,
                            save_interval=a.save_interval, autoresume=a.autoresume, run_dir=a.run_dir,
                            cache_dir=a.cache_dir or default_cache_dir(a.run_name),
                            load_path=a.load_path, device=a.device, precision=a.precision,
                            parallelism=a.parallelism, checkpoint_layout=a.checkpoint_layout,
                            model_cfg=GPTConfig(dropout=a.dropout))
    trainer.fit()


if __name__ == "__main__":
    main()
