"""Host-side cost of the co-execution front end (issue 4's measurement).

For one MLP training step (forward, backward, SGD+momentum), measures per
step and per aten op: eager PyTorch, terra's tracing phase, and terra's
co-execution host side (placeholders + validation + feeds/fetches, the
graph running concurrently). Prints a table; numbers go to
docs/benchmarks.md. Run: /usr/bin/python3 benchmarks/frontend_overhead.py
"""
from __future__ import annotations

import contextlib
import io
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import terra  # noqa: E402
from terra import tracing  # noqa: E402
from terra.function import _run_step  # noqa: E402


def build(width: int):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                          nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return model, opt, step


class _Count(TorchDispatchMode):
    n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        _Count.n += 1
        return func(*args, **(kwargs or {}))


def timed(fn, batches, reps: int) -> float:
    start = time.perf_counter()
    for _ in range(reps):
        for x, y in batches:
            fn(x, y)
    return (time.perf_counter() - start) / (reps * len(batches))


def main() -> None:
    g = torch.Generator().manual_seed(0)
    print(f"{'width':>6} {'ops':>4} {'eager/step':>11} {'eager/op':>9} {'trace/step':>11} "
          f"{'coexec host/op':>15} {'coexec/step':>12} {'vs eager':>9}")
    for width in (64, 512):
        batches = [(torch.randn(64, 32, generator=g), torch.randint(0, 10, (64,), generator=g))
                   for _ in range(4)]
        _, _, eager = build(width)
        with _Count():
            eager(*batches[0])
        ops = _Count.n
        _Count.n = 0
        t_eager = timed(eager, batches, 20)
        model, opt, step = build(width)
        registry = terra.StateRegistry([model], [opt])

        def trace_once(x, y):
            rec = tracing._Recorder(registry, (x, y), {}, sys._getframe())
            return _run_step(rec, step, (x, y), {})
        t_trace = timed(trace_once, batches, 5)
        fn = terra.function(build(width)[2])
        with contextlib.redirect_stdout(io.StringIO()):
            timed(fn, batches, 2)
        fn.wait_compiled()  # compiled in the background during the warm-up
        with contextlib.redirect_stdout(io.StringIO()):
            timed(fn, batches, 1)
        s0 = terra.stats(fn)
        t_co = timed(fn, batches, 10)
        s1 = terra.stats(fn)
        n = s1["coexec_iterations"] - s0["coexec_iterations"]
        host = (s1["host_exec_s"] - s0["host_exec_s"]) / max(n, 1)
        print(f"{width:>6} {ops:>4} {t_eager * 1e3:>9.2f}ms {t_eager / ops * 1e6:>7.1f}us "
              f"{t_trace * 1e3:>9.2f}ms {host / ops * 1e6:>13.1f}us {t_co * 1e3:>10.2f}ms "
              f"{t_eager / t_co:>8.2f}x")


if __name__ == "__main__":
    main()
