"""Splitting a device batch into microbatches, gradient accumulation, and 'auto' sizing.

With device_train_microbatch_size='auto', an out-of-memory error halves the microbatch size and
retries the same batch (gradients are zeroed first). All ranks agree on the retry through one
all-reduce of an OOM flag; in that mode DDP's own gradient sync is off and gradients are
averaged by hand after every rank finished its microbatches (a rank that failed half-way would
otherwise leave the others waiting in DDP's all-reduce).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Callable

import torch

from foundry.plugins.errors import ConfigError


def batch_size(batch: Any) -> int:
    if isinstance(batch, torch.Tensor):
        return batch.shape[0]
    if isinstance(batch, Mapping):
        for value in batch.values():
            return batch_size(value)
    if isinstance(batch, (list, tuple)) and batch:
        return batch_size(batch[0])
    raise ConfigError(f"cannot tell the batch size of a {type(batch).__name__}",
                      hint="batches are tensors, or dicts/lists/tuples of tensors")


def split_batch(batch: Any, size: int) -> list[Any]:
    n = batch_size(batch)
    return [_slice(batch, start, min(start + size, n)) for start in range(0, n, size)]


def _slice(batch: Any, start: int, end: int) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch[start:end]
    if isinstance(batch, Mapping):
        return {k: _slice(v, start, end) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_slice(v, start, end) for v in batch)
    return batch


def to_device(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, Mapping):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower())


def check_microbatch_size(value: Any) -> Any:
    if value is None or value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value
    raise ConfigError(f"invalid device_train_microbatch_size {value!r}", hint="use None, a positive int or 'auto'")


class MicrobatchRunner:
    """Runs forward+backward over the microbatches of one device batch; returns the mean loss."""

    def __init__(self, setting: Any, compute_loss: Callable[[Any], torch.Tensor], model, scaler=None,
                 all_reduce_sum: Callable[[list[float]], list[float]] | None = None, world_size: int = 1):
        self.setting = check_microbatch_size(setting)
        self.size: int | None = None if setting in (None, "auto") else setting
        self.compute_loss = compute_loss
        self.model = model
        self.scaler = scaler
        self.all_reduce_sum = all_reduce_sum or (lambda v: v)
        self.world_size = world_size

    @property
    def auto(self) -> bool:
        return self.setting == "auto"

    def run(self, batch: Any, zero_grad: Callable[[], None]) -> torch.Tensor:
        n = batch_size(batch)
        if self.size is None:
            self.size = n
        while True:
            try:
                loss = self._accumulate(batch, n)
                oom = 0.0
            except Exception as exc:
                if not (self.auto and is_oom(exc)):
                    raise
                oom, loss = 1.0, None
            if self.auto and self.world_size > 1:
                oom = self.all_reduce_sum([oom])[0]
            if not oom:
                if self.auto and self.world_size > 1:
                    self._average_gradients()
                return loss
            zero_grad()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            if self.size <= 1:
                raise ConfigError("out of memory with a microbatch of 1 sample",
                                  hint="use a smaller model, shorter sequences or more devices")
            self.size = max(1, self.size // 2)

    def _accumulate(self, batch: Any, n: int) -> torch.Tensor:
        parts = split_batch(batch, self.size) if self.size < n else [batch]
        if len(parts) == 1:
            with self._sync_context(True):
                loss = self.compute_loss(batch)
                (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            return loss.detach().float()
        total = None
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            with self._sync_context(last):
                scaled = self.compute_loss(part) * (batch_size(part) / n)
                (self.scaler.scale(scaled) if self.scaler is not None else scaled).backward()
            value = scaled.detach().float()
            total = value if total is None else total + value
        return total

    def _sync_context(self, last: bool):
        no_sync = getattr(self.model, "no_sync", None)
        if no_sync is None:
            return contextlib.nullcontext()
        if self.auto and self.world_size > 1:
            return no_sync()  # gradients are averaged by hand once every rank succeeded
        return contextlib.nullcontext() if last else no_sync()

    def _average_gradients(self) -> None:
        import torch.distributed as dist

        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= self.world_size
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
