#!/usr/bin/env python3
"""Run the GPU graphs of cases.py on a GPU and compare them with torch CUDA.

Runs on a GPU machine (scripts/gpu-check.sh) with the bundle built here by
scripts/gpu-bundle.py: each case's library runs under
`terra-run-object --device cuda` on seeded inputs, once with device memory
(copies in and out) and once with managed memory, and every fetch is
compared with the case's reference computed by torch on the GPU.
Exit status 1 if any case fails.
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cases  # noqa: E402


def check(bundle: Path, case, workdir: Path, seed: int, memory: str):
    name, mlir, feeds, decisions, reference, rtol, atol = case
    stem = cases.library(mlir)
    rng = np.random.default_rng(seed)
    args = [str(bundle / "bin" / "terra-run-object"), str(bundle / "graphs" / f"{stem}.so"),
            "--device", "cuda", "--memory", memory, "--fetch-dir", str(workdir),
            "--timing", "--repeat", "3"]
    values = {}
    for fid, (shape, dtype) in feeds.items():
        values[fid] = rng.standard_normal(shape).astype(dtype)
        path = workdir / f"feed{fid}.npy"
        np.save(path, values[fid])
        args += ["--feed", f"{fid}={path}"]
    args += decisions
    t0 = time.perf_counter()
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - t0
    result = {"case": name, "memory": memory, "wall_s": round(wall, 3),
              "runs_s": [float(line.split()[2]) for line in r.stdout.splitlines()
                         if line.startswith("run ")]}
    if r.returncode:
        result.update(ok=False, error=(r.stderr or r.stdout).strip()[-2000:])
        return result
    expected = reference({k: torch.from_numpy(v).cuda() for k, v in values.items()})
    worst = {}
    ok = True
    for fid, ref in expected.items():
        path = workdir / f"{fid}_1.npy"
        if not path.exists():
            ok = False
            worst[fid] = "not fetched"
            continue
        got = np.load(path)
        want = ref.detach().cpu().numpy()
        if got.shape != want.shape:
            ok = False
            worst[fid] = f"shape {got.shape} != {want.shape}"
            continue
        err = float(np.max(np.abs(got.astype(np.float64) - want))) if got.size else 0.0
        close = np.allclose(got, want, rtol=rtol, atol=atol)
        ok = ok and bool(close)
        worst[fid] = {"max_abs_err": err, "ok": bool(close)}
    result.update(ok=ok, fetches=worst)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", type=Path, default=Path(".gpu-bundle"))
    ap.add_argument("--json", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--memory", default="device,managed",
                    help="terra-run-object --memory kinds to run, comma-separated")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("check_graphs: torch sees no GPU")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    results = []
    for memory in args.memory.split(","):
        for case in cases.CASES:
            with tempfile.TemporaryDirectory() as d:
                try:
                    res = check(args.bundle, case, Path(d), args.seed, memory)
                except subprocess.TimeoutExpired:
                    res = {"case": case[0], "memory": memory, "ok": False,
                           "error": "timed out after 120 s"}
            results.append(res)
            status = "ok  " if res["ok"] else "FAIL"
            detail = res.get("error") or json.dumps(res.get("fetches"))
            print(f"{status} {res['case']} ({memory} memory): {detail}  runs {res.get('runs_s')}",
                  flush=True)
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(),
                                         "torch": torch.__version__,
                                         "cases": results}, indent=1))
    failed = [f"{r['case']} ({r['memory']})" for r in results if not r["ok"]]
    print(f"{len(results) - len(failed)} of {len(results)} runs match torch CUDA"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
