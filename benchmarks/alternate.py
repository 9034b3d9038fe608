"""Eager against terra on one program, in one process, in alternating blocks.

This VM's speed moves by up to 2x within minutes, so two runs minutes
apart cannot compare a change of a few percent. This script builds the
program twice from the same seed, wraps one copy in `terra.function`,
warms it up until it has co-executed `--warmup` steps in a row (waiting
for every background compile), then times blocks of `--block` steps,
alternating eager and terra, and prints the medians. Each copy draws
from its own random streams, so both take the same paths.

`--on` / `--off` compare two settings of the front end in the same
process: Python statements run before each terra block of the "on" and
"off" kind (they see `fn`, the terra function, and `terra`). The order
of "on" and "off" is swapped every block (a block right after an eager
block runs with colder caches). Example, the native state walk against
the Python one:

    /usr/bin/python3 benchmarks/alternate.py sdpoint --blocks 16 \\
      --on  "r = fn.registry; r._native_walk = r.__dict__.setdefault('_w', r._native_walk)" \\
      --off "r = fn.registry; r.__dict__.setdefault('_w', r._native_walk); r._native_walk = None"

Timings are ms per step (medians over blocks); docs/benchmarks.md has the
numbers measured this way.
"""
from __future__ import annotations

import argparse
import collections
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import terra  # noqa: E402
from benchmarks.programs import PROGRAMS  # noqa: E402


class Streams:
    """One copy's random streams (Python's `random`, NumPy's and torch's
    global generators). The programs draw from the global ones (SDPoint's
    downsampling point, DropBlock's masks): each copy gets its own, so
    eager and terra take the same paths, step for step, as two separate
    runs would."""

    def __init__(self) -> None:
        self.state = self.capture()

    @staticmethod
    def capture() -> tuple:
        return random.getstate(), np.random.get_state(), torch.get_rng_state()

    def __enter__(self) -> "Streams":
        random.setstate(self.state[0])
        np.random.set_state(self.state[1])
        torch.set_rng_state(self.state[2])
        return self

    def __exit__(self, *exc: object) -> None:
        self.state = self.capture()


def warm_up(fn, eager_step: Callable[[int], object], steps: int, i: int,
            streams: Dict[str, Streams]) -> int:
    """Runs both copies until `fn` co-executed `steps` steps in a row;
    returns the next step index."""
    in_a_row = 0
    while in_a_row < steps:
        with streams["terra"]:
            fn(i)
        with streams["eager"]:
            eager_step(i)
        i += 1
        if fn.stats.steps[-1]["phase"] == "coexec":
            in_a_row += 1
        else:
            in_a_row = 0
            fn.wait_compiled()
    return i


def add_block_arguments(ap: argparse.ArgumentParser, warmup: int) -> None:
    """The program and block options shared with step_lines.py."""
    ap.add_argument("program", choices=sorted(PROGRAMS))
    ap.add_argument("--size", default="small", choices=("small", "full"))
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--block", type=int, default=20, help="steps per block")
    ap.add_argument("--warmup", type=int, default=warmup, help="co-executed steps in a row first")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_block_arguments(ap, warmup=24)
    ap.add_argument("--on", help="statement run before each 'on' terra block")
    ap.add_argument("--off", help="statement run before each 'off' terra block")
    args = ap.parse_args(argv)
    if (args.on is None) != (args.off is None):
        ap.error("--on and --off go together")
    torch.set_num_threads(args.threads)
    module = PROGRAMS[args.program]
    eager = module.build(args.size, "cpu", 0)
    program = module.build(args.size, "cpu", 0)  # seeds every stream: both copies start from here
    streams = {"eager": Streams(), "terra": Streams()}
    fn = terra.function(program.step)
    i = warm_up(fn, eager.step, args.warmup, 0, streams)
    kinds = ["eager"] + (["on", "off"] if args.on is not None else ["terra"])
    times: Dict[str, List[float]] = {k: [] for k in kinds}
    steps_of: Dict[str, List[dict]] = {k: [] for k in kinds}  # terra's step stats by kind
    scope = {"fn": fn, "terra": terra}
    for b in range(args.blocks):
        order = kinds if b % 2 == 0 else kinds[:1] + kinds[:0:-1]
        for kind in order:
            if kind in ("on", "off"):
                exec(args.on if kind == "on" else args.off, scope)  # noqa: S102 - the user's own switch
            step = eager.step if kind == "eager" else fn
            # "on" and "off" share the terra copy's streams (one program).
            with streams["eager" if kind == "eager" else "terra"]:
                seen = len(fn.stats.steps)
                start = time.perf_counter()
                for k in range(args.block):
                    step(i + k)
                times[kind].append((time.perf_counter() - start) / args.block * 1e3)
                if kind != "eager":
                    steps_of[kind] += fn.stats.steps[seen:]
        i += args.block
    median = {k: statistics.median(v) for k, v in times.items()}
    print(f"{args.program} ({args.size}, {args.blocks} blocks of {args.block} steps, ms per step)")
    for kind in kinds:
        ratio = "" if kind == "eager" else f"  {median['eager'] / median[kind]:.2f}x eager"
        blocks = " ".join(f"{t:.2f}" for t in times[kind])
        print(f"  {kind:5s} {median[kind]:8.2f}{ratio}   [{blocks}]")
        if steps_of[kind]:
            per = {k: statistics.median(s.get(k, 0.0) for s in steps_of[kind]) * 1e3
                   for k in ("host_exec_s", "host_stall_s", "graph_exec_s", "graph_stall_s")}
            print(f"        per step (median): host exec {per['host_exec_s']:.2f}, host stall "
                  f"{per['host_stall_s']:.2f}, graph exec {per['graph_exec_s']:.2f}, "
                  f"graph stall {per['graph_stall_s']:.2f} ms")
    timed_steps = fn.stats.steps[-args.blocks * args.block * (len(kinds) - 1):]
    phases = collections.Counter(s["phase"] for s in timed_steps)
    print(f"  terra phases in the timed blocks: {dict(phases)}")
    in_place = [s.get("commits_in_place", 0) for s in timed_steps]
    print(f"  steps whose graph wrote state in place (-terra-commit-in-place): "
          f"{sum(1 for n in in_place if n)} of {len(in_place)}, {max(in_place, default=0)} values at most")
    return 0


if __name__ == "__main__":
    sys.exit(main())
