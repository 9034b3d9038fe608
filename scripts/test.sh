#!/usr/bin/env bash
# Runs every test: installs dependencies, builds, then the lit + FileCheck
# suite (check-terra), the GoogleTest units (ctest) and pytest.
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
