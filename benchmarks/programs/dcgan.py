"""DCGAN (after the TensorFlow/PyTorch DCGAN tutorials): generator + discriminator,
two Adam optimizers, one D update and one G update per step.

Python feature kept: every step logs ``.item()`` values (D loss, G loss, D(x),
D(G(z))) into a Python list, as the tutorial's training loop prints them. Each
of those is a tensor materialization in the middle of the step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ._common import Program, check_size, cycle, demo_main, seed_everything


@dataclass(frozen=True)
class DCGANConfig:
    image_size: int  # power of two >= 16
    nz: int
    ngf: int
    ndf: int
    batch_size: int
    channels: int = 3


CONFIGS = {
    "small": DCGANConfig(image_size=16, nz=32, ngf=16, ndf=16, batch_size=16),
    "full": DCGANConfig(image_size=64, nz=100, ngf=64, ndf=64, batch_size=128),
}


class Generator(nn.Module):
    """z (nz x 1 x 1) -> 4x4 -> ... -> image_size, doubling resolution each layer."""

    def __init__(self, cfg: DCGANConfig) -> None:
        super().__init__()
        n_up = cfg.image_size.bit_length() - 3  # 4x4 -> image_size takes n_up doublings
        ch = cfg.ngf * 2**(n_up - 1)
        layers: List[nn.Module] = [nn.ConvTranspose2d(cfg.nz, ch, 4, 1, 0, bias=False),
                                   nn.BatchNorm2d(ch), nn.ReLU(True)]
        for _ in range(n_up - 1):
            layers += [nn.ConvTranspose2d(ch, ch // 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ch // 2),
                       nn.ReLU(True)]
            ch //= 2
        layers += [nn.ConvTranspose2d(ch, cfg.channels, 4, 2, 1, bias=False), nn.Tanh()]
        self.net = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


class Discriminator(nn.Module):
    """image -> halving resolution down to 4x4 -> one logit."""

    def __init__(self, cfg: DCGANConfig) -> None:
        super().__init__()
        n_down = cfg.image_size.bit_length() - 3
        ch = cfg.ndf
        layers: List[nn.Module] = [nn.Conv2d(cfg.channels, ch, 4, 2, 1, bias=False),
                                   nn.LeakyReLU(0.2, True)]
        for _ in range(n_down - 1):
            layers += [nn.Conv2d(ch, ch * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ch * 2),
                       nn.LeakyReLU(0.2, True)]
            ch *= 2
        layers += [nn.Conv2d(ch, 1, 4, 1, 0, bias=False)]
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).view(-1)


def weights_init(m: nn.Module) -> None:
    """DCGAN paper init: N(0, 0.02) convs, N(1, 0.02) BN scales."""
    if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif isinstance(m, nn.BatchNorm2d):
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


def make_real_batches(cfg: DCGANConfig, n: int, device: torch.device) -> List[torch.Tensor]:
    """Smooth 'real' images in [-1, 1]: low-resolution noise upsampled, so D has structure to learn."""
    out = []
    for _ in range(n):
        low = torch.randn(cfg.batch_size, cfg.channels, 4, 4)
        img = F.interpolate(low, size=(cfg.image_size, cfg.image_size), mode="bilinear",
                            align_corners=False)
        out.append(torch.tanh(img).to(device))
    return out


class DCGANProgram(Program):
    name = "dcgan"

    def __init__(self, size: str, device: str, seed: int) -> None:
        super().__init__(size, device, seed)
        self.cfg = cfg = CONFIGS[size]
        seed_everything(seed)
        self.netG = Generator(cfg).to(self.device)
        self.netD = Discriminator(cfg).to(self.device)
        self.netG.apply(weights_init)
        self.netD.apply(weights_init)
        self.model = nn.ModuleDict({"G": self.netG, "D": self.netD})
        self.optG = torch.optim.Adam(self.netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.optD = torch.optim.Adam(self.netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.real = make_real_batches(cfg, 4, self.device)
        self.noise = [torch.randn(cfg.batch_size, cfg.nz, 1, 1, device=self.device) for _ in range(4)]
        # (errD, errG, D(x), D(G(z)) before G step, D(G(z)) after) per step, all Python floats.
        self.log: List[Tuple[float, float, float, float, float]] = []

    def step(self, i: int) -> torch.Tensor:
        real, z = cycle(self.real, i), cycle(self.noise, i)
        ones = torch.ones(real.shape[0], device=self.device)
        zeros = torch.zeros(real.shape[0], device=self.device)
        # (1) D: maximize log D(x) + log(1 - D(G(z)))
        self.netD.zero_grad()
        out_real = self.netD(real)
        err_real = F.binary_cross_entropy_with_logits(out_real, ones)
        err_real.backward()
        d_x = out_real.sigmoid().mean().item()
        fake = self.netG(z)
        out_fake = self.netD(fake.detach())
        err_fake = F.binary_cross_entropy_with_logits(out_fake, zeros)
        err_fake.backward()
        d_g_z1 = out_fake.sigmoid().mean().item()
        err_d = err_real + err_fake
        self.optD.step()
        # (2) G: maximize log D(G(z))
        self.netG.zero_grad()
        out = self.netD(fake)
        err_g = F.binary_cross_entropy_with_logits(out, ones)
        err_g.backward()
        d_g_z2 = out.sigmoid().mean().item()
        self.optG.step()
        self.log.append((err_d.item(), err_g.item(), d_x, d_g_z1, d_g_z2))
        return (err_d + err_g).detach()


def build(size: str = "small", device: str = "cpu", seed: int = 0) -> DCGANProgram:
    return DCGANProgram(check_size(size), device, seed)


if __name__ == "__main__":
    demo_main(build)
