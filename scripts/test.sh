#!/usr/bin/env bash
# Runs every test: installs dependencies, builds, then the lit + FileCheck
# suite (check-terra), the GoogleTest units (ctest) and pytest, then part of
# pytest again through the GPU pipeline (kernels as CPU loops).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TERRA_BUILD_DIR:-$root/build}"

bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"

echo "== lit (check-terra) =="
ninja -C "$build" check-terra

echo "== GoogleTest (ctest) =="
(cd "$build" && ctest --output-on-failure)

echo "== pytest =="
cd "$root"
/usr/bin/python3 -m pytest test/python -q

echo "== pytest through the GPU pipeline (TERRA_CPU_GRAPHS=gpu-loops) =="
# The GPU pipeline's kernels run as CPU loops: every op test against eager
# PyTorch, and the co-execution programs most likely to meet host code that
# would touch device memory (dynamic shapes, loops, tapes), checked here on
# every commit rather than on the next GPU lease.
TERRA_CPU_GRAPHS=gpu-loops /usr/bin/python3 -m pytest -q \
  test/python/test_ops_*.py test/python/test_spec_conformance.py \
  test/python/test_tape.py test/python/test_loops.py test/python/test_sizes.py \
  test/python/test_state.py test/python/test_views.py \
  test/python/test_benchmark_programs.py test/python/test_program_patterns.py
