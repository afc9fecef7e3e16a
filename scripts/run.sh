#!/usr/bin/env bash
# The main job: installs what is missing, builds Kiln and runs the linear regression
# example (examples/linear_regression). Environment: see build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build.sh linear_regression
"${KILN_BUILD_DIR:-build}/examples/linear_regression"
