"""The model and data the trainer benchmarks share: an MLP whose size is set by width and depth."""

from __future__ import annotations

import torch


def mlp(width: int, depth: int) -> torch.nn.Module:
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))


def data(width: int, n: int, batch: int = 64) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(batch, width, generator=g), torch.randn(batch, 1, generator=g)) for _ in range(n)]
