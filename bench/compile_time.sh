#!/usr/bin/env bash
# The edit-compile-run loop: changes one line of the Fashion-MNIST model
# (examples/fashion_mnist/model.hpp: the hidden layer's relu becomes a gelu), times the
# Release rebuild of examples/fashion_mnist (ccache off for it), then puts the line back
# (and rebuilds, untimed).
# Run it with nothing else building; the figure goes to docs/benchmarks.md.
#
#   bash bench/compile_time.sh            (build dir: $KILN_BUILD_DIR or build)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${KILN_BUILD_DIR:-build}"
model=examples/fashion_mnist/model.hpp
line='return fc2.forward(fc1.forward(y.template reshape<2>({images.dim(0), -1})).relu());'

grep -qF "$line" "$model" || { echo "compile_time: the line to change is not in $model" >&2; exit 1; }
[[ -f "$build/build.ninja" ]] || bash scripts/build.sh fashion_mnist
cmake --build "$build" --target fashion_mnist >/dev/null  # up to date before the edit

backup=$(mktemp)
cp "$model" "$backup"
restore() {
  cp "$backup" "$model" && rm -f "$backup"
  cmake --build "$build" --target fashion_mnist >/dev/null || true
}
trap restore EXIT

sed -i "s|${line//|/\\|}|${line/.relu()/.gelu()}|" "$model"
grep -qF '.gelu());' "$model" || { echo "compile_time: the edit did not apply" >&2; exit 1; }
start=$(date +%s.%N)
CCACHE_DISABLE=1 cmake --build "$build" --target fashion_mnist >/dev/null  # a real compile, not a cache hit
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" -v type="$(grep -m1 CMAKE_BUILD_TYPE: "$build/CMakeCache.txt" | cut -d= -f2)" -v cores="$(nproc)" \
  'BEGIN { printf "compile_time: rebuild of fashion_mnist after a one-line model change: %.1f s (%s, %d cores)\n", e - s, type, cores }'
