"""Music Transformer: decoder-only transformer with relative attention (Huang et al., 2018),
after jason9693/MusicTransformer-pytorch / -tensorflow2.0.

Python feature kept: a Python object mutated during training. As in the
original's ``CustomSchedule``, a schedule object keeps a step counter that it
increments every step, derives the learning rate from it, and writes that rate
into the optimizer's ``param_groups``, so a Python attribute that changes every
step decides the numbers the parameter update computes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List

import torch
import torch.nn.functional as F
from torch import nn

from ._common import Program, check_size, cycle, demo_main, seed_everything

PAD, EVENT_VOCAB = 0, 388  # MIDI-like events: note-on/off (128 each), time shift (100), velocity (32)


@dataclass(frozen=True)
class MusicConfig:
    d_model: int
    layers: int
    heads: int
    seq_len: int
    batch_size: int
    warmup_steps: int
    dropout: float = 0.1
    vocab: int = EVENT_VOCAB + 3  # + pad, start, end


CONFIGS = {
    "small": MusicConfig(d_model=64, layers=2, heads=4, seq_len=48, batch_size=8, warmup_steps=10),
    "full": MusicConfig(d_model=256, layers=6, heads=8, seq_len=2048, batch_size=2, warmup_steps=4000),
}


def skew(qe: torch.Tensor) -> torch.Tensor:
    """Huang et al.'s skewing: (.., L, L) query-by-relative-distance -> query-by-key logits."""
    *lead, length, _ = qe.shape
    padded = F.pad(qe, (1, 0))
    return padded.reshape(*lead, length + 1, length)[..., 1:, :]


class RelativeAttention(nn.Module):
    """Causal self-attention plus a learned relative-position term ``Srel``."""

    def __init__(self, d_model: int, heads: int, max_len: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.max_len = heads, max_len
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.E = nn.Parameter(torch.randn(max_len, d_model // heads) * 0.02)  # distances -(L-1)..0
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        dh = d // self.heads
        q, k, v = (z.view(b, t, self.heads, dh).transpose(1, 2) for z in self.qkv(x).split(d, -1))
        srel = skew(q @ self.E[self.max_len - t:].t())
        att = (q @ k.transpose(-2, -1) + srel) / math.sqrt(dh) + mask
        att = self.drop(att.softmax(-1))
        return self.out((att @ v).transpose(1, 2).reshape(b, t, d))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: MusicConfig) -> None:
        super().__init__()
        self.attn = RelativeAttention(cfg.d_model, cfg.heads, cfg.seq_len, cfg.dropout)
        self.ff = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_model * 2), nn.ReLU(),
                                nn.Linear(cfg.d_model * 2, cfg.d_model))
        self.ln1, self.ln2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.drop(self.attn(x, mask)))
        return self.ln2(x + self.drop(self.ff(x)))


class MusicTransformer(nn.Module):
    def __init__(self, cfg: MusicConfig) -> None:
        super().__init__()
        self.d_model = cfg.d_model
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model, padding_idx=PAD)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.layers))
        self.fc = nn.Linear(cfg.d_model, cfg.vocab)
        self.drop = nn.Dropout(cfg.dropout)
        pos = torch.arange(cfg.seq_len)[:, None] * torch.exp(
            torch.arange(0, cfg.d_model, 2) * (-math.log(10000.0) / cfg.d_model))
        pe = torch.zeros(cfg.seq_len, cfg.d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos), torch.cos(pos)
        self.register_buffer("pe", pe, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        mask = torch.full((t, t), float("-inf"), device=x.device).triu(1)
        h = self.drop(self.embed(x) * math.sqrt(self.d_model) + self.pe[:t])
        for layer in self.layers:
            h = layer(h, mask)
        return self.fc(h)


class CustomSchedule:
    """Transformer LR schedule as a stateful Python object (mutated every step)."""

    def __init__(self, optimizer: torch.optim.Optimizer, d_model: int, warmup_steps: int) -> None:
        self.optimizer = optimizer
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self._step = 0
        self.rate = 0.0

    def step(self) -> float:
        self._step += 1
        self.rate = self.d_model**-0.5 * min(self._step**-0.5, self._step * self.warmup_steps**-1.5)
        for group in self.optimizer.param_groups:
            group["lr"] = self.rate
        return self.rate


def make_batches(cfg: MusicConfig, n: int, device: torch.device) -> List[torch.Tensor]:
    """Event sequences built from repeated random motifs (music is repetitive), length L + 1."""
    out = []
    for _ in range(n):
        rows = []
        for _ in range(cfg.batch_size):
            motif = torch.randint(3, cfg.vocab, (int(torch.randint(4, 12, (1,))),))
            reps = motif.repeat(cfg.seq_len // len(motif) + 2)[: cfg.seq_len + 1]
            rows.append(reps)
        out.append(torch.stack(rows).to(device))
    return out


class MusicTransformerProgram(Program):
    name = "music_transformer"

    def __init__(self, size: str, device: str, seed: int) -> None:
        super().__init__(size, device, seed)
        cfg = CONFIGS[size]
        seed_everything(seed)
        self.model = MusicTransformer(cfg).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)
        self.schedule = CustomSchedule(self.optimizer, cfg.d_model, cfg.warmup_steps)
        self.batches = make_batches(cfg, 4, self.device)
        self.lr_history: List[float] = []

    def step(self, i: int) -> torch.Tensor:
        seq = cycle(self.batches, i)
        logits = self.model(seq[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), seq[:, 1:].reshape(-1),
                               ignore_index=PAD)
        self.optimizer.zero_grad()
        loss.backward()
        self.lr_history.append(self.schedule.step())  # mutates the schedule and param_groups
        self.optimizer.step()
        return loss.detach()


def build(size: str = "small", device: str = "cpu", seed: int = 0) -> MusicTransformerProgram:
    return MusicTransformerProgram(check_size(size), device, seed)


if __name__ == "__main__":
    demo_main(build)
