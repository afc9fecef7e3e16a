#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ and runs each one for a while, with
# ASan and UBSan and a 2 GB memory limit, on a corpus seeded from tests/golden/store/ (and
# the pickles inside its .pt files), tests/fuzz/seeds/, small files written here and, for
# fuzz_onnx, the models and small tensors of ONNX's node tests (Debian's libonnx-testdata).
# Usage: tests/fuzz/run.sh [seconds per fuzzer, default 180] [fuzz_safetensors|fuzz_torch|fuzz_idx|
#        fuzz_cifar|fuzz_csv|fuzz_image|fuzz_checkpoint|fuzz_onnx ...]
# Environment: KILN_FUZZ_BUILD_DIR (default build-fuzz), KILN_JOBS (default 2).
# Findings are written to <build>/artifacts/; the corpus grows in <build>/corpus/.
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${1:-180}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(fuzz_safetensors fuzz_torch fuzz_idx fuzz_cifar fuzz_csv fuzz_image fuzz_checkpoint fuzz_onnx)
build=${KILN_FUZZ_BUILD_DIR:-build-fuzz}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
  -DKILN_BUILD_FUZZERS=ON -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" -j "${KILN_JOBS:-2}" --target "${targets[@]}"

golden=tests/golden/store
for target in "${targets[@]}"; do
  seeds=$build/seeds/$target
  rm -rf "$seeds"
  mkdir -p "$seeds" "$build/corpus/$target" "$build/artifacts"
  case $target in
    fuzz_safetensors) cp "$golden"/*.safetensors "$seeds"/ ;;
    fuzz_torch)
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
      ;;
    fuzz_checkpoint) cp tests/fuzz/seeds/learner.json "$seeds"/ && printf 'epoch-0003-step-000017\n' >"$seeds/latest" ;;
    fuzz_onnx)
      # Every node test's model (all under 8 KB) and its first input when small; without the
      # package, one hand-written minimal model: a graph with one Identity node.
      node_tests=${KILN_ONNX_NODE_TESTS:-/usr/share/libonnx-testdata/data/node}
      if [[ -d $node_tests ]]; then
        for test in "$node_tests"/*/; do
          name=$(basename "$test")
          if [[ -f $test/model.onnx ]]; then cp "$test/model.onnx" "$seeds/$name.onnx"; fi
          input=$test/test_data_set_0/input_0.pb
          if [[ -f $input && $(stat -c %s "$input") -le 4096 ]]; then cp "$input" "$seeds/$name.input_0.pb"; fi
        done
      else
        echo "fuzz_onnx: $node_tests is missing (apt-get install libonnx-testdata); seeding one minimal model"
        printf '\x42\x02\x10\x11\x3a\x12\x0a\x10\x0a\x01x\x12\x01y\x22\x08Identity' >"$seeds/identity.onnx"
      fi
      ;;
    *)
      # Small valid files of each format, written here: IDX (plain, gzip), CIFAR-10 and -100
      # records, CSV texts, and PGM, PPM, BMP and PNG images.
      python3 - "$target" "$seeds" <<'PY'
import gzip, pathlib, struct, sys, zlib
target, seeds = sys.argv[1], pathlib.Path(sys.argv[2])
def put(name, data): (seeds / name).write_bytes(data)
if target == "fuzz_idx":
    u8 = bytes([0, 0, 0x08, 3]) + struct.pack(">3I", 2, 3, 3) + bytes(range(18))
    i32 = bytes([0, 0, 0x0C, 1]) + struct.pack(">I", 3) + struct.pack(">3i", -1, 0, 7)
    put("u8.idx", u8); put("i32.idx", i32); put("u8.idx.gz", gzip.compress(u8))
elif target == "fuzz_cifar":
    put("cifar10.bin", bytes([3]) + bytes(3072) + bytes([7]) + bytes(range(256)) * 12)
    put("cifar100.bin", bytes([1, 42]) + bytes(3072))
elif target == "fuzz_csv":
    put("header.csv", b"a,b,c\n1,2,3\n4.5,-6e3,7\n")
    put("quoted.csv", b'"x","y"\n"1", 2\r\n3,"4"\n')
    put("plain.csv", b"1;2\n3;4\n")
elif target == "fuzz_image":
    put("grey.pgm", b"P5 2 2 255\n" + bytes([0, 64, 128, 255]))
    put("rgb.ppm", b"P6\n2 1\n255\n" + bytes([255, 0, 0, 0, 255, 0]))
    row = bytes([0, 0, 255, 0, 255, 0, 0, 0])  # two BGR pixels and padding to 4 bytes
    bmp = b"BM" + struct.pack("<IHHI", 54 + 16, 0, 0, 54) + struct.pack("<IiiHHIIiiII", 40, 2, 2, 1, 24, 0, 16, 0, 0, 0, 0)
    put("two.bmp", bmp + row * 2)
    def chunk(kind, data): return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(b"\x00" + bytes(6) + b"\x00" + bytes([255] * 6))) + chunk(b"IEND", b"")
    put("rgb.png", png)
PY
      ;;
  esac
  dict=()
  [[ -f tests/fuzz/${target#fuzz_}.dict ]] && dict=(-dict="tests/fuzz/${target#fuzz_}.dict")
  echo "== $target: ${seconds} s"
  # -rss_limit_mb: an input that makes the reader allocate past 2 GB counts as a finding.
  "$build/tests/fuzz/$target" "$build/corpus/$target" "$seeds" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 "${dict[@]}" -artifact_prefix="$build/artifacts/$target-" -print_final_stats=1
done
