"""A small training script for the verify-resume tests, run unchanged by `foundry verify-resume`:
it takes its save folder, run name and autoresume from the variables the tool sets.

    python verify_resume_job.py [--noise global|torch-generator|python-random] [--decay-by-hand]

--noise adds a random perturbation in forward, drawn from the global torch RNG (which the checkpoint
holds: resume stays exact) or from a module-level generator (which it cannot hold: resume is not exact).
"""

from __future__ import annotations

import argparse
import random

import torch

from foundry.trainer import Trainer

NOISE_GEN = torch.Generator().manual_seed(1234)  # the deliberate bug: state no checkpoint holds
NOISE_RANDOM = random.Random(1234)


class Noisy(torch.nn.Module):
    def __init__(self, noise: str):
        super().__init__()
        self.lin = torch.nn.Linear(8, 1)
        self.noise = noise

    def forward(self, batch):
        x, y = batch
        out = self.lin(x)
        if self.noise == "torch-generator":
            out = out + 0.1 * torch.randn(out.shape, generator=NOISE_GEN)
        elif self.noise == "python-random":
            out = out + 0.1 * NOISE_RANDOM.random()
        elif self.noise == "global":
            out = out + 0.1 * torch.randn(out.shape)
        return torch.nn.functional.mse_loss(out, y)


class DecayByHand:
    """Another deliberate bug: a learning-rate decay kept in a callback's counter, which no checkpoint holds."""

    def __init__(self):
        self.count = 0

    def batch_end(self, trainer) -> None:
        self.count += 1
        for group in trainer.optimizers[0].param_groups:
            group["lr"] = 0.05 * 0.9 ** self.count


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--noise", default="global")
    p.add_argument("--decay-by-hand", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = [(torch.randn(4, 8), torch.randn(4, 1)) for _ in range(64)]
    trainer = Trainer(run_name="noisy", model=Noisy(a.noise), train_dataloader=data, max_duration="100ba",
                      optimizers=lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
                      device="cpu", progress_bar=False, callbacks=[DecayByHand()] if a.decay_by_hand else [])
    trainer.fit()


if __name__ == "__main__":
    main()
