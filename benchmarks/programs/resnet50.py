"""ResNet-50 image classification: the static baseline (no dynamic Python feature).

``full`` is the real ResNet-50 (bottleneck blocks 3-4-6-3, 224x224, batch 64);
``small`` keeps the bottleneck structure but is narrow and shallow (one block
per stage, width 8, 32x32 images) so a step takes milliseconds on a CPU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._common import Program, check_size, cycle, demo_main, seed_everything
from ._nn import RESNET_FULL, RESNET_SMALL, ResNetConfig, resnet_stages, resnet_stem, synthetic_images

CONFIGS = {"small": RESNET_SMALL, "full": RESNET_FULL}


class ResNet(nn.Module):
    def __init__(self, cfg: ResNetConfig) -> None:
        super().__init__()
        self.stem = resnet_stem(cfg)
        stages, cout = resnet_stages(cfg)
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cout, cfg.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class ResNet50Program(Program):
    name = "resnet50"

    def __init__(self, size: str, device: str, seed: int) -> None:
        super().__init__(size, device, seed)
        cfg = CONFIGS[size]
        seed_everything(seed)
        self.model = ResNet(cfg).to(self.device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=cfg.lr, momentum=0.9,
                                         weight_decay=1e-4)
        self.batches = synthetic_images(4, cfg, self.device)

    def step(self, i: int) -> torch.Tensor:
        x, y = cycle(self.batches, i)
        loss = F.cross_entropy(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.detach()


def build(size: str = "small", device: str = "cpu", seed: int = 0) -> ResNet50Program:
    return ResNet50Program(check_size(size), device, seed)


if __name__ == "__main__":
    demo_main(build)
