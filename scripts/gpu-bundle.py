#!/usr/bin/env python3
"""Build what a GPU machine needs to check the GPU backend (docs/gpu.md).

GPU machines have no MLIR, so the graphs of test/gpu/cases.py are compiled
here (terra-gpu-pipeline, terra-translate, llc, c++ -shared) and travel as
shared libraries with the MLIR-free runner terra-run-object, the CUDA
runtime library and the CUDA runtime tests:

    .gpu-bundle/bin/{terra-run-object,CudaRuntimeTests}
    .gpu-bundle/lib/libTerraCudaRuntime.so
    .gpu-bundle/graphs/<case>.so (and the .mlir it came from)

scripts/gpu-check.sh runs it all there.
"""
import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "gpu"))
import cases  # noqa: E402


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        sys.exit(f"gpu-bundle: {' '.join(map(str, cmd))} failed:\n{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--out", type=Path, default=ROOT / ".gpu-bundle")
    ap.add_argument("--chip", default="sm_90")
    args = ap.parse_args()
    bin_dir = args.build / "bin"
    for tool in ("terra-opt", "terra-translate", "terra-run-object", "CudaRuntimeTests"):
        if not (bin_dir / tool).exists():
            sys.exit(f"gpu-bundle: {bin_dir / tool} is missing: build the project "
                     "(scripts/build.sh) with the CUDA toolkit installed")
    cuda_rt = args.build / "lib" / "libTerraCudaRuntime.so"
    if not cuda_rt.exists():
        sys.exit(f"gpu-bundle: {cuda_rt} is missing (TERRA_ENABLE_CUDA=OFF?)")
    llc = shutil.which("llc-22") or shutil.which("llc")
    cxx = shutil.which("c++")
    if args.out.exists():
        shutil.rmtree(args.out)
    for d in ("bin", "lib", "graphs"):
        (args.out / d).mkdir(parents=True)
    shutil.copy2(bin_dir / "terra-run-object", args.out / "bin")
    shutil.copy2(bin_dir / "CudaRuntimeTests", args.out / "bin")
    shutil.copy2(cuda_rt, args.out / "lib")
    built = set()
    for _, mlir, *_ in cases.CASES:
        stem = cases.library(mlir)
        if stem in built:
            continue
        built.add(stem)
        g = args.out / "graphs" / stem
        g.with_suffix(".mlir").write_text(mlir)
        lowered = run([bin_dir / "terra-opt", g.with_suffix(".mlir"),
                       f"-terra-gpu-pipeline=chip={args.chip}"])
        g.with_suffix(".lowered.mlir").write_text(lowered)
        run([bin_dir / "terra-translate", "--mlir-to-llvmir", g.with_suffix(".lowered.mlir"),
             "-o", g.with_suffix(".ll")])
        run([llc, "-O2", "-filetype=obj", "-relocation-model=pic", g.with_suffix(".ll"),
             "-o", g.with_suffix(".o")])
        run([cxx, "-shared", g.with_suffix(".o"), "-o", g.with_suffix(".so")])
        for suffix in (".lowered.mlir", ".ll", ".o"):
            g.with_suffix(suffix).unlink()
        print(f"graphs/{stem}.so")
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"wrote {args.out} ({size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
