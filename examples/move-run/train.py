"""The tiny GPT job of the move-run proof: data streamed from object storage, checkpoints to object
storage, exact resume on any world size with the same global batch.

Run by a provider under torchrun (one process per device). Configuration from the environment that
the run spec sets: DATA_URL, SAVE_URL (with {run_name}), STEPS, GLOBAL_BATCH, STEP_DELAY. Besides the trainer's
metrics.jsonl it writes, in FOUNDRY_RUN_DIR:
  samples-r{RESUMPTION}-rank{R}.jsonl   per step: the sample ids this rank trained on, and the loss
  timeline-r{RESUMPTION}-rank{R}.json   wall-clock marks from process start to the first step
"""

import time

T0 = time.time()  # before the heavy imports: "process start" ends here

import json  # noqa: E402
import os  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from foundry.streaming import StreamingDataLoader, StreamingDataset  # noqa: E402
from foundry.trainer import Trainer  # noqa: E402
from foundry.trainer.checkpoint.session import CheckpointSession  # noqa: E402

VOCAB, SEQ = 64, 16


class TinyGPT(torch.nn.Module):
    def __init__(self, vocab: int = VOCAB, seq: int = SEQ, width: int = 32, layers: int = 2, heads: int = 2):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, width)
        self.pos = torch.nn.Parameter(torch.zeros(seq, width))
        layer = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(width, vocab)
        self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, batch):
        x = batch["tokens"][:, :-1].long()
        h = self.tok(x) + self.pos[: x.shape[1]]
        return self.head(self.blocks(h, mask=self.mask[: x.shape[1], : x.shape[1]], is_causal=True))


class Recorder:
    """Loss function that remembers which samples it saw; a callback that writes them per step."""

    def __init__(self, path: Path, timeline: dict, timeline_path: Path):
        self.path, self.timeline, self.timeline_path = path, timeline, timeline_path
        self.ids: list[int] = []

    def loss(self, logits, batch):
        self.ids += [int(i) for i in batch["id"]]
        if "first_batch" not in self.timeline:
            self.timeline["first_batch"] = time.time()
        y = batch["tokens"][:, 1:].long()
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    def batch_end(self, trainer) -> None:
        row = {"step": trainer.timestamp.batch, "ids": self.ids, "loss": trainer.last_loss}
        with open(self.path, "a") as fh:
            fh.write(json.dumps(row) + "\n")
        self.ids = []
        time.sleep(float(os.environ.get("STEP_DELAY", "0")))  # pace the run so a pause lands mid-way
        if "first_step" not in self.timeline:
            self.timeline["first_step"] = time.time()
            self.timeline_path.write_text(json.dumps(self.timeline))


def main() -> None:
    env = os.environ
    rank, world = int(env.get("RANK", 0)), int(env.get("WORLD_SIZE", 1))
    resumption = env.get("RESUMPTION_INDEX", "0")
    run_name, run_dir = env["RUN_NAME"], Path(env["FOUNDRY_RUN_DIR"])
    run_dir.mkdir(parents=True, exist_ok=True)
    global_batch = int(env.get("GLOBAL_BATCH", 8))
    if global_batch % world:
        raise SystemExit(f"GLOBAL_BATCH {global_batch} is not divisible by WORLD_SIZE {world}")
    timeline = {"process_start": T0, "imports_done": time.time(), "world_size": world}
    timeline_path = run_dir / f"timeline-r{resumption}-rank{rank}.json"

    restore = CheckpointSession.resume

    def timed_resume(self, trainer):  # checkpoint download + restore, timed
        timeline["checkpoint_start"] = time.time()
        try:
            return restore(self, trainer)
        finally:
            timeline["checkpoint_done"] = time.time()
            timeline["resumed_from"] = self.resumed_from

    CheckpointSession.resume = timed_resume
    dataset = StreamingDataset(remote=env["DATA_URL"], local=str(run_dir / "cache" / f"r{resumption}-rank{rank}"),
                               shuffle=True, shuffle_seed=17, batch_size=global_batch // world,
                               num_canonical_nodes=1)
    loader = StreamingDataLoader(dataset, batch_size=global_batch // world, num_workers=0)
    recorder = Recorder(run_dir / f"samples-r{resumption}-rank{rank}.jsonl", timeline, timeline_path)
    torch.manual_seed(0)
    trainer = Trainer(run_name=run_name, model=TinyGPT(), train_dataloader=loader, loss_fn=recorder.loss,
                      optimizers=lambda params: torch.optim.AdamW(params, lr=3e-3),
                      max_duration=f"{int(env.get('STEPS', 40))}ba", save_folder=env["SAVE_URL"],
                      save_interval="1000ba", autoresume=True, device="cpu", seed=17,
                      run_dir=str(run_dir), callbacks=[recorder], progress_bar=False, console_log_interval=5)
    trainer.resume()  # restore now (fit() would), so the timeline keeps checkpoint load before "trainer ready"
    timeline["trainer_ready"] = time.time()
    if trainer.checkpoints.resumed_from:
        print(f"resumed from checkpoint {trainer.checkpoints.resumed_from}", flush=True)
    trainer.fit()
    print(f"done at step {trainer.timestamp.batch}", flush=True)


if __name__ == "__main__":
    main()
