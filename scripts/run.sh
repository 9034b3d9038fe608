#!/usr/bin/env bash
# The main job. (1) Runs the compiler on the paper's worked example: import
# the recorded traces, merge them, run case assignment, and print the
# TraceGraph (also as DOT) and the graph; (2) trains a PyTorch MLP under
# @terra.function next to eager PyTorch and reports agreement, speed, phases
# and fallbacks.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TERRA_BUILD_DIR:-$root/build}"

bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh" terra-opt terra-translate terra-run _terra_native

traces="$root/examples/worked-example.json"
bin="$build/bin"
echo "== traces ($traces) =="
"$bin/terra-translate" --import-trace "$traces"
echo "== merged TraceGraph =="
"$bin/terra-translate" --import-trace "$traces" | "$bin/terra-opt" -terra-merge-traces
echo "== TraceGraph as DOT =="
"$bin/terra-translate" --import-trace "$traces" | "$bin/terra-opt" -terra-merge-traces \
  | "$bin/terra-translate" --terra-to-dot
echo "== generated graph =="
"$bin/terra-translate" --import-trace "$traces" \
  | "$bin/terra-opt" -terra-merge-traces -terra-assign-cases
echo "== a PyTorch training program: eager vs @terra.function =="
TERRA_BUILD_DIR="$build" /usr/bin/python3 "$root/examples/train.py"
