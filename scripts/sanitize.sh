#!/usr/bin/env bash
# Runs the runtime tests (ctest label "runtime": channels, runner,
# cancellation, stress, zero-copy fetches, the BLAS library entry points and
# the CUDA runtime's no-driver paths) under a sanitizer preset of
# CMakePresets.json: configures build-<preset>/ once, builds only the
# runtime test executables, and runs them with `ctest --preset <preset>`.
#
#   scripts/sanitize.sh [asan|tsan]      (default: both, asan first)
#
# Not part of CI (.ci/run): a cold sanitizer build takes far longer than the
# CI budget on a 2-core machine (docs/runtime.md, "Sanitizers").
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CCACHE_BASEDIR="$root"
jobs="${TERRA_JOBS:-2}"

presets=("$@")
[ ${#presets[@]} -eq 0 ] && presets=(asan tsan)

for preset in "${presets[@]}"; do
  case "$preset" in
  asan | tsan) ;;
  *)
    echo "usage: $0 [asan|tsan]..." >&2
    exit 2
    ;;
  esac
  build="$root/build-$preset"
  echo "== $preset: configure =="
  [ -f "$build/build.ninja" ] || cmake --preset "$preset"
  targets=(RuntimeTests)
  # The CUDA runtime's tests carry the label too when the toolkit is found.
  if ninja -C "$build" -t query CudaRuntimeTests >/dev/null 2>&1; then
    targets+=(CudaRuntimeTests)
  fi
  echo "== $preset: build ${targets[*]} =="
  ninja -C "$build" -j"$jobs" "${targets[@]}"
  echo "== $preset: ctest -L runtime =="
  ctest --preset "$preset" -j"$jobs"
done
