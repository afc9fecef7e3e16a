#!/usr/bin/env bash
# Data-parallel scaling on one machine (docs/benchmarks.md, "Distributed training"): the
# MLP step of bench/dist_bench.cpp and one Fashion-MNIST epoch (examples/fashion_mnist, its
# Learner and loaders included), as 1 rank x 2 threads and as 2 ranks x 1 thread, one after
# the other in this run. Needs a build with -DKILN_BUILD_BENCHMARKS=ON and kiln::dist.
#
#   bash bench/dist_scaling.sh [build-dir]
set -euo pipefail
build=${1:-build}
mpirun=(mpirun --oversubscribe -np 2 -x KILN_NUM_THREADS=1)
[[ $(id -u) -eq 0 ]] && mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2 -x KILN_NUM_THREADS=1)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== MLP step (784-1024-1024-10, global batch 256, Adam)"
KILN_NUM_THREADS=2 "$build/bench/kiln_dist_bench"
"${mpirun[@]}" "$build/bench/kiln_dist_bench"

# The train row of epochs.csv: the epoch's time and the test accuracy after it.
epoch() {
  python3 - "$1" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1] + "/epochs.csv")))
train = next(r for r in rows if r["split"] == "train")
valid = next(r for r in rows if r["split"] == "valid")
print(f"train epoch {float(train['epoch_time_s']):.1f} s, test accuracy {float(valid['accuracy']):.2f} %")
EOF
}
echo "== Fashion-MNIST, one epoch (60k images, global batch 64)"
KILN_NUM_THREADS=2 "$build/examples/fashion_mnist" --epochs 1 --output "$out/one" > "$out/one.log"
echo "1 rank x 2 threads:  $(epoch "$out/one")"
"${mpirun[@]}" "$build/examples/fashion_mnist" --distributed --epochs 1 --output "$out/two" > "$out/two.log"
echo "2 ranks x 1 thread:  $(epoch "$out/two")"
