"""The multi-node tests' job: a tiny GPT-style model trained by Foundry's Trainer on data streamed from
S3, checkpoints to S3, exact resume on any world size (same global batch). Run under torchrun by a
provider, once per rank. Settings from the run spec's env: DATA_URL, SAVE_URL ({run_name}), STEPS,
GLOBAL_BATCH, SAVE_INTERVAL, STEP_DELAY, NODE_LOCAL_ROOT (node-local disks: ROOT/<hostname>/local).

Prints one `rank-env` line with what the launcher gave this process, and writes
samples-r{RESUMPTION}-rank{R}.jsonl (per step: the sample ids and the loss) in FOUNDRY_RUN_DIR.
"""

import json
import os
import socket
import time
from pathlib import Path

import torch

from foundry.streaming import StreamingDataLoader, StreamingDataset
from foundry.trainer import Trainer

VOCAB, SEQ = 64, 16


class TinyLM(torch.nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.tok = torch.nn.Embedding(VOCAB, width)
        self.mix = torch.nn.Linear(width, width)
        self.head = torch.nn.Linear(width, VOCAB)

    def forward(self, batch):
        h = self.tok(batch["tokens"][:, :-1].long())
        return self.head(torch.tanh(self.mix(h)))


class Recorder:
    def __init__(self, path: Path):
        self.path, self.ids = path, []

    def loss(self, logits, batch):
        self.ids += [int(i) for i in batch["id"]]
        y = batch["tokens"][:, 1:].long()
        return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))

    def batch_end(self, trainer) -> None:
        with open(self.path, "a") as fh:
            fh.write(json.dumps({"step": trainer.timestamp.batch, "ids": self.ids, "loss": trainer.last_loss}) + "\n")
        self.ids = []
        time.sleep(float(os.environ.get("STEP_DELAY", "0")))


def node_cache(run_name: str) -> str:
    """One cache per node, shared by the node's ranks (the loader coordinates them)."""
    root = os.environ.get("NODE_LOCAL_ROOT")
    host = socket.gethostname()
    base = Path(root) / host / "local" if root else Path(os.environ["FOUNDRY_RUN_DIR"]) / "cache" / host
    return str(base / f"cache-{run_name}")


def main() -> None:
    env = os.environ
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    print(f"rank-env host={socket.gethostname()} RANK={rank} LOCAL_RANK={env.get('LOCAL_RANK')} "
          f"WORLD_SIZE={world} NODE_RANK={env.get('NODE_RANK')} LOCAL_WORLD_SIZE={env.get('LOCAL_WORLD_SIZE')} cwd={os.getcwd()} ",
          flush=True)
    run_name, run_dir = env["RUN_NAME"], Path(env["FOUNDRY_RUN_DIR"])
    run_dir.mkdir(parents=True, exist_ok=True)
    per_rank = int(env.get("GLOBAL_BATCH", 12)) // world
    dataset = StreamingDataset(remote=env["DATA_URL"], local=node_cache(run_name), shuffle=True, shuffle_seed=17,
                               batch_size=per_rank, num_canonical_nodes=1)
    recorder = Recorder(run_dir / f"samples-r{env.get('RESUMPTION_INDEX', '0')}-rank{rank}.jsonl")
    torch.manual_seed(0)
    trainer = Trainer(run_name=run_name, model=TinyLM(), loss_fn=recorder.loss,
                      train_dataloader=StreamingDataLoader(dataset, batch_size=per_rank, num_workers=0),
                      optimizers=lambda params: torch.optim.AdamW(params, lr=3e-3),
                      max_duration=f"{int(env.get('STEPS', 12))}ba", save_folder=env["SAVE_URL"],
                      save_interval=env.get("SAVE_INTERVAL", "1000ba"), autoresume=True, device="cpu", seed=17,
                      run_dir=str(run_dir), callbacks=[recorder], progress_bar=False, console_log_interval=1)
    trainer.fit()
    print(f"done at step {trainer.timestamp.batch}", flush=True)


if __name__ == "__main__":
    main()
