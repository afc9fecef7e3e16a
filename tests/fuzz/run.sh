#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ and runs each one for a while on
# a corpus seeded from tests/golden/store/ (and the pickles inside its .pt files).
# Usage: tests/fuzz/run.sh [seconds per fuzzer, default 180] [fuzz_safetensors|fuzz_torch ...]
# Environment: KILN_FUZZ_BUILD_DIR (default build-fuzz), KILN_JOBS (default 2).
# Findings are written to <build>/artifacts/; the corpus grows in <build>/corpus/.
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${1:-180}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(fuzz_safetensors fuzz_torch)
build=${KILN_FUZZ_BUILD_DIR:-build-fuzz}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
  -DKILN_BUILD_FUZZERS=ON -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" -j "${KILN_JOBS:-2}" --target "${targets[@]}"

golden=tests/golden/store
for target in "${targets[@]}"; do
  seeds=$build/seeds/$target
  rm -rf "$seeds"
  mkdir -p "$seeds" "$build/corpus/$target" "$build/artifacts"
  if [[ $target == fuzz_safetensors ]]; then
    cp "$golden"/*.safetensors "$seeds"/
  else
    cp "$golden"/*.pt "$seeds"/
    # The bare pickles too: fuzz_torch wraps non-zip inputs into an archive.
    python3 - "$golden" "$seeds" <<'PY'
import pathlib, sys, zipfile
golden, seeds = map(pathlib.Path, sys.argv[1:])
for path in golden.glob("*.pt"):
    try:
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                if name.endswith("/data.pkl"):
                    (seeds / f"{path.stem}.pkl").write_bytes(z.read(name))
    except zipfile.BadZipFile:
        pass
PY
  fi
  echo "== $target: ${seconds} s"
  "$build/tests/fuzz/$target" "$build/corpus/$target" "$seeds" -max_total_time="$seconds" -timeout=10 \
    -dict="tests/fuzz/${target#fuzz_}.dict" -artifact_prefix="$build/artifacts/$target-" -print_final_stats=1
done
