#!/usr/bin/env bash
# Installs the Debian packages Terra-MLIR needs. Idempotent: it only calls
# apt-get when a package is missing. Packages are pinned by name to the
# LLVM/MLIR 22 series (CMake checks the exact major version).
set -euo pipefail

PACKAGES=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  cmake ninja-build ccache g++
  googletest libgtest-dev libopenblas-dev libdnnl-dev
  pybind11-dev python3-pybind11 python3-dev libtorch-dev
  python3-numpy python3-torch python3-pytest python3-matplotlib
  graphviz
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
