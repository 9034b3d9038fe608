"""ResNet with Stochastic Downsampling Point (after xternalz/SDPoint).

Python feature kept: each step draws, with Python's ``random`` module, a
downsampling point (a block index, or none) and a ratio, and writes them into
the model's blocks (object mutation). Many distinct forward paths and feature
map shapes occur during training; evaluation uses the plain network.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ._common import Program, check_size, cycle, demo_main, seed_everything
from ._nn import RESNET_FULL, RESNET_SMALL, Bottleneck, ResNetConfig, resnet_stages, resnet_stem, \
    synthetic_images


@dataclass(frozen=True)
class SDPointConfig:
    resnet: ResNetConfig
    ratios: Tuple[float, ...]


CONFIGS = {
    "small": SDPointConfig(RESNET_SMALL, ratios=(0.5, 0.75)),
    "full": SDPointConfig(RESNET_FULL, ratios=(0.5, 0.75)),
}


class SDBlock(nn.Module):
    """A bottleneck whose input may be average-pooled by ``downsampling_ratio``."""

    def __init__(self, block: Bottleneck) -> None:
        super().__init__()
        self.block = block
        self.downsampling_ratio = 1.0  # set per step by SDPointResNet.stochastic_downsampling

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.downsampling_ratio < 1.0:
            side = max(1, int(round(x.shape[-1] * self.downsampling_ratio)))
            x = F.adaptive_avg_pool2d(x, side)
        return self.block(x)


class SDPointResNet(nn.Module):
    def __init__(self, cfg: SDPointConfig) -> None:
        super().__init__()
        self.stem = resnet_stem(cfg.resnet)
        stages, cout = resnet_stages(cfg.resnet)
        self.blocks = nn.ModuleList(SDBlock(b) for stage in stages for b in stage)
        self.fc = nn.Linear(cout, cfg.resnet.num_classes)

    @property
    def num_points(self) -> int:
        """Block inputs that can be downsampled, plus one for 'no downsampling'."""
        return len(self.blocks) + 1

    def stochastic_downsampling(self, point: int, ratio: float) -> None:
        """Mutate the blocks so exactly block ``point`` (if any) downsamples."""
        for idx, block in enumerate(self.blocks):
            block.downsampling_ratio = ratio if idx == point else 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class SDPointProgram(Program):
    name = "sdpoint"
    # Nine paths drawn at random (the rarest 1 in 10): terra's graph covers
    # them all after ~100 steps of compiling and regenerating (measured:
    # 8 regenerations by step 105 with synchronous compiles).
    warmup = 150

    def __init__(self, size: str, device: str, seed: int) -> None:
        super().__init__(size, device, seed)
        self.cfg = cfg = CONFIGS[size]
        seed_everything(seed)  # also seeds the `random` module drawing the paths
        self.model = SDPointResNet(cfg).to(self.device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=cfg.resnet.lr, momentum=0.9,
                                         weight_decay=1e-4)
        self.batches = synthetic_images(4, cfg.resnet, self.device)
        self.paths_seen: List[Tuple[Optional[int], float]] = []  # (block or None, ratio) per step

    def step(self, i: int) -> torch.Tensor:
        point = random.randrange(self.model.num_points)
        ratio = random.choice(self.cfg.ratios)
        self.model.stochastic_downsampling(point, ratio)
        no_ds = point == len(self.model.blocks)
        self.paths_seen.append((None, 1.0) if no_ds else (point, ratio))
        x, y = cycle(self.batches, i)
        loss = F.cross_entropy(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.detach()


def build(size: str = "small", device: str = "cpu", seed: int = 0) -> SDPointProgram:
    return SDPointProgram(check_size(size), device, seed)


if __name__ == "__main__":
    demo_main(build)
