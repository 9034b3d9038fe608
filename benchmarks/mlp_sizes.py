"""Eager against terra on the main job's MLP training step at three sizes.

The main job (examples/train.py) trains a tiny MLP whose eager step is
almost all framework overhead; this script runs the same step function
(SGD with momentum, cross-entropy, a `.item()` log every 10 steps) at
that size and at two larger ones, side by side in one process: after a
warm-up that traces, compiles and co-executes, blocks of eager and terra
steps alternate on the same batches. It prints ms per step (medians of the
blocks), terra over eager, and terra's per-step host exec, host stall
(waiting for the graph, including the commit's wait) and graph exec.

    /usr/bin/python3 benchmarks/mlp_sizes.py [--blocks 6] [--block 16] [--copy-commit]

With `--copy-commit`, each round also times a terra block whose graph does
not write the new state in place (`TERRA_COMMIT_IN_PLACE=0`: the host
copies it after the run, as before -terra-commit-in-place).
"""
from __future__ import annotations

import argparse
import builtins
import os
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "examples"))
import terra  # noqa: E402
from train import build  # noqa: E402  (the main job's model and step)

# (name, batch, input width, hidden width)
SIZES = [("tiny (main job)", 64, 32, 128), ("medium", 256, 128, 512), ("wide", 128, 256, 1024)]


def batches(n: int, d: int, b: int) -> list:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, d, generator=g)
    y = x[:, :10].argmax(1)
    return [(x[i:i + b], y[i:i + b]) for i in range(0, n, b)]


def timed(step, data) -> float:
    start = time.perf_counter()
    for x, y in data:
        step(x, y)
    return (time.perf_counter() - start) * 1e3 / len(data)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--block", type=int, default=16, help="steps per block")
    ap.add_argument("--copy-commit", action="store_true",
                    help="also time terra with the state committed by the host's copy")
    args = ap.parse_args()
    quiet = builtins.print
    for name, b, d, h in SIZES:
        data = batches(b * args.block, d, b)
        eager, fn = build(d, h)[1], terra.function(build(d, h)[1])
        builtins.print = lambda *a, **k: None  # the steps' own logging
        try:
            for _ in range(3):  # trace, compile, co-execute
                timed(fn, data)
                fn.wait_compiled()
            timed(fn, data)
            timed(eager, data)  # eager's first steps (momentum buffers, allocator) too
            before = dict(terra.stats(fn))
            te, tt, tc = [], [], []
            for r in range(args.blocks):
                te.append(timed(eager, data))
                # The block right after eager's runs with colder caches:
                # with --copy-commit the two terra kinds take turns there.
                for copy in ((False, True) if r % 2 else (True, False)) if args.copy_commit else (False,):
                    if copy:
                        os.environ["TERRA_COMMIT_IN_PLACE"] = "0"
                        tc.append(timed(fn, data))
                        os.environ.pop("TERRA_COMMIT_IN_PLACE")
                    else:
                        tt.append(timed(fn, data))
            after = terra.stats(fn)
        finally:
            builtins.print = quiet
            os.environ.pop("TERRA_COMMIT_IN_PLACE", None)
        steps = after["coexec_iterations"] - before["coexec_iterations"]
        per = {k: (after[k] - before[k]) * 1e3 / max(steps, 1)
               for k in ("host_exec_s", "host_stall_s", "graph_exec_s")}
        e, t = statistics.median(te), statistics.median(tt)
        print(f"{name:16s} batch {b:3d}, {d}->{h}->{h}->10: eager {e:6.2f} ms, terra {t:6.2f} ms, "
              f"{e / t:4.2f}x eager; terra per step: host exec {per['host_exec_s']:.2f}, "
              f"host stall {per['host_stall_s']:.2f}, graph exec {per['graph_exec_s']:.2f} ms; "
              f"{steps} of {(len(tt) + len(tc)) * len(data)} timed steps co-executed, "
              f"{after['fallbacks']} fallbacks")
        if tc:
            c = statistics.median(tc)
            print(f"{'':16s} terra with the host copying the new state: {c:6.2f} ms, "
                  f"{e / c:4.2f}x eager (in place: {c / t:4.2f}x faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
