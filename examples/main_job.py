"""The main job on the embedded default: prepare a real text corpus (the Python standard library's
sources, byte-level tokens) as MDS shards in file:// storage under FOUNDRY_HOME, stream it into the
tiny GPT, train (on the GPU when there is one, else on CPU) for a couple of minutes with checkpoints
going to file:// storage, and show the loss going down.

    python examples/main_job.py [--minutes 2] [--max-duration 2000ba] [--resume]

FOUNDRY_HOME defaults to the platform's user data directory (platformdirs). Outputs:
  FOUNDRY_HOME/storage/datasets/pystdlib-bytes/{train,val}   the dataset (written once)
  FOUNDRY_HOME/storage/checkpoints/tiny-gpt/                 checkpoints (`foundry checkpoint ls ...`)
  FOUNDRY_HOME/runs/tiny-gpt/metrics.jsonl                   step, loss, lr, throughput, ...
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.gpt.prep import prepare  # noqa: E402
from examples.gpt.train import build_trainer  # noqa: E402
from foundry.plugins.manager import open_store  # noqa: E402
from foundry.trainer.config import foundry_home  # noqa: E402


class TimeBudget:
    """Stops training (with its final checkpoint) once `seconds` of training have passed."""

    def __init__(self, seconds: float):
        self.seconds, self.start = seconds, None

    def fit_start(self, trainer) -> None:
        self.start = time.monotonic()

    def batch_end(self, trainer) -> None:
        if time.monotonic() - self.start >= self.seconds:
            trainer.stop()


def main() -> int:
    p = argparse.ArgumentParser(description="Train the tiny GPT on the embedded default.")
    p.add_argument("--minutes", type=float, default=2.0, help="wall-clock training budget")
    p.add_argument("--max-duration", default="2000ba", help="training length (the LR schedule's length)")
    p.add_argument("--resume", action="store_true", help="continue the previous demo run instead of restarting")
    a = p.parse_args()
    home = foundry_home()
    storage = home / "storage"
    data_url = f"file://{storage / 'datasets' / 'pystdlib-bytes'}"
    save_folder = f"file://{storage / 'checkpoints'}/{{run_name}}"
    if not open_store(data_url).exists("train/index.json"):
        t0 = time.time()
        counts = prepare(data_url, max_mb=2.0)
        print(f"prepared {counts['train']} training sequences from the Python stdlib sources "
              f"into {data_url} ({time.time() - t0:.1f}s)", flush=True)
    else:
        print(f"dataset ready at {data_url}", flush=True)
    run_dir = home / "runs" / "tiny-gpt"
    if not a.resume and (run_dir / "metrics.jsonl").exists():
        (run_dir / "metrics.jsonl").unlink()
    trainer = build_trainer(data_url, save_folder, run_name="tiny-gpt", max_duration=a.max_duration,
                            save_interval="200ba", eval_interval="200ba", autoresume=a.resume,
                            save_overwrite=not a.resume, run_dir=str(run_dir), device="auto",
                            console_log_interval=25, callbacks=[TimeBudget(a.minutes * 60)])
    print(f"training a {trainer.resolved_config['model']['parameters'] / 1e6:.1f}M-parameter GPT on {trainer.device} "
          f"for {a.minutes:g} min (at most {a.max_duration}); checkpoints -> {trainer.cfg.save_url}", flush=True)
    t0 = time.time()
    trainer.fit()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in rows if "loss" in r]
    evals = [r["eval/loss"] for r in rows if "eval/loss" in r]
    head, tail = sum(losses[:10]) / len(losses[:10]), sum(losses[-10:]) / len(losses[-10:])
    print(f"\ntrained {trainer.timestamp.batch} steps in {time.time() - t0:.0f}s: "
          f"loss {head:.3f} (first 10 steps) -> {tail:.3f} (last 10 steps)"
          + (f"; eval loss {evals[0]:.3f} -> {evals[-1]:.3f}" if len(evals) > 1 else ""))
    print(f"checkpoints: foundry checkpoint ls {trainer.cfg.save_url}")
    print(f"metrics:     {run_dir / 'metrics.jsonl'}")
    return 0 if tail < head else 1


if __name__ == "__main__":
    sys.exit(main())
