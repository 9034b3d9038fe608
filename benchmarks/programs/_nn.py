"""Hand-written building blocks shared by several programs (no torchvision).

Only genuinely shared layers live here: the ResNet bottleneck (ResNet-50,
DropBlock, SDPoint) and the BERT/GPT transformer pieces. Program-specific
behaviour stays in each program's module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn


# --------------------------------------------------------------------------- CNN


def conv_bn(cin: int, cout: int, k: int, stride: int = 1, act: bool = True) -> nn.Sequential:
    """conv (no bias, BN follows) + BN (+ ReLU): the ResNet unit."""
    layers: List[nn.Module] = [
        nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if act:
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


class Bottleneck(nn.Module):
    """ResNet-50 bottleneck (1x1 -> 3x3 -> 1x1, expansion 4), stride on the 3x3."""

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int = 1) -> None:
        super().__init__()
        cout = width * self.expansion
        self.body = nn.Sequential(
            conv_bn(cin, width, 1),
            conv_bn(width, width, 3, stride),
            conv_bn(width, cout, 1, act=False),
        )
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = conv_bn(cin, cout, 1, stride, act=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.shortcut(x))


@dataclass(frozen=True)
class ResNetConfig:
    """Shape of a ResNet: ``small`` is narrow/shallow, ``full`` is ResNet-50."""

    base_width: int
    blocks: Tuple[int, ...]
    image_size: int
    batch_size: int
    num_classes: int
    imagenet_stem: bool  # 7x7/2 conv + maxpool; off for tiny CPU images
    lr: float  # SGD; full follows the linear rule 0.1 * batch / 256


RESNET_SMALL = ResNetConfig(base_width=8, blocks=(1, 1, 1, 1), image_size=32, batch_size=8,
                            num_classes=10, imagenet_stem=False, lr=0.05)
RESNET_FULL = ResNetConfig(base_width=64, blocks=(3, 4, 6, 3), image_size=224, batch_size=64,
                           num_classes=1000, imagenet_stem=True, lr=0.025)


def resnet_stem(cfg: ResNetConfig) -> nn.Sequential:
    if cfg.imagenet_stem:
        return nn.Sequential(conv_bn(3, cfg.base_width, 7, 2), nn.MaxPool2d(3, 2, 1))
    return conv_bn(3, cfg.base_width, 3)


def resnet_stages(cfg: ResNetConfig) -> Tuple[List[nn.Sequential], int]:
    """The four bottleneck stages; returns them and the final channel count."""
    stages: List[nn.Sequential] = []
    cin = cfg.base_width
    for s, n in enumerate(cfg.blocks):
        width = cfg.base_width * 2**s
        blocks = []
        for b in range(n):
            blocks.append(Bottleneck(cin, width, stride=2 if (b == 0 and s > 0) else 1))
            cin = width * Bottleneck.expansion
        stages.append(nn.Sequential(*blocks))
    return stages, cin


def synthetic_images(n_batches: int, cfg: ResNetConfig, device: torch.device
                     ) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    """Class-dependent images (a per-class mean pattern + noise) so the loss can fall."""
    patterns = torch.randn(cfg.num_classes, 3, cfg.image_size, cfg.image_size)
    batches = []
    for _ in range(n_batches):
        y = torch.randint(0, cfg.num_classes, (cfg.batch_size,))
        x = patterns[y] + 0.5 * torch.randn(cfg.batch_size, 3, cfg.image_size, cfg.image_size)
        batches.append((x.to(device), y.to(device)))
    return batches


# ------------------------------------------------------------------- transformers


class SelfAttention(nn.Module):
    """Multi-head self-attention with an additive mask (written out, no SDPA, so it
    runs on torch 1.13 and traces into plain matmul/softmax ops)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float) -> None:
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, additive_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2) for z in (q, k, v))
        att = q @ k.transpose(-2, -1) / math.sqrt(d // self.n_heads)
        if additive_mask is not None:
            att = att + additive_mask
        att = self.drop(att.softmax(dim=-1))
        out = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.drop(self.proj(out))


class TransformerLayer(nn.Module):
    """BERT (post-LN) or GPT-2 (pre-LN) layer, chosen by ``pre_ln``."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, pre_ln: bool) -> None:
        super().__init__()
        self.pre_ln = pre_ln
        self.attn = SelfAttention(d_model, n_heads, dropout)
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model),
                                nn.Dropout(dropout))

    def forward(self, x: torch.Tensor, additive_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        if self.pre_ln:
            x = x + self.attn(self.ln1(x), additive_mask)
            return x + self.ff(self.ln2(x))
        x = self.ln1(x + self.attn(x, additive_mask))
        return self.ln2(x + self.ff(x))


@dataclass(frozen=True)
class BertConfig:
    vocab: int
    d_model: int
    layers: int
    heads: int
    d_ff: int
    max_len: int
    seq_len: int
    batch_size: int
    dropout: float = 0.1


class BertEncoder(nn.Module):
    """Token + position + segment embeddings followed by post-LN layers."""

    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
        self.seg = nn.Embedding(2, cfg.d_model)
        self.ln = nn.LayerNorm(cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(
            TransformerLayer(cfg.d_model, cfg.heads, cfg.d_ff, cfg.dropout, pre_ln=False)
            for _ in range(cfg.layers))

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor,
                additive_mask: Optional[torch.Tensor]) -> torch.Tensor:
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        h = self.drop(self.ln(self.tok(input_ids) + self.pos(pos) + self.seg(token_type_ids)))
        for layer in self.layers:
            h = layer(h, additive_mask)
        return h


def padding_mask(lengths: Sequence[int], seq_len: int) -> torch.Tensor:
    """1/0 attention mask (HuggingFace convention) for right-padded sequences."""
    mask = torch.zeros(len(lengths), seq_len, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    return mask
