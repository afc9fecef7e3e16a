#!/usr/bin/env bash
# Builds and runs Kiln's tests under the sanitizers, each in its own build folder:
#   1. the whole ctest suite with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/),
#      Vulkan on lavapipe included, the install and docs tests too: their consumer builds
#      inherit the flags through CXXFLAGS / LDFLAGS;
#   2. the data loader and Learner tests (data, train) with ThreadSanitizer (build-tsan/).
# Any report fails the run (-fno-sanitize-recover, halt_on_error). Takes about an hour on
# 2 cores, so CI does not run it; see docs/reliability.md.
# Arguments: `asan` or `tsan` runs one half only (default: both).
# Environment: KILN_JOBS (default 2); KILN_SANITIZE_CTEST_ARGS, extra ctest arguments
# (e.g. "-R conformance").
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=${KILN_JOBS:-2}
halves=("$@")
((${#halves[@]})) || halves=(asan tsan)

bash scripts/setup.sh
start=$SECONDS

# -O1 keeps the kernels fast enough for the suite and the stacks readable; NDEBUG as in
# the release build, so that the code under test is the code users run.
configure() {  # configure <build dir> <sanitizer flags>
  CXXFLAGS="$2" LDFLAGS="$2" cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DKILN_BUILD_BENCHMARKS=OFF -DKILN_TEST_TIMEOUT_FACTOR=10
}

# Allocation tests expect std::bad_alloc, which the sanitizers' allocators give only when
# allowed to return null. Leak reports name Kiln's frames; the suppressions in
# tests/sanitize/ cover the Vulkan driver's own allocations (lavapipe, LLVM), which Kiln
# cannot free.
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1
export LSAN_OPTIONS=suppressions=$root/tests/sanitize/lsan.supp:print_suppressions=0
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1:suppressions=$root/tests/sanitize/tsan.supp

summary=()
for half in "${halves[@]}"; do
  t0=$SECONDS
  case $half in
    asan)
      flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
      configure build-asan "$flags"
      CXXFLAGS="$flags" LDFLAGS="$flags" cmake --build build-asan -j "$jobs"
      # shellcheck disable=SC2086
      CXXFLAGS="$flags" LDFLAGS="$flags" ctest --test-dir build-asan --output-on-failure -j "$jobs" \
        ${KILN_SANITIZE_CTEST_ARGS:-}
      ;;
    tsan)
      # libgomp is not built with TSan, so its barriers are invisible to it and every
      # OpenMP region would read as a race: the CPU backend runs on one OpenMP thread
      # here. The threads under test (loader workers, the Ctrl-C watcher, the Learner's
      # own) are all std::threads.
      flags="-fsanitize=thread -fno-omit-frame-pointer"
      configure build-tsan "$flags"
      CXXFLAGS="$flags" LDFLAGS="$flags" cmake --build build-tsan -j "$jobs" --target kiln_data_tests kiln_train_tests kiln_interrupt_child
      # shellcheck disable=SC2086
      OMP_NUM_THREADS=1 ctest --test-dir build-tsan --output-on-failure -j "$jobs" \
        -R '^(data|train)$' ${KILN_SANITIZE_CTEST_ARGS:-}
      ;;
    *) echo "sanitize.sh: unknown half '$half' (asan or tsan)" >&2; exit 2 ;;
  esac
  summary+=("$half: clean in $(((SECONDS - t0) / 60)) min $(((SECONDS - t0) % 60)) s")
done
printf 'sanitize: %s\n' "${summary[@]}"
echo "sanitize: done in $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s"
