"""Eager against terra per statement of a program's step, in one process.

`alternate.py` says how much slower or faster a co-executed step is; this
says where. The program's `step` method is compiled again with a clock
read between its top-level statements (the same instrumented step for
both copies, so terra traces, merges and replays it as it is), both
copies are warmed up as in `alternate.py`, and blocks of steps alternate
between eager and terra. Printed per statement: the median time from the
previous clock read to this one in each mode, and the difference. Two more
rows: from the call to the step's first statement (for terra, the
co-executor's set-up) and from its last statement to the call's return
(terra: the replay's end, the commit, freeing the last step's records).

For a co-executed step, a statement's time is the host's: the program's
Python, torch's dispatch on placeholders and the replay of its ops, plus
any wait for a value the graph has not computed yet. The graph's compute
is not in it (it runs on the runner thread), so statements whose ops are
heavy show terra ahead and statements of many small ops or host reads
show where the front end costs more than eager's own dispatch. Example:

    /usr/bin/python3 benchmarks/step_lines.py faster_rcnn --blocks 8

Statements inside loops or branches of the step are timed as the
top-level statement that contains them.
"""
from __future__ import annotations

import argparse
import ast
import collections
import inspect
import statistics
import sys
import textwrap
import time
import types
from pathlib import Path
from typing import Callable, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import terra  # noqa: E402
from benchmarks.alternate import Streams, add_block_arguments, warm_up  # noqa: E402
from benchmarks.programs import PROGRAMS  # noqa: E402

_CLOCK = "__step_lines_clock"


class Clock:
    """The instrumented step's clock reads: (statement index, ns)."""

    def __init__(self) -> None:
        self.reads: List[tuple] = []

    def __call__(self, k: int) -> None:
        self.reads.append((k, time.perf_counter_ns()))


def instrument(program: object, clock: Clock) -> List[str]:
    """Replaces `program.step` by a copy with `clock(k)` before each
    top-level statement k of its body; returns each statement's first
    source line."""
    method = type(program).step
    source = textwrap.dedent(inspect.getsource(method))
    tree = ast.parse(source)
    fn = tree.body[0]
    if not isinstance(fn, ast.FunctionDef):
        raise SystemExit(f"{type(program).__name__}.step is not a plain function")
    lines = source.splitlines()
    labels: List[str] = []
    body: list = []
    for stmt in fn.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and not body:
            continue  # the docstring
        k = len(labels)
        labels.append(lines[stmt.lineno - 1].strip())
        body.append(_clock_call(k, stmt))
        body.append(stmt)
    fn.body = body or [ast.Pass()]
    fn.decorator_list = []
    ast.fix_missing_locations(tree)
    file = inspect.getsourcefile(method) or "<step>"
    first = inspect.getsourcelines(method)[1]
    ast.increment_lineno(tree, first - 1)
    code = compile(tree, file, "exec")
    scope = dict(method.__globals__)
    scope[_CLOCK] = clock
    namespace: Dict[str, object] = {}
    exec(code, scope, namespace)  # noqa: S102 - the program's own step, recompiled
    program.step = types.MethodType(namespace[fn.name], program)
    return labels


def _clock_call(k: int, where: ast.stmt) -> ast.stmt:
    call = ast.Expr(ast.Call(ast.Name(_CLOCK, ast.Load()), [ast.Constant(k)], []))
    return ast.copy_location(call, where)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_block_arguments(ap, warmup=40)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    module = PROGRAMS[args.program]
    clocks = {"eager": Clock(), "terra": Clock()}
    eager = module.build(args.size, "cpu", 0)
    program = module.build(args.size, "cpu", 0)
    labels = instrument(eager, clocks["eager"])
    instrument(program, clocks["terra"])
    streams = {"eager": Streams(), "terra": Streams()}
    fn = terra.function(program.step)
    i = warm_up(fn, eager.step, args.warmup, 0, streams)
    spans: Dict[str, Dict[str, List[int]]] = {k: collections.defaultdict(list) for k in clocks}
    totals: Dict[str, List[int]] = {k: [] for k in clocks}
    phases: collections.Counter = collections.Counter()
    for b in range(args.blocks):
        for kind in ("eager", "terra") if b % 2 == 0 else ("terra", "eager"):
            step: Callable[[int], object] = eager.step if kind == "eager" else fn
            clock = clocks[kind]
            with streams[kind]:
                for k in range(args.block):
                    clock.reads.clear()
                    start = time.perf_counter_ns()
                    step(i + k)
                    end = time.perf_counter_ns()
                    totals[kind].append(end - start)
                    _spans(spans[kind], clock.reads, start, end)
                    if kind == "terra":
                        phases[fn.stats.steps[-1]["phase"]] += 1
        i += args.block
    rows = ["call"] + [f"{k}" for k in range(len(labels))] + ["return"]
    names = {"call": "(the call -> the first statement)",
             "return": "(the last statement run -> the call's return)"}
    names.update({str(k): label for k, label in enumerate(labels)})
    print(f"{args.program} ({args.size}, {args.blocks} blocks of {args.block} steps; "
          f"us per step, medians; terra phases {dict(phases)})")
    print(f"  {'eager':>8s} {'terra':>8s} {'diff':>8s}  statement")
    for r in rows:
        e = _median(spans["eager"].get(r))
        t = _median(spans["terra"].get(r))
        if e is None and t is None:
            continue
        diff = "" if e is None or t is None else f"{t - e:+8.1f}"
        print(f"  {_fmt(e)} {_fmt(t)} {diff:>8s}  {names[r][:90]}")
    e, t = statistics.median(totals["eager"]) / 1e3, statistics.median(totals["terra"]) / 1e3
    print(f"  {e:8.1f} {t:8.1f} {t - e:+8.1f}  whole step ({e / t:.2f}x eager)")
    return 0


def _spans(out: Dict[str, List[int]], reads: List[tuple], start: int, end: int) -> None:
    """Each statement's time (from its clock read to the next one, the last
    one's to the call's return) and the call's start, added to `out`."""
    if not reads:
        return
    out["call"].append(reads[0][1] - start)
    per: Dict[str, int] = collections.Counter()
    for (k, t0), (_, t1) in zip(reads, reads[1:]):
        per[str(k)] += t1 - t0
    for k, ns in per.items():
        out[k].append(ns)
    out["return"].append(end - reads[-1][1])


def _median(v: Optional[List[int]]) -> Optional[float]:
    return None if not v else statistics.median(v) / 1e3


def _fmt(v: Optional[float]) -> str:
    return f"{'-':>8s}" if v is None else f"{v:8.1f}"


if __name__ == "__main__":
    sys.exit(main())
