"""results.json and results.md from one harness run.

The JSON document is the source of truth; the markdown and the charts are
rendered from it, so a results.json can be re-rendered later.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

import torch

from .measure import RunConfig, RunResult
from .modes import PHASES, ModeInfo

NA = "n/a"


def cpu_model() -> str:
    """CPU model name (Linux), else whatever ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def blas_info() -> str:
    """torch's BLAS backend ("generic" = reference BLAS, which makes matmuls slow)."""
    match = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    return match.group(1) if match else "unknown"


def machine_info(threads: int) -> Dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "torch": torch.__version__,
        "platform": platform.platform(),
        "processor": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": threads,
        "blas": blas_info(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def build_document(cfg: RunConfig, programs: List[str], modes: List[str], infos: Dict[str, ModeInfo],
                   results: Iterable[RunResult], threads: int) -> Dict[str, Any]:
    return {
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(threads),
        "config": {"size": cfg.size, "device": cfg.device, "seed": cfg.seed, "steps": cfg.steps,
                   "warmup": cfg.warmup, "repeats": cfg.repeats, "rtol": cfg.rtol, "atol": cfg.atol,
                   "compile_backend": cfg.compile_backend},
        "programs": programs,
        "modes": {m: {"available": infos[m].available, "reason": infos[m].reason} for m in modes},
        "results": [r.to_dict() for r in results],
    }


def _json_safe(obj: Any) -> Any:
    """NaN/inf (e.g. a diverged loss) become null: strict JSON has no such numbers."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def write_json(doc: Dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(_json_safe(doc), indent=2, allow_nan=False) + "\n")


# ------------------------------------------------------------------ markdown


def _fmt(x: Optional[float], spec: str = ".3g", scale: float = 1.0) -> str:
    return NA if x is None else format(x * scale, spec)


def _index(doc: Dict[str, Any]) -> Dict[tuple, Dict[str, Any]]:
    return {(r["program"], r["mode"]): r for r in doc["results"]}


def phase_ms(entry: Dict[str, Any]) -> Dict[str, Optional[float]]:
    """terra's phases in milliseconds per measured step (None where terra did not report one);
    from the totals over all calls where the per-step phases are missing."""
    terra = entry.get("terra") or {}
    measured = terra.get("measured_phases_ms")
    if isinstance(measured, dict) and measured:
        return {p: measured.get(p) for p in PHASES}
    calls = max(len(entry.get("losses") or []), 1)
    return {p: (terra[p] / calls * 1e3 if isinstance(terra.get(p), (int, float)) else None) for p in PHASES}


def _table(header: List[str], rows: List[List[str]]) -> List[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines + [""]


def render_markdown(doc: Dict[str, Any]) -> str:
    idx = _index(doc)
    programs, modes = doc["programs"], list(doc["modes"])
    m, c = doc["machine"], doc["config"]
    out = ["# Terra-MLIR benchmark results", "",
           f"Generated {doc['generated']} on {m['platform']} ({m['processor']}, {m['cpu_count']} CPUs, "
           f"{m['torch_threads']} torch threads{', GPU ' + m['cuda'] if m.get('cuda') else ''}), "
           f"Python {m['python']}, torch {m['torch']} (BLAS: {m.get('blas', 'unknown')}).",
           f"Size `{c['size']}`, device `{c['device']}`, seed {c['seed']}: {c['warmup']} warm-up steps "
           "(or a program's own minimum, `Program.warmup`), waiting for terra's compiler after each, "
           f"then {c['repeats']} repeats of {c['steps']} measured steps. Each mode starts from a freshly "
           "built, identically seeded program.", ""]

    out += ["## Modes", ""]
    out += _table(["mode", "available", "reason"],
                  [[k, "yes" if v["available"] else "no", v["reason"] or ""]
                   for k, v in doc["modes"].items()])

    def cell(p: str, mode: str, fn) -> str:
        r = idx.get((p, mode))
        if r is None or r["status"] != "ok":
            return NA
        return fn(r)

    out += ["## Step time (ms per step: median [min-max] over repeats)", ""]
    out += _table(["program"] + modes, [[p] + [cell(p, mode, lambda r: (
        f"{r['step_time_s']['median'] * 1e3:.2f} [{r['step_time_s']['min'] * 1e3:.2f}-"
        f"{r['step_time_s']['max'] * 1e3:.2f}]")) for mode in modes] for p in programs])

    out += ["## Speedup vs eager (eager median / mode median; >1 is faster)", ""]
    out += _table(["program"] + modes, [[p] + [cell(p, mode, lambda r: _fmt(r["speedup"], ".2f") + "x"
                                                    if r["speedup"] is not None else NA)
                                               for mode in modes] for p in programs])

    out += ["## Correctness vs eager (loss trajectory and final parameters)", ""]
    rows = []
    for p in programs:
        for mode in modes:
            r = idx.get((p, mode))
            if mode == "eager" or r is None or r["status"] != "ok" or not r["correctness"]:
                continue
            k = r["correctness"]
            wn = k.get("within_noise")
            rows.append([p, mode, "yes" if k["ok"] else "**NO**", _fmt(k["loss_max_abs"]),
                         _fmt(k["loss_max_rel"]), _fmt(k["param_max_abs"]), _fmt(k["param_max_rel"]),
                         _fmt(k.get("noise_floor_loss_rel")), _fmt(k.get("noise_floor_param_rel")),
                         NA if wn is None else ("yes" if wn else "**NO**")])
    out += (_table(["program", "mode", f"within rtol={c['rtol']} atol={c['atol']}", "loss max abs",
                    "loss max rel", "param max abs", "param max rel", "noise floor loss rel",
                    "noise floor param rel", "within 10x noise floor"], rows)
            if rows else ["No mode other than eager ran, so there is nothing to compare (n/a).", ""])
    if rows:
        out += ["The noise floor is eager PyTorch rerun with one parameter scaled by 1 + 1e-7: how far",
                "rounding-sized differences carry in each program over the same steps. A mode whose",
                "differences stay within 10x that floor (or within the fixed tolerance) is as close to",
                "eager as eager is to itself under rounding noise.", ""]

    out += ["## Compilation, fallbacks and regenerations", ""]
    rows = []
    for p in programs:
        for mode in modes:
            r = idx.get((p, mode))
            if mode == "eager" or r is None or r["status"] != "ok":
                continue
            t, d = r.get("terra") or {}, r.get("dynamo") or {}
            compile_s = t.get("compile_time_s", d.get("compile_time_est_s"))
            rows.append([p, mode, _fmt(r["first_call_s"], ".3f"),
                         _fmt(compile_s, ".3f") + (" (est.)" if "compile_time_est_s" in d else ""),
                         str(t.get("fallbacks", NA)), str(t.get("regenerations", NA)),
                         str(t.get("tracing_iterations", NA)), str(d.get("graph_breaks", NA)),
                         str(d.get("recompiles", NA))])
    out += (_table(["program", "mode", "first call (s)", "compile (s)", "fallbacks", "regenerations",
                    "traced iters", "graph breaks", "recompiles"], rows)
            if rows else ["n/a: neither terra nor torch.compile ran (see Modes).", ""])

    out += ["## Phase breakdown (terra, ms per measured step)", ""]
    rows = []
    for p in programs:
        for mode in modes:
            r = idx.get((p, mode))
            if r is None or r["status"] != "ok" or not r.get("terra"):
                continue
            ph = phase_ms(r)
            rows.append([p, mode] + [_fmt(ph[k], ".2f") for k in PHASES])
    out += (_table(["program", "mode", "host exec", "host stall", "graph exec", "graph stall"], rows)
            if rows else ["n/a: terra did not run (see Modes), so there are no runner phases to report.", ""])

    out += ["## Coverage", ""]
    notes: List[str] = []
    rows = []
    for p in programs:
        row = [p]
        for mode in modes:
            r = idx.get((p, mode))
            if r is None:
                row.append("not run")
            elif r["status"] == "ok":
                bad = r["correctness"] and not r["correctness"].get("ok", True)
                row.append("ran (mismatch)" if bad else "ran")
            elif r["status"] == "unavailable":
                row.append("unavailable")
            else:
                notes.append(f"{p} / {mode}: {r['status']}: {r['reason']}")
                row.append(f"{r['status']} [{len(notes)}]")
        rows.append(row)
    out += _table(["program"] + modes, rows)
    out += [f"[{i}] {n}" for i, n in enumerate(notes, 1)] + ([""] if notes else [])
    unavailable = [f"- `{k}`: {v['reason']}" for k, v in doc["modes"].items() if not v["available"]]
    if unavailable:
        out += ["Unavailable modes:", ""] + unavailable + [""]
    return "\n".join(out).rstrip() + "\n"
