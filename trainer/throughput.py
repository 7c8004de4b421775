"""Throughput facts for the metrics: tokens the model consumes, its FLOPs per token, the device's
peak, and MFU (model FLOPs utilisation) = achieved model FLOP/s / (peak FLOP/s x devices).

A model states its own numbers when it can (`num_tokens(batch)`, `flops_per_token()`): a language
model sample of T+1 tokens feeds T inputs. Peaks are dense (no sparsity) datasheet figures; a
device missing from the table gets no MFU rather than a wrong one.
"""

from __future__ import annotations

from typing import Any

TOKEN_KEYS = ("input_ids", "tokens")

# Dense peak FLOP/s by (device name substring, math): "tensor" = bf16/fp16, "tf32", "fp32".
# The first matching name wins, so the more specific names come first.
PEAK_FLOPS: list[tuple[str, dict[str, float]]] = [
    ("H100 PCIe", {"tensor": 756e12, "tf32": 378e12, "fp32": 51.2e12}),
    ("H100 NVL", {"tensor": 835e12, "tf32": 418e12, "fp32": 60e12}),
    ("H100", {"tensor": 989e12, "tf32": 494.7e12, "fp32": 66.9e12}),  # SXM
    ("H200", {"tensor": 989e12, "tf32": 494.7e12, "fp32": 66.9e12}),
    ("GH200", {"tensor": 989e12, "tf32": 494.7e12, "fp32": 66.9e12}),
    ("A100", {"tensor": 312e12, "tf32": 156e12, "fp32": 19.5e12}),
    ("L40S", {"tensor": 362e12, "tf32": 183e12, "fp32": 91.6e12}),
    ("L4", {"tensor": 121e12, "tf32": 60e12, "fp32": 30.3e12}),
]


def peak_flops(device_name: str | None, precision: str, tf32: bool) -> float | None:
    """Dense peak FLOP/s of one device for this precision, or None when the device is not known."""
    if not device_name:
        return None
    math = "tensor" if precision in ("bf16", "fp16") else ("tf32" if tf32 else "fp32")
    for name, peaks in PEAK_FLOPS:
        if name.lower() in device_name.lower():
            return peaks[math]
    return None


def device_peak_flops(device, precision: str) -> float | None:
    if device.type != "cuda":
        return None
    import torch

    return peak_flops(torch.cuda.get_device_name(device), precision, torch.backends.cuda.matmul.allow_tf32)


def flops_per_token(model) -> float | None:
    fn = getattr(model, "flops_per_token", None)
    return float(fn()) if callable(fn) else None


def count_tokens(model, batch: Any) -> int:
    """Tokens the model consumes in `batch`: the model's num_tokens(batch), else the size of the
    batch's input_ids / tokens tensor, else 0."""
    fn = getattr(model, "num_tokens", None)
    if callable(fn):
        return int(fn(batch))
    if isinstance(batch, dict):
        for key in TOKEN_KEYS:
            value = batch.get(key)
            if hasattr(value, "numel"):
                return value.numel()
    return 0


def mfu(tokens_per_sec: float, per_token: float | None, peak: float | None, devices: int) -> float | None:
    if not per_token or not peak:
        return None
    return tokens_per_sec * per_token / (peak * devices)
