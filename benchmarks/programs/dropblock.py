"""ResNet with DropBlock regularization (after miguelvr/dropblock and DHZS/tf-dropblock).

Python feature kept: object mutation. The drop probability is a plain Python
attribute on the ``DropBlock2D`` modules; a ``LinearScheduler`` object ramps it
each step (mutating the modules), and ``forward`` branches on it (``0`` means
identity). The value feeding the computation therefore changes between steps
without any change in the code path taken to reach it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ._common import Program, check_size, cycle, demo_main, seed_everything
from ._nn import RESNET_FULL, RESNET_SMALL, ResNetConfig, resnet_stages, resnet_stem, synthetic_images


@dataclass(frozen=True)
class DropBlockConfig:
    resnet: ResNetConfig
    block_size: int
    final_drop_prob: float
    ramp_steps: int  # steps over which the probability rises from 0


CONFIGS = {
    "small": DropBlockConfig(RESNET_SMALL, block_size=3, final_drop_prob=0.2, ramp_steps=20),
    "full": DropBlockConfig(RESNET_FULL, block_size=7, final_drop_prob=0.1, ramp_steps=5000),
}


class DropBlock2D(nn.Module):
    """Drops contiguous ``block_size`` x ``block_size`` regions (Ghiasi et al., 2018)."""

    def __init__(self, drop_prob: float, block_size: int) -> None:
        super().__init__()
        self.drop_prob = drop_prob  # mutated from outside during training
        self.block_size = block_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.drop_prob == 0.0:
            return x
        gamma = self.drop_prob / self.block_size**2
        seeds = (torch.rand(x.shape[0], *x.shape[2:], device=x.device) < gamma).to(x.dtype)
        block = F.max_pool2d(seeds[:, None], self.block_size, stride=1, padding=self.block_size // 2)
        if self.block_size % 2 == 0:
            block = block[:, :, :-1, :-1]
        keep = 1.0 - block
        return x * keep * (keep.numel() / keep.sum().clamp_min(1.0))


class LinearScheduler:
    """Ramps ``dropblock.drop_prob`` linearly; ``step()`` mutates the module in place."""

    def __init__(self, dropblocks: List[DropBlock2D], start: float, stop: float, steps: int) -> None:
        self.dropblocks = dropblocks
        self.values = np.linspace(start, stop, steps)
        self.i = 0

    def step(self) -> None:
        if self.i < len(self.values):
            for db in self.dropblocks:
                db.drop_prob = float(self.values[self.i])
        self.i += 1


class DropBlockResNet(nn.Module):
    """Bottleneck ResNet with DropBlock after stages 3 and 4, as in the DropBlock paper."""

    def __init__(self, cfg: DropBlockConfig) -> None:
        super().__init__()
        self.stem = resnet_stem(cfg.resnet)
        stages, cout = resnet_stages(cfg.resnet)
        self.stages = nn.ModuleList(stages)
        self.dropblocks = nn.ModuleList(DropBlock2D(0.0, cfg.block_size) for _ in range(2))
        self.fc = nn.Linear(cout, cfg.resnet.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = self.stages[1](self.stages[0](x))
        x = self.dropblocks[0](self.stages[2](x))
        x = self.dropblocks[1](self.stages[3](x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class DropBlockProgram(Program):
    name = "dropblock"

    def __init__(self, size: str, device: str, seed: int) -> None:
        super().__init__(size, device, seed)
        cfg = CONFIGS[size]
        seed_everything(seed)
        self.model = DropBlockResNet(cfg).to(self.device)
        self.scheduler = LinearScheduler(list(self.model.dropblocks), 0.0, cfg.final_drop_prob,
                                         cfg.ramp_steps)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=cfg.resnet.lr, momentum=0.9,
                                         weight_decay=1e-4)
        self.batches = synthetic_images(4, cfg.resnet, self.device)
        self.drop_probs: List[float] = []  # value used at each step, for tests

    def step(self, i: int) -> torch.Tensor:
        self.scheduler.step()
        self.drop_probs.append(self.model.dropblocks[0].drop_prob)
        x, y = cycle(self.batches, i)
        loss = F.cross_entropy(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.detach()


def build(size: str = "small", device: str = "cpu", seed: int = 0) -> DropBlockProgram:
    return DropBlockProgram(check_size(size), device, seed)


if __name__ == "__main__":
    demo_main(build)
