#!/usr/bin/env python3
"""Runs a benchmark program under `@terra.function(device="cuda")` until it
co-executes, then marks a few steps for a profiler that starts off
(`ncu --profile-from-start off`, scripts/gpu-check.sh part 3d): only the
kernels and library calls of co-executed steps are profiled, not the
tracing or the compile. Prints the steps' stats (phases per step).

    ncu --profile-from-start off --metrics gpu__time_duration.sum --csv \\
        python3 scripts/gpu-profile-step.py dcgan > step.csv
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "python"))

import torch  # noqa: E402

import terra  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("program")
    ap.add_argument("--size", default="full")
    ap.add_argument("--steps", type=int, default=2, help="profiled steps")
    ap.add_argument("--max-warmup", type=int, default=40)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    program = importlib.import_module(f"benchmarks.programs.{args.program}").build(args.size, "cuda", 0)
    fn = terra.function(program.step, device="cuda")
    i, coexec_in_a_row = 0, 0
    start = time.time()
    while coexec_in_a_row < 3:
        if i >= args.max_warmup:
            print(f"not co-executing after {i} steps: {terra.stats(fn)['fallback_log'][-3:]}", file=sys.stderr)
            return 1
        fn(i)
        fn.wait_compiled()
        step = terra.stats(fn)["steps"][-1]
        coexec_in_a_row = coexec_in_a_row + 1 if step.get("phase") == "coexec" else 0
        i += 1
    torch.cuda.synchronize()
    print(f"co-executing after {i} steps ({time.time() - start:.1f} s)", file=sys.stderr)
    cudart = torch.cuda.cudart()
    cudart.cudaProfilerStart()
    for _ in range(args.steps):
        fn(i)
        i += 1
    torch.cuda.synchronize()
    cudart.cudaProfilerStop()
    for step in terra.stats(fn)["steps"][-args.steps:]:
        print({k: step[k] for k in sorted(step) if not isinstance(step[k], (list, dict))}, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
