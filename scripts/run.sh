#!/usr/bin/env bash
# The main job: installs what is missing (Debian's dataset-fashion-mnist included), builds
# Kiln and trains the Fashion-MNIST CNN (examples/fashion_mnist) on the CPU backend for 3
# epochs, with the live dashboard in a terminal and plain log lines otherwise; it prints
# the test accuracy and saves the model to runs/fashion_mnist/model.safetensors.
# Arguments go to the example (--epochs, --batch-size, --lr, --backend, --resume...).
# Environment: see build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build.sh fashion_mnist infer
"${KILN_BUILD_DIR:-build}/examples/fashion_mnist" "$@"
