"""Learning-rate schedules whose warmup accepts time units; built once the Trainer knows the run
length. Plain torch LR schedulers work too (stepped once per batch)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .time import Time, TimeUnit


@dataclass
class WarmupCosine:
    """Linear warmup from 0 to the base LR over `warmup`, then cosine decay to alpha_f * base LR."""

    warmup: str | Time = "0ba"
    alpha_f: float = 0.0

    def build(self, optimizer, max_duration: Time, batches_per_epoch: int | None):
        total = max_duration.to_batches(batches_per_epoch=batches_per_epoch)
        warm = Time.parse(self.warmup, TimeUnit.BATCH).to_batches(max_duration, batches_per_epoch)
        alpha = self.alpha_f

        def factor(step: int) -> float:
            if step < warm:
                return (step + 1) / warm
            progress = min(1.0, (step - warm) / max(1, total - warm))
            return alpha + (1 - alpha) * 0.5 * (1 + math.cos(math.pi * progress))

        return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


@dataclass
class WarmupConstant:
    warmup: str | Time = "0ba"

    def build(self, optimizer, max_duration: Time, batches_per_epoch: int | None):
        warm = Time.parse(self.warmup, TimeUnit.BATCH).to_batches(max_duration, batches_per_epoch)
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)
