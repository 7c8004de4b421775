"""A small GPT-style decoder (nanoGPT's shape): token + position embeddings, pre-norm causal
self-attention blocks, tied output head. Byte-level vocabulary (256), no tokenizer download.

Meets the Trainer's model contract: `forward(batch)` and `loss(outputs, batch)`, where a batch is
{"tokens": LongTensor[B, T+1]} (inputs are tokens[:, :-1], targets tokens[:, 1:]).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class GPTConfig:
    vocab_size: int = 256
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 192
    dropout: float = 0.0


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(), nn.Linear(4 * cfg.n_embd, cfg.n_embd))
        self.drop = nn.Dropout(cfg.dropout)
        self.n_head, self.dropout = cfg.n_head, cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(b, t, c)))
        return x + self.drop(self.mlp(self.ln2(x)))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig | None = None):
        super().__init__()
        self.cfg = cfg = cfg or GPTConfig()
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.head.weight = self.wte.weight  # weight tying
        self.apply(self._init)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, batch: dict) -> torch.Tensor:
        idx = batch["tokens"][:, :-1].long()
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))

    def num_tokens(self, batch: dict) -> int:
        """Tokens the model consumes per batch: B*T inputs (a sample holds T+1, the last one only a target)."""
        tokens = batch["tokens"]
        return tokens.shape[0] * (tokens.shape[1] - 1)

    def flops_per_token(self) -> float:
        """Training FLOPs per token (forward + backward), nanoGPT/PaLM's estimate: 6N + 12*L*d*T."""
        n = self.num_params() - self.wpe.weight.numel()
        return 6 * n + 12 * self.cfg.n_layer * self.cfg.n_embd * self.cfg.block_size

    def loss(self, logits: torch.Tensor, batch: dict) -> torch.Tensor:
        targets = batch["tokens"][:, 1:].long()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    @torch.no_grad()
    def generate(self, prompt: bytes, n: int = 80, temperature: float = 0.8) -> bytes:
        self.eval()
        idx = torch.tensor(list(prompt), dtype=torch.long)[None]
        for _ in range(n):
            logits = self({"tokens": torch.cat([idx[:, -self.cfg.block_size:], idx[:, -1:]], 1)})[:, -1]
            nxt = torch.multinomial(F.softmax(logits / temperature, -1), 1)
            idx = torch.cat([idx, nxt], 1)
        self.train()
        return bytes(idx[0].tolist())


def build_gpt(**config) -> GPT:
    """A factory for run specs' `parameters` (`model: foundry.examples.gpt.model:build_gpt`)."""
    torch.manual_seed(17)
    return GPT(GPTConfig(**config))
