"""Timing one (program, mode) pair and checking it against eager.

Every mode gets a freshly built, identically seeded program and runs the same
sequence of step indices (warm-up, then ``repeats`` x ``steps``), so loss
trajectories and final parameters are directly comparable across modes.
"""

from __future__ import annotations

import math
import statistics
import time
import traceback
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import torch

from . import modes as modes_mod


@dataclass
class RunConfig:
    size: str = "small"
    device: str = "cpu"
    seed: int = 0
    steps: int = 10
    warmup: int = 3
    # Unmeasured steps after the compiler is done (every mode runs them, so
    # all modes see the same step indices): terra's first co-executed steps
    # record the iteration its later steps replay (docs/frontend.md, Tapes).
    settle: int = 2
    repeats: int = 3
    rtol: float = 1e-3
    atol: float = 1e-5
    compile_backend: str = "inductor"


@dataclass
class RunResult:
    program: str
    mode: str
    status: str  # ok | unavailable | failed | skipped
    reason: str = ""
    step_time_s: Dict[str, float] = field(default_factory=dict)  # median/min/max/q1/q3
    samples_s: List[float] = field(default_factory=list)  # mean step time per repeat
    first_call_s: Optional[float] = None
    speedup: Optional[float] = None
    losses: List[float] = field(default_factory=list)
    correctness: Dict[str, Any] = field(default_factory=dict)
    terra: Dict[str, Any] = field(default_factory=dict)
    dynamo: Dict[str, Any] = field(default_factory=dict)
    params: Optional[Dict[str, torch.Tensor]] = None  # not serialized

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d.pop("params")
        return d


def summarize(samples: List[float]) -> Dict[str, float]:
    """Median and spread; repeats are few, so min/max plus quartiles (IQR)."""
    q1, q3 = (float(np.percentile(samples, q)) for q in (25, 75))
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "q1": q1, "q3": q3}


def _barrier(out: Any, device: str) -> None:
    """Wait for the step to finish: reading the loss forces any queued graph work."""
    if isinstance(out, torch.Tensor):
        float(out)
    if device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.synchronize()


def _to_float(x: Any) -> float:
    return float(x.detach().float().cpu()) if isinstance(x, torch.Tensor) else float(x)


def run_one(module: ModuleType, mode: str, cfg: RunConfig,
            on_step: Callable[[], None] = lambda: None, perturb: float = 0.0) -> RunResult:
    """Build a fresh program, wrap its step for ``mode``, time it, capture losses/params.

    With ``perturb``, the program's first parameter is scaled by (1 + perturb)
    before the first step: an eager run perturbed like this measures how far
    rounding-sized differences carry in this program (the noise floor)."""
    name = module.__name__.rsplit(".", 1)[-1]
    modes_mod.reset(mode)
    try:
        program = module.build(size=cfg.size, device=cfg.device, seed=cfg.seed)
        if perturb:
            with torch.no_grad():
                next(iter(program.model.parameters())).mul_(1 + perturb)
        fn = modes_mod.wrap(mode, program.step, cfg.compile_backend, cfg.device)
        outputs: List[Any] = []
        i = 0
        t0 = time.perf_counter()
        outputs.append(fn(i))
        _barrier(outputs[-1], cfg.device)
        first_call = time.perf_counter() - t0
        i += 1
        on_step()
        # Terra compiles in the background while calls run eagerly: the
        # warm-up waits for each compilation, so that it reaches the steady
        # state in the same steps whatever the compile times (a program
        # whose paths are drawn at random regenerates its graph as it meets
        # them); the measured steps start once the graph is there. The
        # compile time is reported on its own.
        wait_compiled = getattr(fn, "wait_compiled", None)
        for _ in range(max(cfg.warmup, program.warmup) - 1):
            outputs.append(fn(i))
            i += 1
            on_step()
            if callable(wait_compiled):
                wait_compiled()
        _barrier(outputs[-1], cfg.device)  # no warm-up work may leak into the first repeat
        if callable(wait_compiled):
            wait_compiled()
        for _ in range(cfg.settle):
            outputs.append(fn(i))
            i += 1
            on_step()
        if cfg.settle:
            _barrier(outputs[-1], cfg.device)
        samples = []
        for _ in range(cfg.repeats):
            t0 = time.perf_counter()
            for _ in range(cfg.steps):
                outputs.append(fn(i))
                i += 1
                on_step()
            _barrier(outputs[-1], cfg.device)
            samples.append((time.perf_counter() - t0) / cfg.steps)
        if callable(wait_compiled):
            wait_compiled()  # a regeneration still compiling must not overlap the next run
        result = RunResult(name, mode, "ok", step_time_s=summarize(samples), samples_s=samples,
                           first_call_s=first_call, losses=[_to_float(o) for o in outputs],
                           params=program.param_snapshot())
        if mode in modes_mod.TERRA_MODES:
            result.terra = modes_mod.terra_stats(fn)
            result.terra["measured_phases_ms"] = modes_mod.terra_measured_phases(fn, cfg.repeats * cfg.steps)
        if mode == "torch-compile":
            result.dynamo = modes_mod.dynamo_stats()
            # Dynamo has no portable compile-time counter; first call minus a steady step is an estimate.
            result.dynamo["compile_time_est_s"] = max(first_call - result.step_time_s["median"], 0.0)
        return result
    except Exception as exc:  # a mode failing on one program must not stop the run
        last = traceback.extract_tb(exc.__traceback__)[-1]
        where = f" at {last.filename.rsplit('/', 1)[-1]}:{last.lineno}"
        msg = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        return RunResult(name, mode, "failed", reason=f"{type(exc).__name__}: {msg}{where}")


