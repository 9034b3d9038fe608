"""Shared scaffolding for the benchmark programs.

Every program module exposes ``build(size, device, seed) -> Program``. The
``Program`` holds the model, optimizer(s) and pre-generated synthetic data, and
its ``step(i)`` method is one complete training iteration, so a harness can wrap
it with a single decorator (``terra.function(program.step)``).
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Callable, ClassVar, Dict, Iterator, List, Sequence

import numpy as np
import torch
from torch import nn

SIZES = ("small", "full")


def check_size(size: str) -> str:
    """Fail early on a typo instead of silently picking a configuration."""
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; expected one of {SIZES}")
    return size


def seed_everything(seed: int) -> None:
    """Seed every RNG a program may touch so a rebuilt program replays exactly."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Program:
    """One training program: model + optimizer + in-memory data + ``step``.

    Subclasses set ``name`` and ``model`` and implement ``step``. ``model`` may
    be a container (e.g. a ``ModuleDict`` holding a GAN's two networks) so the
    harness can compare all trained parameters through one accessor.
    """

    name: ClassVar[str] = "program"
    # The fewest warm-up steps that reach the program's steady state (the
    # harness runs at least this many in every mode).
    warmup: ClassVar[int] = 0

    def __init__(self, size: str, device: str, seed: int) -> None:
        self.size = check_size(size)
        self.device = torch.device(device)
        self.seed = seed
        self.model: nn.Module = nn.Module()

    def step(self, i: int) -> torch.Tensor:
        """Run training iteration ``i`` and return the (detached) loss."""
        raise NotImplementedError

    def parameters(self) -> Iterator[nn.Parameter]:
        return self.model.parameters()

    def param_snapshot(self) -> Dict[str, torch.Tensor]:
        """CPU copies of all parameters, for comparing final states across modes."""
        return {n: p.detach().cpu().clone() for n, p in self.model.named_parameters()}


def cycle(batches: Sequence, i: int):
    """Pick batch ``i`` from a small pre-generated pool (data loading is not timed)."""
    return batches[i % len(batches)]


def demo_main(build: Callable[..., Program], argv: List[str] | None = None) -> None:
    """``python -m benchmarks.programs.NAME``: run a few eager steps and print losses."""
    parser = argparse.ArgumentParser(description=f"eager demo of {build.__module__}")
    parser.add_argument("--size", default="small", choices=SIZES)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    program = build(size=args.size, device=args.device, seed=args.seed)
    for i in range(args.steps):
        t0 = time.perf_counter()
        loss = float(program.step(i))
        dt = (time.perf_counter() - t0) * 1e3
        print(f"{program.name} step {i}: loss {loss:.5f} ({dt:.1f} ms)")
