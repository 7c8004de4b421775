"""Precision: fp32, bf16 (autocast) or fp16 (autocast + gradient scaling on GPU), and "auto".

"auto" (the default) is bf16 autocast on a GPU that supports it, fp32 with TF32 matmuls on an
older GPU, and fp32 on CPU: on an H100 fp32 without TF32 is ~7x slower than bf16. An explicit
"fp32" keeps torch's strict fp32 matmuls. The device probes are isolated here (`_cuda_bf16`,
`_enable_tf32`) so the rule itself is tested on CPU.
"""

from __future__ import annotations

import contextlib

import torch

from foundry.plugins.errors import ConfigError

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
# Composer's names for the same autocast modes, so a Composer config's `precision` carries over as is.
COMPOSER_PRECISIONS = {"amp_bf16": "bf16", "amp_fp16": "fp16"}


def _cuda_bf16(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_bf16_supported()


def _enable_tf32() -> None:
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True


def resolve_precision(requested: str, device: torch.device, bf16_ok: bool | None = None) -> tuple[str, bool]:
    """(precision, tf32): what "auto" means on `device`; tf32 says whether fp32 matmuls use TF32."""
    requested = COMPOSER_PRECISIONS.get(requested, requested)
    if requested == "amp_fp8":
        raise ConfigError("precision amp_fp8 (Composer with Transformer Engine) is not supported",
                          hint="use amp_bf16 (bf16), the fastest precision Foundry runs")
    if requested not in PRECISIONS:
        raise ConfigError(f"unknown precision {requested!r}", hint="use auto, fp32, bf16 or fp16 (or Composer's amp_bf16, amp_fp16)")
    if requested == "fp16" and device.type != "cuda":
        raise ConfigError("fp16 needs a GPU", hint="use bf16 or fp32 on CPU")
    if requested != "auto":
        return requested, False
    if device.type != "cuda":
        return "fp32", False
    return ("bf16" if (_cuda_bf16(device) if bf16_ok is None else bf16_ok) else "fp32"), True


def check_precision(precision: str, device: torch.device) -> str:
    """Validate, resolve "auto", switch TF32 on where "auto" chose it; returns the precision to use."""
    resolved, tf32 = resolve_precision(precision, device)
    if tf32:
        _enable_tf32()
    return resolved


def describe_precision(requested: str, resolved: str, device: torch.device) -> str:
    """For the start log line: 'bf16 autocast (auto)', 'fp32, TF32 matmuls (auto)', 'fp32'."""
    text = {"bf16": "bf16 autocast", "fp16": "fp16 autocast + loss scaling", "fp32": "fp32"}[resolved]
    if resolved == "fp32" and device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32:
        text += ", TF32 matmuls"
    return text + (" (auto)" if requested == "auto" else "")


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
