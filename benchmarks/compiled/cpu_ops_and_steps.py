"""Compiled graphs against eager PyTorch on this CPU (issue 3's benchmark).

Measures, side by side in one run and reported as ratios (eager time /
compiled time, > 1 means the compiled graph is faster):
  * per-op time of single-op graphs (terra-run --repeat) vs the aten op;
  * whole-step time of three training steps traced with python/terra and
    compiled: an MLP, a small CNN and a pointwise-heavy step;
  * compile time of each graph (JIT, first compile, no cache).

This is a script, not a test:  /usr/bin/python3 benchmarks/compiled/cpu_ops_and_steps.py
It prints a markdown table (paste into docs/benchmarks.md).
"""
from __future__ import annotations

import copy
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO / "test" / "python"))
import terra  # noqa: E402
from oprunner import TERRA_RUN, aten, graph_text  # noqa: E402

REPEAT = 30


def eager_ms(fn, repeat: int = REPEAT) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def terra_run_ms(argv: list[str], repeat: int = REPEAT) -> tuple[float, float]:
    """(compile ms, median run ms) of `terra-run argv` with --repeat."""
    # The graphs' libraries get the same thread count as eager torch:
    # OpenBLAS (GEMMs), whose count oneDNN (convolutions) follows.
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(torch.get_num_threads())}
    out = subprocess.run([str(TERRA_RUN), *argv, "--repeat", str(repeat), "--timing"],
                         capture_output=True, text=True, check=True, env=env).stdout
    compile_s = float(re.search(r"compile (\S+) s", out).group(1))
    runs = [float(x) for x in re.findall(r"^run (\S+) s", out, re.M)]
    return compile_s * 1e3, statistics.median(runs[1:] or runs) * 1e3


def op_case(name, inputs, args=None):
    args = args or {}
    expected = aten(name)(*inputs, **args)
    outputs = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        (tmpdir / "g.mlir").write_text(graph_text(name, inputs, args, outputs))
        argv = [str(tmpdir / "g.mlir")]
        for i, t in enumerate(inputs):
            np.save(tmpdir / f"in{i}.npy", np.array(t.numpy(), order="C", copy=True))
            argv += ["--feed", f"{i + 1}={tmpdir / f'in{i}.npy'}"]
        compile_ms, run_ms = terra_run_ms(argv)
    return eager_ms(lambda: aten(name)(*inputs, **args)), run_ms, compile_ms


def step_case(make_model, make_batch, loss_fn):
    torch.manual_seed(0)
    model = make_model()
    twin = copy.deepcopy(model)
    x, y = make_batch()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.01)

    def make_step(m, o):
        def step(x, y):
            o.zero_grad(set_to_none=True)
            loss = loss_fn(m(x), y)
            loss.backward()
            o.step()
            return loss.item()
        return step

    eager = eager_ms(lambda: make_step(model, opt)(x, y))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        compiled = terra.CompiledStep(make_step(twin, twin_opt), [twin], [twin_opt], workdir=work)
        while compiled.phase != "compiled":
            compiled(x, y)
        compiled(x, y)  # one compiled step writes its inputs to a step dir
        step_dir = sorted(work.glob("step*"), key=lambda p: int(p.name[4:]))[-1]
        argv = [str(work / "graph.mlir")]
        for f in sorted(step_dir.glob("feed*.npy")):
            fid = compiled._feed_ids[int(f.stem[4:])]
            argv += ["--feed", f"{fid}={f}"]
        for i, name in enumerate(compiled._state_names):
            argv += ["--state", f"{name}={step_dir / f'state{i}.npy'}"]
        compile_ms, run_ms = terra_run_ms(argv)
    return eager, run_ms, compile_ms


def main() -> None:
    torch.set_num_threads(1)
    r = torch.randn
    ops = {
        "add (256x256)": ("aten.add.Tensor", [r(256, 256), r(256, 256)]),
        "relu (256x256)": ("aten.relu", [r(256, 256)]),
        "gelu (256x256)": ("aten.gelu", [r(256, 256)]),
        "mm (128x128x128)": ("aten.mm", [r(128, 128), r(128, 128)]),
        "softmax (64x512)": ("aten._softmax", [r(64, 512)], {"dim": -1, "half_to_float": False}),
        "sum dim (256x256)": ("aten.sum.dim_IntList", [r(256, 256)], {"dim": [1]}),
        "conv 3x3 (8x16x32x32)": ("aten.convolution", [r(8, 16, 32, 32), r(16, 16, 3, 3), r(16)],
                                  {"stride": [1, 1], "padding": [1, 1], "dilation": [1, 1],
                                   "transposed": False, "output_padding": [0, 0], "groups": 1}),
    }
    print("| case | eager ms | compiled ms | speedup (eager/compiled) | compile ms |")
    print("|---|---|---|---|---|")
    for label, case in ops.items():
        e, c, comp = op_case(*case)
        print(f"| op: {label} | {e:.3f} | {c:.3f} | {e / c:.2f}x | {comp:.0f} |", flush=True)

    class CNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.fc = torch.nn.Linear(8 * 8 * 8, 10)

        def forward(self, x):
            return self.fc(torch.flatten(F.max_pool2d(F.relu(self.conv(x)), 2), 1))

    class Pointwise(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(64, 256))

        def forward(self, x):
            h = x * self.w
            for _ in range(6):
                h = torch.tanh(h) * 0.9 + torch.sigmoid(h) * 0.1
            return h

    steps = {
        "MLP step (64x128-256-10, SGD)": (
            lambda: torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)),
            lambda: (torch.randn(64, 128), torch.randn(64, 10)), F.mse_loss),
        "CNN step (16x3x16x16, SGD)": (
            CNN, lambda: (torch.randn(16, 3, 16, 16), torch.randint(0, 10, (16,))),
            lambda out, y: F.nll_loss(F.log_softmax(out, dim=1), y)),
        "pointwise-heavy step (64x256)": (
            Pointwise, lambda: (torch.randn(64, 256), torch.randn(64, 256)), F.mse_loss),
    }
    for label, case in steps.items():
        e, c, comp = step_case(*case)
        print(f"| {label} | {e:.3f} | {c:.3f} | {e / c:.2f}x | {comp:.0f} |", flush=True)


if __name__ == "__main__":
    main()
