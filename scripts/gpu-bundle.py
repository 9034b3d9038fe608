#!/usr/bin/env python3
"""Build what a GPU machine needs to check the GPU backend (docs/gpu.md).

GPU machines have no MLIR, so the graphs of test/gpu/cases.py are compiled
here (terra-gpu-pipeline, terra-translate, llc, c++ -shared) and travel as
shared libraries with the MLIR-free runner terra-run-object, the CUDA
runtime library and the CUDA runtime tests:

    .gpu-bundle/bin/{terra-run-object,CudaRuntimeTests}
    .gpu-bundle/lib/libTerraCudaRuntime.so
    .gpu-bundle/graphs/<case>.so (and the .mlir it came from)

and the Python front end's native module for the machine's Python 3.12,
built by the portable build (TERRA_PORTABLE: MLIR, LLVM and OpenBLAS linked
in; build-portable/), with the shared libraries it needs beside it, packed
with xz (it is ~150 MB unpacked):

    .gpu-bundle/frontend.tar.xz: python/_terra_native.cpython-312-*.so,
                                 lib/{libTerraCudaRuntime.so, oneDNN, ...},
                                 cuda/nvvm/libdevice/libdevice.10.bc

scripts/gpu-check.sh runs it all there.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "gpu"))
import cases  # noqa: E402


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        sys.exit(f"gpu-bundle: {' '.join(map(str, cmd))} failed:\n{r.stderr}")
    return r.stdout


# Shared libraries the portable module needs that a GPU machine may lack
# (oneDNN for CPU convolutions and what it links).
FRONTEND_LIBS = ("libdnnl.so.2", "libOpenCL.so.1", "libgomp.so.1")
PYTHON312 = "/root/.pyenv/versions/3.12.1/bin/python3.12"


def build_frontend(build: Path, python: str, out: Path):
    """Configures (once) and builds the portable native module for `python`,
    and packs it with its libraries into `out`."""
    if not (build / "build.ninja").exists():
        run(["cmake", "-G", "Ninja", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
             "-DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir", f"-DPython3_EXECUTABLE={python}",
             "-DTERRA_PORTABLE=ON"])
    env = dict(os.environ)
    env.setdefault("CCACHE_BASEDIR", str(ROOT))
    run(["ninja", "-C", build, "_terra_native"], env=env)
    modules = sorted((build / "python").glob("_terra_native.cpython-*.so"))
    if len(modules) != 1:
        sys.exit(f"gpu-bundle: expected one native module in {build / 'python'}, found {modules}")
    libs = [build / "lib" / "libTerraCudaRuntime.so"]
    for name in FRONTEND_LIBS:
        found = [Path(d) / name for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu")
                 if (Path(d) / name).exists()]
        if not found:
            sys.exit(f"gpu-bundle: {name} not found (scripts/install-deps.sh installs it)")
        libs.append(found[0])
    libdevice = Path("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc")
    with tarfile.open(out, "w:xz", preset=6) as tar:
        tar.add(modules[0], f"python/{modules[0].name}")
        for lib in libs:
            tar.add(lib.resolve(), f"lib/{lib.name}")
        # The GPU pipeline links libdevice into kernels that call math
        # functions: for a machine whose toolkit has none (TERRA_CUDA_TOOLKIT).
        if libdevice.exists():
            tar.add(libdevice, "cuda/nvvm/libdevice/libdevice.10.bc")
    print(f"{out.name} ({out.stat().st_size / 2**20:.1f} MiB)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--out", type=Path, default=ROOT / ".gpu-bundle")
    ap.add_argument("--chip", default="sm_90")
    ap.add_argument("--portable-build", type=Path, default=ROOT / "build-portable",
                    help="build folder of the portable native module")
    ap.add_argument("--python", default=PYTHON312,
                    help="the Python the GPU machine runs (its headers build the module)")
    ap.add_argument("--no-frontend", action="store_true",
                    help="leave the front end's native module out")
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
    if not args.no_frontend:
        build_frontend(args.portable_build, args.python, args.out / "frontend.tar.xz")
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"wrote {args.out} ({size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
