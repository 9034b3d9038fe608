"""A real PyTorch training program through the compiled path.

Trains a small MLP for a few steps twice from the same initialization: once
eagerly, once with `terra.CompiledStep` (traced eagerly until the trace is
covered, then compiled through the terra pipeline and run with terra-run).
Prints the losses side by side and whether parameters match. This is the
main job until the co-execution front end (`@terra.function`) exists.
"""
from __future__ import annotations

import copy
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import terra  # noqa: E402

STEPS = 8


def make_step(model: torch.nn.Module, opt: torch.optim.Optimizer):
    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def main() -> int:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 8))
    twin = copy.deepcopy(model)
    batches = [(torch.randn(16, 32), torch.randn(16, 8)) for _ in range(STEPS)]

    eager_step = make_step(model, torch.optim.SGD(model.parameters(), lr=0.05))
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.05)
    with tempfile.TemporaryDirectory() as tmp:
        compiled = terra.CompiledStep(make_step(twin, twin_opt), [twin], [twin_opt],
                                      workdir=Path(tmp))
        print(f"{'step':>4} {'eager loss':>12} {'terra loss':>12}  mode")
        for i, (x, y) in enumerate(batches):
            eager = eager_step(x, y)
            mode = "compiled" if compiled.phase == "compiled" else "traced (eager)"
            start = time.perf_counter()
            (loss,) = compiled(x, y)
            ms = (time.perf_counter() - start) * 1e3
            print(f"{i:>4} {eager:>12.6f} {loss:>12.6f}  {mode}, {ms:.1f} ms")
    same = all(torch.allclose(a, b, rtol=1e-5, atol=1e-6)
               for a, b in zip(model.parameters(), twin.parameters()))
    print("parameters match eager:", same)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
