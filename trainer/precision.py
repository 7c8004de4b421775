"""Precision: fp32, bf16 (autocast) or fp16 (autocast + gradient scaling on GPU)."""

from __future__ import annotations

import contextlib

import torch

from foundry.plugins.errors import ConfigError

PRECISIONS = ("fp32", "bf16", "fp16")


def check_precision(precision: str, device: torch.device) -> str:
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {precision!r}", hint="use fp32, bf16 or fp16")
    if precision == "fp16" and device.type != "cuda":
        raise ConfigError("fp16 needs a GPU", hint="use bf16 or fp32 on CPU")
    return precision


def autocast(precision: str, device: torch.device):
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def make_grad_scaler(precision: str, device: torch.device):
    """A GradScaler for fp16 on GPU, otherwise None (bf16 and fp32 need no loss scaling)."""
    if precision == "fp16":
        return torch.amp.GradScaler(device.type)
    return None
