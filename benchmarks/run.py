#!/usr/bin/env python3
"""Benchmark harness: time the ten programs under eager, terra and torch.compile.

Run from the repository root as ``/usr/bin/python3 benchmarks/run.py`` or
``python -m benchmarks.run``. Every (program, mode) pair starts from a freshly
built, identically seeded program; the harness reports step-time medians and
spread, speedups over eager, a loss/parameter correctness check against eager,
terra's fallback/regeneration/compile statistics and runner phase breakdown,
and a coverage table, into results.json, results.md and PNG charts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

if __package__ in (None, ""):  # executed as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from benchmarks.harness import charts, report  # noqa: E402
from benchmarks.harness import modes as modes_mod  # noqa: E402
from benchmarks.harness.measure import (NOISE_PERTURBATION, RunConfig, RunResult, compare,  # noqa: E402
                                        run_one, within_noise)
from benchmarks.harness.progress import Progress  # noqa: E402
from benchmarks.programs import NAMES, PROGRAMS, SIZES  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "results"


def _csv(choices: tuple, what: str):
    def parse(text: str) -> List[str]:
        items = [t.strip() for t in text.split(",") if t.strip()]
        if text.strip() == "all":
            return list(choices)
        bad = [t for t in items if t not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {bad or text!r}; choose from {', '.join(choices)}")
        return list(dict.fromkeys(items))
    return parse


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="benchmarks/run.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--programs", type=_csv(NAMES, "program"), default="all",
                    help=f"comma list or 'all' of: {', '.join(NAMES)}")
    ap.add_argument("--modes", type=_csv(modes_mod.MODES, "mode"), default="all",
                    help=f"comma list or 'all' of: {', '.join(modes_mod.MODES)} "
                         "(eager always runs as the baseline)")
    ap.add_argument("--size", choices=SIZES, default="small")
    ap.add_argument("--steps", type=int, default=10, help="measured steps per repeat")
    ap.add_argument("--warmup", type=int, default=3,
                    help="unmeasured steps first; at least the first call (compilation) is never timed")
    ap.add_argument("--settle", type=int, default=2,
                    help="unmeasured steps after terra's compiler is done (its first co-executed steps "
                         "record what later steps replay); every mode runs them")
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats of --steps steps")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="directory for results.json/.md and PNGs")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch.set_num_threads; None keeps torch's default")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rtol", type=float, default=1e-3, help="correctness tolerance vs eager")
    ap.add_argument("--atol", type=float, default=1e-5, help="correctness tolerance vs eager")
    ap.add_argument("--compile-backend", default="inductor", help="torch.compile backend")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 if an available mode fails or disagrees with eager")
    args = ap.parse_args(argv)
    for flag in ("steps", "repeats"):
        if getattr(args, flag) < 1:
            ap.error(f"--{flag} must be >= 1")
    if args.warmup < 0 or args.settle < 0:
        ap.error("--warmup and --settle must be >= 0")
    if "eager" not in args.modes:
        args.modes.insert(0, "eager")
    else:
        args.modes.sort(key=lambda m: m != "eager")
    return args


def run(args: argparse.Namespace) -> Dict[str, object]:
    """Run every selected (program, mode) pair and write the artifacts; returns the JSON document."""
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = RunConfig(size=args.size, device=args.device, seed=args.seed, steps=args.steps,
                    warmup=args.warmup, settle=args.settle, repeats=args.repeats, rtol=args.rtol,
                    atol=args.atol,
                    compile_backend=args.compile_backend)
    infos = {m: modes_mod.probe(m) for m in args.modes}
    per_run = max(cfg.warmup, 1) + cfg.settle + cfg.steps * cfg.repeats
    runnable = [m for m in args.modes if infos[m].available]
    bar = Progress(per_run * len(runnable) * len(args.programs), enabled=not args.no_progress)
    for m in args.modes:
        if not infos[m].available:
            bar.message(f"mode {m}: unavailable: {infos[m].reason}")

    results: List[RunResult] = []
    for name in args.programs:
        eager: Optional[RunResult] = None
        for mode in args.modes:
            if not infos[mode].available:
                results.append(RunResult(name, mode, "unavailable", reason=infos[mode].reason))
                continue
            bar.set_label(f"{name}/{mode}")
            before = bar.done
            res = run_one(PROGRAMS[name], mode, cfg, on_step=bar.advance)
            bar.advance(before + per_run - bar.done)  # a failed run still uses up its share
            if res.status == "failed":
                bar.message(f"{name}/{mode}: failed: {res.reason}")
            if mode == "eager":
                eager = res
                noise: Dict[str, Any] = {}
                if res.status == "ok" and len(args.modes) > 1:
                    # How far rounding-sized differences carry in this program.
                    floor = run_one(PROGRAMS[name], "eager", cfg, perturb=NOISE_PERTURBATION)
                    if floor.status == "ok":
                        noise = compare(eager, floor, cfg.rtol, cfg.atol)
                    res.correctness = {"noise_floor": noise}
            elif res.status == "ok" and eager is not None and eager.status == "ok":
                res.speedup = eager.step_time_s["median"] / res.step_time_s["median"]
                res.correctness = compare(eager, res, cfg.rtol, cfg.atol)
                floor = (eager.correctness or {}).get("noise_floor") or {}
                res.correctness["noise_floor_param_rel"] = floor.get("param_max_rel")
                res.correctness["noise_floor_loss_rel"] = floor.get("loss_max_rel")
                res.correctness["within_noise"] = within_noise(res.correctness, floor)
            if mode == "eager" and res.status == "ok":
                res.speedup = 1.0
            results.append(res)
    bar.close()

    threads = torch.get_num_threads()
    doc = report.build_document(cfg, list(args.programs), list(args.modes), infos, results, threads)
    args.out.mkdir(parents=True, exist_ok=True)
    report.write_json(doc, args.out / "results.json")
    (args.out / "results.md").write_text(report.render_markdown(doc))
    charts.write_all(doc, args.out)
    return doc


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    doc = run(args)
    md = report.render_markdown(doc)
    section = md.split("## Speedup")[0].split("## Step time")[-1]
    print("## Step time" + section.rstrip())
    print(f"\nwrote {args.out / 'results.json'}, results.md, speedup.png, step_time.png, phases.png")
    if args.strict:
        bad = [r for r in doc["results"] if r["status"] == "failed"
               or (r["correctness"] and not r["correctness"].get("ok", True))]
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
