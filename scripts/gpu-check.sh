#!/bin/bash
# The GPU machine's checks (docs/gpu.md "Carrying a build to a GPU machine").
# Runs there, from the repository root, with .gpu-bundle (scripts/gpu-bundle.py)
# carried. Logs and JSON go to $L and are packed into $OUT/check.tgz after
# each part (a device run returns at most 8 files); the console output is
# the summary. Each part has its own time limit,
# and the whole stays inside GPU_CHECK_BUDGET_S (default 480) so a device
# lease is not overrun; benchmark results are written after each program.
#   1. the CUDA runtime tests (Device.* must pass, not skip);
#   2. the GPU graphs of test/gpu/cases.py against torch CUDA;
#   3. per-kernel time and DRAM bytes of the pointwise graph under ncu, and
#      the GEMM graph's cuBLAS kernel against torch.mm;
#   3c. terra on device="cuda" on two benchmark programs (eager vs terra);
#   3d. ncu over two co-executed steps of DCGAN under terra: time per kernel;
#   4. the benchmark suite, full size, eager and torch.compile.
# The hook part builds the dispatch hook for the machine's torch (below).
# Part 0 comes first: the Python front end's tests on the machine's torch
# 2.x (CPU graphs), with the portable native module of frontend.tar.xz.
set -u
OUT=${OUT:-/tmp/gpu-check}
L=/tmp/gpu-check-logs
mkdir -p "$OUT" $L
packlogs() { tar czf "$OUT/check.tgz" -C $L . 2>/dev/null; }
BUDGET=${GPU_CHECK_BUDGET_S:-480}
START=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - START))); }
B=.gpu-bundle
export PYTHONUNBUFFERED=1
# A crash on the graph runner's thread prints its native stack
# (python/src/CrashTrace.cpp) into native-backtrace.log (pytest captures
# stderr), before faulthandler's Python stacks.
export TERRA_NATIVE_BACKTRACE=$L/native-backtrace.log
# GPU_CHECK_PARTS picks parts (a follow-up run repeats only what changed).
want() { case " ${GPU_CHECK_PARTS:-hook 0 1 2 3 3b 3c 3d 4} " in *" $1 "*) return 0 ;; esac; return 1; }

echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
# Whether the dispatch hook (python/src/DispatchHook.cpp, the tape replay's
# fast path) could be built here for this torch: a C++ compiler and torch's
# headers (the bundle's hook is built for Debian's torch 1.13, so torch
# 2.x runs the Python fallback: DCGAN's host side took 26 ms of a step).
echo "c++: $(command -v c++ g++ clang++ 2>/dev/null | head -1 || true)"
python3 -c "import os, torch; d = os.path.join(os.path.dirname(torch.__file__), 'include', 'torch', 'extension.h'); print('torch headers:', os.path.exists(d))"
# cuBLAS for the graphs' GEMMs: the toolkit's, else the one torch ships.
CUBLAS_DIR=$(dirname "$( (ls /usr/local/cuda/lib64/libcublas.so.13* 2>/dev/null;
  python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null |
  xargs -I{} find {} -name 'libcublas.so.13*' 2>/dev/null) | head -1)")
echo "cublas: $CUBLAS_DIR"
# cuDNN for the graphs' convolutions, likewise (torch's process has it
# loaded already; terra-run-object needs the path).
CUDNN_DIR=$(dirname "$( (ls /usr/local/cuda/lib64/libcudnn.so.9* 2>/dev/null;
  python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null |
  xargs -I{} find {} -name 'libcudnn.so.9*' 2>/dev/null) | head -1)")
echo "cudnn: $CUDNN_DIR"
export LD_LIBRARY_PATH=$PWD/$B/lib:$CUBLAS_DIR:$CUDNN_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

