"""GPT-2 causal language model (pre-LN transformer, tied embeddings).

Python feature kept: dynamic shapes. Batches come in different sequence lengths
(as with length-bucketed text), so each step may run the same code on a new
shape; the causal mask is sliced from a max-length buffer to the current length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ._common import Program, check_size, cycle, demo_main, seed_everything
from ._nn import TransformerLayer


@dataclass(frozen=True)
class GPT2Config:
    vocab: int
    d_model: int
    layers: int
    heads: int
    max_len: int
    seq_lens: Tuple[int, ...]  # lengths cycled through by the batch pool
    batch_size: int
    dropout: float = 0.1


CONFIGS = {
    "small": GPT2Config(vocab=512, d_model=64, layers=2, heads=4, max_len=128,
                        seq_lens=(24, 32, 48, 40), batch_size=8),
    "full": GPT2Config(vocab=50257, d_model=768, layers=12, heads=12, max_len=1024,
                       seq_lens=(512, 768, 1024, 640), batch_size=8),
}


class GPT2(nn.Module):
    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab, cfg.d_model)
        self.wpe = nn.Embedding(cfg.max_len, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(
            TransformerLayer(cfg.d_model, cfg.heads, 4 * cfg.d_model, cfg.dropout, pre_ln=True)
            for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        causal = torch.full((cfg.max_len, cfg.max_len), float("-inf")).triu(1)
        self.register_buffer("causal_mask", causal, persistent=False)
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe.weight, std=0.01)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]  # varies per batch
        pos = torch.arange(t, device=idx.device)
        h = self.drop(self.wte(idx) + self.wpe(pos))
        mask = self.causal_mask[:t, :t]
        for block in self.blocks:
            h = block(h, mask)
        return self.ln_f(h) @ self.wte.weight.t()  # weight tying as in GPT-2


def make_batches(cfg: GPT2Config, device: torch.device) -> List[torch.Tensor]:
    """Token streams with a learnable rule (next token = previous + stride mod vocab) plus noise."""
    batches = []
    for t in cfg.seq_lens:
        start = torch.randint(0, cfg.vocab, (cfg.batch_size, 1))
        stride = torch.randint(1, 8, (cfg.batch_size, 1))
        seq = (start + stride * torch.arange(t + 1)) % cfg.vocab
        noise = torch.rand(cfg.batch_size, t + 1) < 0.1
        seq[noise] = torch.randint(0, cfg.vocab, (int(noise.sum()),))
        batches.append(seq.to(device))
    return batches


class GPT2Program(Program):
    name = "gpt2"

    def __init__(self, size: str, device: str, seed: int) -> None:
        super().__init__(size, device, seed)
        cfg = CONFIGS[size]
        seed_everything(seed)
        self.model = GPT2(cfg).to(self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3 if size == "small" else 2.5e-4,
                                           weight_decay=0.01)
        self.batches = make_batches(cfg, self.device)
        self.seq_lens_seen: List[int] = []

    def step(self, i: int) -> torch.Tensor:
        seq = cycle(self.batches, i)
        inputs, labels = seq[:, :-1], seq[:, 1:]
        self.seq_lens_seen.append(inputs.shape[1])
        logits = self.model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.detach()


def build(size: str = "small", device: str = "cpu", seed: int = 0) -> GPT2Program:
    return GPT2Program(check_size(size), device, seed)


if __name__ == "__main__":
    demo_main(build)
