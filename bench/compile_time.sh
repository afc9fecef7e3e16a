#!/usr/bin/env bash
# The edit-compile-run loop: changes one line of the Fashion-MNIST model
# (examples/fashion_mnist/model.cpp: the hidden layer's relu becomes a gelu, then back) and
# times each Release rebuild of examples/fashion_mnist (ccache off for them): 6 rebuilds,
# each after a one-line change; prints each time, the median and the slowest. The file is
# left as it was.
# Run it with nothing else building; the figure goes to docs/benchmarks.md.
#
#   bash bench/compile_time.sh            (build dir: $KILN_BUILD_DIR or build)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${KILN_BUILD_DIR:-build}"
model=examples/fashion_mnist/model.cpp
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

relu="$line"
gelu="${line/.relu()/.gelu()}"
times=()
rebuild() {  # replaces line $1 with line $2 in the model and times the rebuild
  sed -i "s|${1//|/\\|}|${2//|/\\|}|" "$model"
  grep -qF "$2" "$model" || { echo "compile_time: the edit did not apply" >&2; exit 1; }
  local start end
  start=$(date +%s.%N)
  CCACHE_DISABLE=1 cmake --build "$build" --target fashion_mnist >/dev/null  # a real compile, not a cache hit
  end=$(date +%s.%N)
  times+=("$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }')")
}
for _ in 1 2 3; do
  rebuild "$relu" "$gelu"
  rebuild "$gelu" "$relu"
done
printf '%s\n' "${times[@]}" | sort -n | awk -v type="$(grep -m1 CMAKE_BUILD_TYPE: "$build/CMakeCache.txt" | cut -d= -f2)" \
  -v cores="$(nproc)" -v all="${times[*]}" \
  '{ t[NR] = $1 } END { printf "compile_time: rebuilds of fashion_mnist after a one-line model change (%s, %d cores): %s s; median %.1f s, slowest %.1f s\n", type, cores, all, (t[3] + t[4]) / 2, t[NR] }'