echo "== 0. front end on torch $(python3 -c 'import torch; print(torch.__version__)') (CPU graphs)"
# The portable module (MLIR/LLVM inside) unpacked where TERRA_BUILD_DIR
# points; the front-end tests that need no command-line tools (terra-opt
# and terra-run link libMLIR.so, which is not here).
FRONTEND=/tmp/terra-frontend
FRONTEND_TESTS=${GPU_CHECK_FRONTEND_TESTS:-"test_device.py test_function.py test_loops.py test_spec_conformance.py test_state.py test_tape.py test_sizes.py test_host_rng.py test_native_settings.py test_benchmark_programs.py test_main_job.py"}
if [ -f $B/frontend.tar.xz ]; then
  mkdir -p $FRONTEND && tar xJf $B/frontend.tar.xz -C $FRONTEND
  # libdevice for the kernels the front end compiles here, if the machine's
  # toolkit has none.
  [ -f /usr/local/cuda/nvvm/libdevice/libdevice.10.bc ] || export TERRA_CUDA_TOOLKIT=$FRONTEND/cuda
  echo "libdevice: ${TERRA_CUDA_TOOLKIT:-/usr/local/cuda}"
fi

# The tape replay's dispatch hook (python/src/DispatchHook.cpp) for this
# machine's torch: the bundle's is built for Debian's torch 1.13 and is not
# loaded under another version (python/terra/native.py), leaving the
# replay on torch's Python fallback. Built here when a C++ compiler,
# Python's and torch's headers exist, then checked by its own tests; a
# hook that fails them is removed again.
if want hook && [ -d $FRONTEND/python ]; then
  echo "== hook. the dispatch hook for torch $(python3 -c 'import torch; print(torch.__version__)')"
  read -r PYINC TD ABI SUF < <(python3 -c "import os, sysconfig, torch
print(sysconfig.get_paths()['include'], os.path.dirname(torch.__file__), int(torch._C._GLIBCXX_USE_CXX11_ABI), sysconfig.get_config_var('EXT_SUFFIX'))")
  HOOK=$FRONTEND/python/_terra_dispatch$SUF
  if [ ! -f "$PYINC/Python.h" ]; then
    echo "no Python.h in $PYINC: not built"
  else
    for std in c++17 c++20; do
      timeout 240 c++ -O2 -std=$std -shared -fPIC -fvisibility=hidden -fexceptions -frtti -w \
        -D_GLIBCXX_USE_CXX11_ABI=$ABI -I"$PYINC" -isystem "$TD/include" \
        -isystem "$TD/include/torch/csrc/api/include" python/src/DispatchHook.cpp \
        -L"$TD/lib" -ltorch_python -ltorch_cpu -lc10 -Wl,-rpath,"$TD/lib" -o "$HOOK" \
        > "$L/hook-build-$std.log" 2>&1 && break
      echo "-std=$std failed: $(grep -m3 'error' "$L/hook-build-$std.log")"
    done
    if [ -f "$HOOK" ]; then
      # Every symbol this torch does not export (session 31: torch 2.11's
      # libtorch_python has no THPSize_NewFromSizes), not just the first.
      LD_LIBRARY_PATH="$TD/lib:${LD_LIBRARY_PATH:-}" ldd -r "$HOOK" 2>&1 | grep "undefined symbol" |
        grep -v "Py\|_Py" | c++filt | head -20
      python3 -c "import torch; print(torch.__version__)" > $FRONTEND/python/_terra_dispatch.torch-version
      (cd test/python && TERRA_BUILD_DIR=$FRONTEND timeout 120 python3 -m pytest test_dispatch_hook.py \
        -q -p no:cacheprovider -x > "$L/hook-tests.log" 2>&1)
      rc=$?
      tail -3 "$L/hook-tests.log"
      if [ $rc -ne 0 ]; then
        echo "hook tests failed (rc=$rc): removed"
        rm -f "$HOOK" $FRONTEND/python/_terra_dispatch.torch-version
      else
        echo "hook built ($(left) s left)"
      fi
    fi
  fi
fi
if ! want 0; then
  echo "skipped"
elif [ -f $B/frontend.tar.xz ]; then
  T=${GPU_CHECK_FRONTEND_S:-150}
  # CPU-bound: it runs beside parts 1-3b (GPU kernels timed by ncu, which
  # the host's load does not change) and is waited for before part 3c.
  # One line per failure (--tb=line), and a summary even when many fail
  # (--maxfail); beside it, the first failure of test_function.py in full.
  # SIGINT at the limit: pytest still prints the failures it saw.
  (cd test/python && TERRA_BUILD_DIR=$FRONTEND TERRA_GRAPH_THREADS=2 timeout -s INT -k 20 $T python3 -m pytest \
    $FRONTEND_TESTS -q -rf --tb=line --maxfail 60 -p no:cacheprovider -n 9 --timeout 60 \
    > "$L/frontend-tests.log" 2>&1; echo "rc=$?" >> "$L/frontend-tests.log") &
  (cd test/python && TERRA_BUILD_DIR=$FRONTEND TERRA_GRAPH_THREADS=1 timeout $T python3 -m pytest \
    test_function.py -x -q -p no:cacheprovider -p no:xdist --tb=long > "$L/frontend-first-failure.log" 2>&1) &
  # Every failure of the CUDA co-execution tests in full.
  (cd test/python && TERRA_BUILD_DIR=$FRONTEND TERRA_GRAPH_THREADS=2 timeout -s INT -k 20 $T python3 -m pytest \
    test_device.py -q -p no:cacheprovider -p no:xdist --tb=short > "$L/frontend-device.log" 2>&1) &
  # Session 15 saw this test crash its worker while compiling on torch
  # 2.11: a native backtrace (gdb when the machine has it).
  CRASH_TEST=${GPU_CHECK_CRASH_TEST:-"test_tape.py::test_replaying_gives_bit_for_bit_what_recording_gives"}
  GDB=$(command -v gdb >/dev/null && echo "gdb -batch -ex run -ex bt --args" || echo "")
  # (Session 19 saw it print nothing in 150 s: every thread's stack when
  # it runs that long.)
  (cd test/python && TERRA_BUILD_DIR=$FRONTEND timeout $T $GDB python3 -X faulthandler -m pytest \
    "$CRASH_TEST" -v -p no:cacheprovider -p no:xdist --tb=long -o faulthandler_timeout=$((T - 30)) \
    > "$L/frontend-crash-probe.log" 2>&1) &
  FRONTEND_PID=$!
  echo "started in the background"
else
  echo "no $B/frontend.tar.xz (scripts/gpu-bundle.py without --no-frontend builds it)"
fi

packlogs
echo "== 1. CUDA runtime tests"
want 1 && timeout 120 $B/bin/CudaRuntimeTests 2>&1 | tee "$L/runtime-tests.log" | grep -E "^\[  (PASSED|FAILED|SKIPPED) |OK \] Device|FAILED|Skipped|error" | head -40

packlogs
echo "== 2. GPU graphs vs torch CUDA"
want 2 && timeout 150 python3 test/gpu/check_graphs.py --bundle $B --json "$L/graphs.json" 2>&1 | tee "$L/graphs.log"

packlogs
echo "== 3. ncu: the pointwise graph's kernels (time, DRAM bytes), device then managed memory"
if want 3 && command -v ncu >/dev/null && [ "$(left)" -gt 300 ]; then
  python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(0)
np.save("/tmp/pw_x.npy", rng.standard_normal((8192, 4096)).astype("float32"))
np.save("/tmp/pw_y.npy", rng.standard_normal((4096,)).astype("float32"))
PY
  for mem in device managed; do
    timeout 90 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
      --csv $B/bin/terra-run-object $B/graphs/pointwise.so --device cuda --memory $mem \
      --feed 1=/tmp/pw_x.npy --feed 2=/tmp/pw_y.npy --repeat 2 > "$L/ncu-pointwise-$mem.csv" 2>> "$L/ncu.err"
    echo "ncu ($mem memory) rc=$?"; grep -v '^==PROF==' "$L/ncu-pointwise-$mem.csv" | grep step_kernel | tail -6
  done
  tail -3 "$L/ncu.err"
fi

packlogs
echo "== 3b. GEMM 2048^3 f32: the graph's cuBLAS call (ncu) against torch.mm"
if want 3b && command -v ncu >/dev/null && [ "$(left)" -gt 200 ]; then
  python3 - <<'PY' 2>&1 | tee "$L/gemm.log"
import numpy as np, torch
rng = np.random.default_rng(0)
a = rng.standard_normal((2048, 2048)).astype("float32")
b = rng.standard_normal((2048, 2048)).astype("float32")
np.save("/tmp/gm_a.npy", a); np.save("/tmp/gm_b.npy", b)
x, y = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
for _ in range(5):
    x @ y
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
times = []
for _ in range(20):
    start.record(); x @ y; end.record(); end.synchronize()
    times.append(start.elapsed_time(end))
ms = sorted(times)[len(times) // 2]
print(f"torch.mm: {ms:.3f} ms, {2 * 2048 ** 3 / ms / 1e9:.1f} TFLOP/s (median of 20)")
PY
  timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum --csv $B/bin/terra-run-object $B/graphs/gemm.so \
    --device cuda --feed 1=/tmp/gm_a.npy --feed 2=/tmp/gm_b.npy --repeat 3 > "$L/ncu-gemm.csv" 2>> "$L/ncu.err"
  echo "ncu (gemm) rc=$?"
  python3 - "$L/ncu-gemm.csv" <<'PY' 2>&1 | tee -a "$L/gemm.log"
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 14 and r[12] == "gpu__time_duration.sum"]
for r in rows:
    ns = float(r[14].replace(",", ""))
    print(f"{r[4][:60]}: {ns / 1e6:.3f} ms, {2 * 2048 ** 3 / ns / 1e3:.1f} TFLOP/s")
PY
fi

if [ -n "${FRONTEND_PID:-}" ]; then
  wait
  echo "== 0. front-end tests (background) done ($(left) s left)"
  grep -E "^rc=|passed|failed|error" "$L/frontend-tests.log" | tail -25
fi
# Native stacks of crashed test processes (TERRA_NATIVE_BACKTRACE above):
# symbolize with addr2line against the bundle's build-portable module.
if [ -s "$L/native-backtrace.log" ]; then
  echo "== native backtraces"
  head -80 "$L/native-backtrace.log"
fi
packlogs
echo "== 3c. terra on device=\"cuda\": benchmark programs at full size, eager vs terra ($(left) s left)"
# The first co-executed programs on a GPU (test_device.py passed in part 0
# first): GPU_CHECK_TERRA_PROGRAMS, each within its own limit.
if want 3c && [ -f $FRONTEND/python/_terra_native.cpython-312-x86_64-linux-gnu.so ] && [ "$(left)" -gt 100 ]; then
  for p in ${GPU_CHECK_TERRA_PROGRAMS:-dcgan resnet50 bert_cls music_transformer gpt2}; do
    TL=$(( $(left) - 10 )); [ "$TL" -gt "${GPU_CHECK_TERRA_S:-150}" ] && TL=${GPU_CHECK_TERRA_S:-150}
    if [ "$TL" -lt 60 ]; then echo "skipped $p: budget spent"; continue; fi
    TERRA_LOG=1 TERRA_BUILD_DIR=$FRONTEND timeout $TL python3 benchmarks/run.py --programs $p --size full \
      --device cuda --modes eager,terra --steps 10 --repeats 3 --warmup 12 --settle 1 --no-progress \
      --out /tmp/bench-terra/$p > /tmp/bench-terra-$p.log 2>&1
    echo "$p rc=$? ($(left) s left)"; tail -12 /tmp/bench-terra-$p.log
  done
  mkdir -p $L/terra && cp -r /tmp/bench-terra /tmp/bench-terra-*.log $L/terra/ 2>/dev/null
fi

packlogs
echo "== 3d. ncu over co-executed steps under terra on CUDA: time per kernel ($(left) s left)"
# Where a co-executed step's graph time goes (session 30: DCGAN's graph
# took 32.6 ms a step against eager's 9 ms for the whole step): every
# kernel and library call of two steps (scripts/gpu-profile-step.py marks
# them), summed by name.
if want 3d && command -v ncu >/dev/null && [ -f $FRONTEND/python/_terra_native.cpython-312-x86_64-linux-gnu.so ] && [ "$(left)" -gt 90 ]; then
  for p in ${GPU_CHECK_PROFILE_PROGRAMS:-dcgan}; do
    TL=$(( $(left) - 10 )); [ "$TL" -gt 180 ] && TL=180
    TERRA_BUILD_DIR=$FRONTEND timeout $TL ncu --profile-from-start off --clock-control none \
      --metrics gpu__time_duration.sum --csv python3 scripts/gpu-profile-step.py $p \
      > "$L/ncu-step-$p.csv" 2> "$L/ncu-step-$p.err"
    echo "$p rc=$? ($(left) s left)"; grep -v '^==PROF==' "$L/ncu-step-$p.err" | tail -4
    python3 - "$L/ncu-step-$p.csv" <<'PY' 2>&1 | tee "$L/ncu-step-$p.txt"
import collections, csv, sys
total, count = collections.Counter(), collections.Counter()
for r in csv.reader(open(sys.argv[1])):
    if len(r) > 14 and r[12] == "gpu__time_duration.sum":
        name = r[4][:70]
        total[name] += float(r[14].replace(",", "")) / 1e3
        count[name] += 1
print(f"{sum(count.values())} kernels, {sum(total.values()) / 1e3:.2f} ms in all (two steps)")
for name, us in total.most_common(25):
    print(f"{us:10.1f} us {count[name]:5d}x  {name}")
PY
  done
fi

packlogs
echo "== 4. benchmarks, full size, eager vs torch.compile ($(left) s left)"
want 4 || { echo skipped; ls -la "$OUT"; exit 0; }
# Results are packed into $OUT/bench.tgz after each program.
# The programs the first lease (2026-11-26) did not time come first;
# GPU_CHECK_PROGRAMS overrides the list.
PROGRAMS=${GPU_CHECK_PROGRAMS:-"yolov3 dropblock bert_qa faster_rcnn sdpoint resnet50 bert_cls gpt2 music_transformer dcgan"}
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache
W=/tmp/bench
mkdir -p $W/warm $W/runs
pack() { tar czf "$OUT/bench.tgz" -C $W . 2>/dev/null; }
# Warm Inductor's on-disk caches with every program at once (compilation is
# CPU-bound, 16 cores), so the timed runs after it compile from the cache.
WARM=$(( $(left) / 2 ))
for p in $PROGRAMS; do
  TORCHINDUCTOR_COMPILE_THREADS=4 timeout $WARM python3 benchmarks/run.py --programs $p \
    --size full --device cuda --modes torch-compile --steps 1 --repeats 1 --warmup 3 \
    --settle 0 --no-progress --out $W/warm/$p > $W/warm/$p.log 2>&1 &
done
wait
echo "warm-up done ($(left) s left)"
pack
for p in $PROGRAMS; do
  t=$(left)
  if [ "$t" -lt 30 ]; then echo "skipped $p: budget spent"; continue; fi
  timeout $((t - 10)) python3 benchmarks/run.py --programs $p --size full --device cuda \
    --modes torch-compile --steps 10 --repeats 3 --warmup 3 --settle 2 --no-progress \
    --out $W/runs/$p > $W/runs/$p.log 2>&1
  echo "$p rc=$? ($(left) s left)"
  tail -6 $W/runs/$p.log
  pack
done
packlogs
ls -la "$OUT"
