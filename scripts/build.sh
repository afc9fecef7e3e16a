#!/usr/bin/env bash
# Installs missing packages (setup.sh), then configures and builds Kiln: Release, Ninja,
# ccache, 2 jobs. Arguments are build targets (default: everything).
# Environment: KILN_BUILD_DIR (default build), KILN_JOBS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
build_dir=${KILN_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
if (($# > 0)); then
  cmake --build "$build_dir" -j "${KILN_JOBS:-2}" --target "$@"
else
  cmake --build "$build_dir" -j "${KILN_JOBS:-2}"
fi