# The noise floor: eager with one parameter scaled by 1 + NOISE_PERTURBATION.
NOISE_PERTURBATION = 1e-7
# A mode is "within the noise floor" when its differences from eager are at
# most NOISE_FACTOR times the perturbed eager run's (or within rtol/atol).
NOISE_FACTOR = 10.0


def within_noise(k: Dict[str, Any], floor: Dict[str, Any]) -> Optional[bool]:
    """Whether a comparison ``k`` is within NOISE_FACTOR x the noise floor."""
    if not floor or k.get("loss_max_rel") is None or floor.get("loss_max_rel") is None:
        return None
    def fits(key: str, tol: float) -> bool:
        v, f = k.get(key), floor.get(key)
        return v is not None and f is not None and v <= max(NOISE_FACTOR * f, tol)
    return fits("loss_max_rel", k["rtol"]) and fits("param_max_rel", k["rtol"])


def compare(ref: RunResult, other: RunResult, rtol: float, atol: float) -> Dict[str, Any]:
    """Loss trajectory and final parameters of ``other`` vs the eager ``ref``.

    Relative parameter error is per tensor: max |a - b| over max |b|, so
    near-zero entries do not blow it up.
    """
    n = min(len(ref.losses), len(other.losses))
    a, b = np.array(other.losses[:n]), np.array(ref.losses[:n])
    loss_abs = np.abs(a - b)
    loss_rel = loss_abs / np.maximum(np.abs(b), 1e-12)
    ok = bool(n == len(ref.losses) and np.all(np.isfinite(a))
              and np.all(loss_abs <= atol + rtol * np.abs(b)))
    p_abs, p_rel = 0.0, 0.0
    ref_p, oth_p = ref.params or {}, other.params or {}
    if set(ref_p) != set(oth_p):
        ok = False
    for key in ref_p.keys() & oth_p.keys():
        x, y = oth_p[key].double(), ref_p[key].double()
        d = float((x - y).abs().max()) if x.numel() else 0.0
        p_abs = max(p_abs, d)
        p_rel = max(p_rel, d / max(float(y.abs().max()) if y.numel() else 0.0, 1e-12))
        ok = ok and bool(torch.allclose(x, y, rtol=rtol, atol=atol)) and bool(torch.isfinite(x).all())
    clean = lambda v: v if math.isfinite(v) else None  # noqa: E731  (JSON has no NaN)
    return {"ok": ok, "steps_compared": n,
            "loss_max_abs": clean(float(loss_abs.max())) if n else None,
            "loss_max_rel": clean(float(loss_rel.max())) if n else None,
            "param_max_abs": clean(p_abs), "param_max_rel": clean(p_rel), "rtol": rtol, "atol": atol}
