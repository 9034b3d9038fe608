"""Execution modes compared by the harness and how each wraps a training step.

A mode that cannot run here (no ``terra`` package yet, or a torch without
``torch.compile``) is reported as unavailable with a one-line reason instead of
being skipped silently or faked.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Optional

import torch

MODES = ("eager", "terra", "terra-serialized", "torch-compile")
TERRA_MODES = ("terra", "terra-serialized")

# Keys read from terra.stats(fn); the first alias present wins. Totals in seconds.
TERRA_STAT_KEYS: Dict[str, tuple] = {
    "fallbacks": ("fallbacks", "num_fallbacks", "fallback_count"),
    "regenerations": ("regenerations", "num_regenerations", "regeneration_count"),
    "tracing_iterations": ("tracing_iterations", "traced_iterations", "num_traces"),
    "compile_time_s": ("compile_time_s", "compile_time", "compile_seconds"),
    "host_exec_s": ("host_exec_s", "python_exec_s", "host_exec"),
    "host_stall_s": ("host_stall_s", "python_stall_s", "host_stall"),
    "graph_exec_s": ("graph_exec_s", "graph_exec"),
    "graph_stall_s": ("graph_stall_s", "graph_stall"),
}
PHASES = ("host_exec_s", "host_stall_s", "graph_exec_s", "graph_stall_s")


@dataclass
class ModeInfo:
    name: str
    available: bool
    reason: str = ""


# The repository's own front end (python/terra), used when terra is not installed.
IN_TREE_PYTHON = Path(__file__).resolve().parents[2] / "python"


def _import_terra() -> Any:
    try:
        return importlib.import_module("terra")
    except ImportError:
        if (IN_TREE_PYTHON / "terra").is_dir() and str(IN_TREE_PYTHON) not in sys.path:
            sys.path.insert(0, str(IN_TREE_PYTHON))
            return importlib.import_module("terra")
        raise


def probe(mode: str) -> ModeInfo:
    """Decide once per run whether ``mode`` can run in this interpreter, and why not."""
    if mode == "eager":
        return ModeInfo(mode, True)
    if mode in TERRA_MODES:
        try:
            terra = _import_terra()
        except Exception as exc:  # ImportError, or a broken native extension
            return ModeInfo(mode, False, f"`import terra` failed ({type(exc).__name__}: {exc}); "
                                         "build the Terra Python front end and put it on PYTHONPATH")
        if not callable(getattr(terra, "function", None)):
            where = getattr(terra, "__file__", None) or "?"
            return ModeInfo(mode, False, f"the `terra` package found at {where} has no "
                                         "terra.function() yet")
        return ModeInfo(mode, True)
    if mode == "torch-compile":
        if not hasattr(torch, "compile"):
            return ModeInfo(mode, False, f"torch {torch.__version__} has no torch.compile "
                                         "(added in torch 2.0)")
        return ModeInfo(mode, True)
    raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")


def reset(mode: str) -> None:
    """Forget compiled state between programs so each mode starts cold."""
    if mode == "torch-compile":
        try:
            import torch._dynamo as dynamo
            from torch._dynamo.utils import counters
        except ImportError:  # torch < 2.0: nothing to reset
            return
        dynamo.reset()
        counters.clear()


def wrap(mode: str, step: Callable[[int], Any], compile_backend: str = "inductor",
         device: str = "cpu") -> Callable[[int], Any]:
    """The single decorator line each mode applies to the program's step
    (terra's graph runs on the program's device: `device="cuda"` on a GPU)."""
    if mode == "eager":
        return step
    on_gpu = {"device": "cuda"} if str(device).startswith("cuda") else {}
    if mode == "terra":
        return _import_terra().function(step, **on_gpu)
    if mode == "terra-serialized":
        return _import_terra().function(step, serialized=True, **on_gpu)
    if mode == "torch-compile":
        return torch.compile(step, backend=compile_backend)
    raise ValueError(f"unknown mode {mode!r}")


def _as_dict(raw: Any) -> Dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return dict(raw)
    if hasattr(raw, "_asdict"):
        return dict(raw._asdict())
    if hasattr(raw, "__dataclass_fields__"):
        import dataclasses
        return dataclasses.asdict(raw)
    return {k: v for k, v in vars(raw).items() if not k.startswith("_")} if hasattr(raw, "__dict__") else {}


def terra_stats(fn: Callable) -> Dict[str, Any]:
    """Normalize ``terra.stats(fn)`` (dict or object) to the keys in TERRA_STAT_KEYS.

    Missing keys stay absent (reported as n/a); ``raw`` keeps everything terra
    returned, stringified where it is not JSON-friendly.
    """
    terra = _import_terra()
    stats_fn: Optional[Callable] = getattr(terra, "stats", None)
    if stats_fn is None:
        return {"error": "terra has no terra.stats()"}
    raw = _as_dict(stats_fn(fn))
    out: Dict[str, Any] = {}
    for key, aliases in TERRA_STAT_KEYS.items():
        for alias in aliases:
            if isinstance(raw.get(alias), (int, float)):
                out[key] = float(raw[alias]) if key.endswith("_s") else int(raw[alias])
                break
    out["raw"] = {k: v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)
                  for k, v in raw.items()}
    return out


def terra_measured_phases(fn: Callable, n: int) -> Dict[str, float]:
    """terra's phases in milliseconds per step, averaged over the last ``n``
    calls (the measured ones): ``terra.stats(fn)["steps"]`` has one entry per
    call, and the totals would also count warm-up and recording iterations."""
    raw = _as_dict(_import_terra().stats(fn))
    steps = raw.get("steps")
    if not isinstance(steps, list) or not steps or n <= 0:
        return {}
    last = steps[-n:]
    return {p: sum(float(s.get(p, 0.0)) for s in last) / len(last) * 1e3 for p in PHASES}


def dynamo_stats() -> Dict[str, Any]:
    """Graph breaks / unique graphs / recompiles from TorchDynamo's counters."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return {"error": "torch._dynamo.utils.counters not available"}
    breaks = counters["graph_break"]
    return {
        "graph_breaks": int(sum(breaks.values())),
        "graph_break_reasons": [str(r)[:160] for r in list(breaks)[:5]],
        "unique_graphs": int(counters["stats"]["unique_graphs"]),
        "recompiles": int(sum(counters["recompiles"].values())),
    }
