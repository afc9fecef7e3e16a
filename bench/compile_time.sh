#!/usr/bin/env bash
# The edit-compile-run loop: changes one line of the Fashion-MNIST model
# (examples/fashion_mnist/model.cpp: the hidden layer's relu becomes a gelu, then back) and
# times each Release rebuild of examples/fashion_mnist (ccache off for them): 6 rebuilds,
# each after a one-line change; prints each time, the median and the slowest. The file is
# left as it was. Then a user's own single-file programs, as the docs print them (the
# blocks tests/docs extracts): the README's program, docs/getting-started.md's first model
# and docs/modules.md's example, each compiled once in Release (-O3, as CMake's Release),
# with the include dirs an installed Kiln has; prints the seconds each took.
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

# A user's programs: one compile each, as tests/docs builds them against an installed Kiln.
blocks="$build/tests/docs/blocks"
[[ -f "$blocks/readme_1.cpp" ]] || cmake "$build" >/dev/null  # configure extracts the blocks
cxx=$(grep -m1 CMAKE_CXX_COMPILER: "$build/CMakeCache.txt" | cut -d= -f2)
# As an installed Kiln has them: the headers, and each built backend's generated
# <kiln/<backend>/instances.hpp>, which <kiln/kiln.hpp> includes to declare the compiled
# instances extern.
includes=(-Iinclude -Ibackends/cpu/include "-I$build/instances/cpu/include")
[[ -d backends/vulkan/include && -f "$build/backends/vulkan/libkiln_vulkan.so" ]] &&
  includes+=(-Ibackends/vulkan/include "-I$build/instances/vulkan/include")
for block in readme_1:"README.md's program" getting-started_3:"docs/getting-started.md's first model" \
             modules_1:"docs/modules.md's example"; do
  file="$blocks/${block%%:*}.cpp"
  start=$(date +%s.%N)
  "$cxx" -std=c++20 -O3 -DNDEBUG "${includes[@]}" -c "$file" -o /dev/null
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" -v what="${block#*:}" 'BEGIN { printf "compile_time: %s compiles in %.1f s (Release, one file)\n", what, e - s }'
done
