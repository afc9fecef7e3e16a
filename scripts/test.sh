#!/usr/bin/env bash
# Installs what is missing, builds everything and runs the whole test suite with ctest
# (conformance, core, must-not-compile, install and example tests). .ci/run calls this.
# Environment: see build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
bash scripts/build.sh
cd "${KILN_BUILD_DIR:-build}"
ctest --output-on-failure -j "${KILN_JOBS:-2}"
echo "test: built and tested in $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s"
