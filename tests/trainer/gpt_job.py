"""The GPT example (tied embedding/head) as a multi-phase job for the FSDP tests: each phase a fresh
model and Trainer in the same process (one torchrun launch serves several phases).

    python gpt_job.py DATA OUT PHASES_JSON      # or under torchrun
PHASES_JSON: [{"name", "parallelism", "layout", "save_folder", "save_interval", "load_path", "pause_at"}]
Rank 0 writes OUT/NAME.json: {"losses": {step: loss}, "tied": bool, "resumed_from": str|None,
"world_size": int}. A phase with pause_at sends SIGTERM to rank 0 after that batch: the process
exits 75 (paused) there, so it must be the last phase.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
STEPS = 6
GLOBAL_BATCH = 12  # divisible by 1, 2 and 3 ranks


class Record:
    def __init__(self, pause_at):
        self.losses, self.pause_at = {}, pause_at

    def batch_end(self, trainer) -> None:
        self.losses[trainer.timestamp.batch] = trainer.last_loss
        if trainer.timestamp.batch == self.pause_at and trainer.env.rank == 0:
            os.kill(os.getpid(), signal.SIGTERM)  # a provider's pause, mid-run


def tied(model) -> bool:
    return model.head.weight is model.wte.weight


def run_phase(data: str, out: Path, phase: dict) -> None:
    sys.path.insert(0, str(ROOT))
    from examples.gpt.model import GPTConfig
    from examples.gpt.train import build_trainer

    record = Record(phase.get("pause_at"))
    out_file = out / f"{phase['name']}.json"
    trainer = build_trainer(
        data, phase.get("save_folder"), run_name="gpt-fsdp", max_duration=f"{STEPS}ba", global_batch=GLOBAL_BATCH,
        save_interval=phase.get("save_interval", "1000ba"), eval_interval="1000ba", save_overwrite=True,
        run_dir=str(out / f"run-{phase['name']}"), cache_dir=str(out / f"cache-{phase['name']}"),
        model_cfg=GPTConfig(block_size=16, n_layer=2, n_head=2, n_embd=32), device="cpu", progress_bar=False,
        parallelism=phase["parallelism"], checkpoint_layout=phase.get("layout", "full"),
        load_path=phase.get("load_path"), callbacks=[record])

    def report() -> None:
        if trainer.env.is_main:
            out_file.write_text(json.dumps({"losses": record.losses, "tied": tied(trainer.raw_model),
                                            "tied_at_start": tied_at_start, "parallelism": trainer.parallelism,
                                            "resumed_from": trainer.checkpoints.resumed_from,
                                            "world_size": trainer.env.world_size}))

    tied_at_start = tied(trainer.raw_model)  # after sharding and after loading a checkpoint
    try:
        trainer.fit()
    finally:
        report()


def main() -> None:
    torch.set_num_threads(1)
    data, out, phases = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    for phase in phases:
        run_phase(data, out, phase)


if __name__ == "__main__":
    main()
