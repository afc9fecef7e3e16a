#!/usr/bin/env bash
# The CUDA backend's check on a machine with an NVIDIA GPU: the conformance suite, the
# autodiff tests (gradient checks) and the fusion tests on Cuda, Autodiff<Cuda> and
# Fusion<Cuda>, the runtime tests, bench/cuda_bench.cpp beside its PyTorch twins
# (bench/torch_gpu.py) and a Fashion-MNIST epoch beside PyTorch's, then one summary table.
#
#   scripts/gpu-check.sh pack [BUILD]   here: builds the CUDA targets in BUILD (default build)
#                                       and packs them, with the libraries they need that a
#                                       GPU machine may lack, into .gpu/kiln-gpu.tar.xz
#   scripts/gpu-check.sh run            there, from the repository root: unpacks .gpu and
#                                       runs everything; logs and JSON go to $OUT (or .gpu/out)
#
# GPU_CHECK_PARTS picks what `run` does (default "tests bench epoch"): tests (every CUDA test
# binary), conformance (that suite alone), bench (cuda_bench.cpp and torch_gpu.py), bench-
# elementwise (the copy-like and fused rows alone), epoch (Fashion-MNIST on cuda and
# fusion_cuda beside PyTorch), profile (the same epochs under KILN_CUDA_PROFILE=1, stopped
# after 40 s with SIGINT, which the example takes as Ctrl-C, printing kernels by time).
#
# The GPU machine needs the NVIDIA driver, CUDA 13's cuBLAS and NVRTC libraries (the CUDA
# toolkit or PyTorch's wheels) and, for the peers, PyTorch; it needs no compiler. It runs
# in about 5 minutes on one H200.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-run}

if [[ $mode == pack ]]; then
  build=${2:-build}
  set -e
  ninja -C "$build" kiln_cuda_conformance_tests kiln_cuda_autodiff_tests kiln_cuda_fusion_tests kiln_cuda_tests \
    kiln_cuda_bench fashion_mnist
  stage=$(mktemp -d)
  mkdir -p "$stage/bin" "$stage/lib"
  cp "$build"/tests/kiln_cuda_{conformance,autodiff,fusion}_tests "$build"/tests/kiln_cuda_tests \
     "$build"/bench/kiln_cuda_bench "$build"/examples/fashion_mnist "$stage/bin/"
  # Kiln's libraries, and every other library the programs load except the C/C++ runtime,
  # the CUDA libraries (the GPU machine's own) and the driver.
  for program in "$stage"/bin/*; do
    ldd "$program" | awk '/=> \// {print $3}'
  done | sort -u | grep -v -E 'lib(c|m|dl|rt|pthread|stdc\+\+|gcc_s)\.so|libcublas|libnvrtc|libcuda' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  strip --strip-unneeded "$stage"/bin/* "$stage"/lib/* 2>/dev/null || true
  mkdir -p "$here/.gpu"
  tar -C "$stage" -cJf "$here/.gpu/kiln-gpu.tar.xz" bin lib
  rm -rf "$stage"
  ls -la "$here/.gpu/kiln-gpu.tar.xz"
  exit 0
fi

out=${OUT:-$here/.gpu/out}
mkdir -p "$out"
work=/tmp/kiln-gpu
rm -rf "$work" && mkdir -p "$work" && tar -C "$work" -xJf "$here/.gpu/kiln-gpu.tar.xz"
# CUDA 13's cuBLAS and NVRTC: the toolkit's, else PyTorch's wheels'.
cuda_dirs=$( (ls -d /usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib 2>/dev/null
  python3 -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null |
    while read -r p; do find "$p/nvidia" -name 'lib*.so.13*' -printf '%h\n' 2>/dev/null; done) |
  sort -u | tr '\n' ':')
export LD_LIBRARY_PATH="$work/lib:${cuda_dirs}${LD_LIBRARY_PATH:-}"
export KILN_CACHE_DIR=$work/cache
nvidia-smi -L | tee "$out/gpu.txt"
cores=$(nproc)

# The test binaries, each in gtest shards across the cores; a shard's log per file.
run_sharded() {
  local name=$1 shards=$2
  for ((i = 0; i < shards; ++i)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout 200 "$work/bin/$name" --gtest_brief=1 \
      > "$work/$name.$i.log" 2>&1 &
  done
  wait
  cat "$work/$name".*.log > "$out/$name.log"
}
parts=" ${GPU_CHECK_PARTS:-tests bench epoch} "
has() { [[ $parts == *" $1 "* ]]; }

start=$(date +%s)
if has tests; then
  "$work/bin/kiln_cuda_tests" > "$out/kiln_cuda_tests.log" 2>&1  # compiles the kernels/cuda files once, into the cache
fi
if has tests || has conformance; then run_sharded kiln_cuda_conformance_tests "$cores"; fi
if has tests; then
  run_sharded kiln_cuda_autodiff_tests $((cores / 2))
  run_sharded kiln_cuda_fusion_tests $((cores / 2))
fi
echo "tests: $(($(date +%s) - start)) s" | tee "$out/times.txt"

start=$(date +%s)
if has bench; then
  timeout 150 "$work/bin/kiln_cuda_bench" --benchmark_min_time=0.2 --benchmark_format=json \
    > "$out/kiln_cuda_bench.json" 2> "$out/kiln_cuda_bench.err"
  timeout 120 python3 "$here/bench/torch_gpu.py" > "$out/torch_gpu.jsonl" 2> "$out/torch_gpu.err"
elif has bench-elementwise; then
  timeout 60 "$work/bin/kiln_cuda_bench" --benchmark_filter='neg|fused' --benchmark_min_time=0.2 \
    --benchmark_format=json > "$out/kiln_cuda_bench.json" 2> "$out/kiln_cuda_bench.err"
fi
echo "benchmarks: $(($(date +%s) - start)) s" | tee -a "$out/times.txt"

# A Fashion-MNIST epoch, where the data set is missing on random images of its size, written
# where the example reads it (the timing does not depend on the pixels; the accuracy then
# means nothing).
data=/usr/share/datasets/fashion-mnist
if has epoch || has profile; then
  [[ -e $data/train-images-idx3-ubyte.gz || -e $data/train-images-idx3-ubyte ]] || python3 - "$data" <<'PY'
import os, sys, numpy as np
d = sys.argv[1]; os.makedirs(d, exist_ok=True); rng = np.random.default_rng(0)
for prefix, n in (("train", 60000), ("t10k", 10000)):
    with open(f"{d}/{prefix}-images-idx3-ubyte", "wb") as f:
        f.write(bytes([0, 0, 8, 3]) + n.to_bytes(4, "big") + (28).to_bytes(4, "big") * 2)
        f.write(rng.integers(0, 256, n * 784, dtype=np.uint8).tobytes())
    with open(f"{d}/{prefix}-labels-idx1-ubyte", "wb") as f:
        f.write(bytes([0, 0, 8, 1]) + n.to_bytes(4, "big") + rng.integers(0, 10, n, dtype=np.uint8).tobytes())
PY
fi
if has epoch; then
  for backend in cuda fusion_cuda; do
    start=$(date +%s%N)
    timeout 90 "$work/bin/fashion_mnist" --backend $backend --epochs 1 --output "$work/fm_$backend" \
      > "$out/fashion_$backend.log" 2>&1
    echo "{\"name\": \"fashion_mnist_epoch_with_test@$backend\", \"s\": $((($(date +%s%N) - start) / 1000000)).0e-3}" \
      >> "$out/epochs.jsonl"
  done
  timeout 90 python3 "$here/bench/torch_fashion_epoch.py" --data "$data" --device cuda > "$out/torch_epoch.json" 2>&1
fi
if has profile; then
  for backend in cuda fusion_cuda; do
    KILN_CUDA_PROFILE=1 timeout -s INT 40 "$work/bin/fashion_mnist" --backend $backend --epochs 1 \
      --output "$work/fp_$backend" > "$out/profile_$backend.log" 2>&1
    grep -A26 "kiln cuda profile" "$out/profile_$backend.log" | sed "s/^/[$backend] /"
    grep "step\|done in" "$out/profile_$backend.log" | tail -2 | sed "s/^/[$backend] /"
  done
fi

python3 - "$out" <<'PY'
import json, pathlib, re, sys
out = pathlib.Path(sys.argv[1])
print("\n== tests ==")
for log in sorted(out.glob("kiln_cuda*_tests.log")):
    text = log.read_text(errors="replace")
    passed = sum(int(n) for n in re.findall(r"\[  PASSED  \] (\d+) test", text))
    skipped = sum(int(n) for n in re.findall(r"\[  SKIPPED \] (\d+) test", text))
    failed = sorted(set(re.findall(r"\[  FAILED  \] ([\w/.]+)", text)))
    print(f"{log.stem:32} passed {passed:5}  skipped {skipped:4}  failed {len(failed)}")
    for name in failed[:40]:
        print(f"    FAILED {name}")
print("\n== benchmarks (Kiln | PyTorch on the same GPU) ==")
torch = {}
for line in (out / "torch_gpu.jsonl").read_text().splitlines() if (out / "torch_gpu.jsonl").exists() else []:
    try:
        row = json.loads(line); torch[row["name"]] = row
    except ValueError:
        pass
try:
    kiln = json.loads((out / "kiln_cuda_bench.json").read_text())["benchmarks"]
except (ValueError, KeyError, FileNotFoundError):
    kiln = []
for row in kiln:
    name = row["name"].split("/real_time")[0]
    ms = row.get("real_time", 0)
    rate = row.get("TFLOP/s", 0) * 1e-0
    gbs = row.get("bytes_per_second", 0) * 1e-9
    text = f"{name:58} {ms:9.3f} ms"
    if rate: text += f"  {rate:7.1f} TFLOP/s"
    if gbs: text += f"  {gbs:7.1f} GB/s"
    if row.get("error_occurred"): text += "  ERROR " + row.get("error_message", "")
    print(text)
for name, row in torch.items():
    extra = f"  {row['tflops']:7.1f} TFLOP/s" if "tflops" in row else f"  {row['gbs']:7.1f} GB/s" if "gbs" in row else ""
    print(f"torch {name:52} {row['ms']:9.3f} ms{extra}")
for line in (out / "epochs.jsonl").read_text().splitlines() if (out / "epochs.jsonl").exists() else []:
    print(line)
if (out / "torch_epoch.json").exists():
    print("torch epoch:", (out / "torch_epoch.json").read_text().strip()[-300:])
print((out / "times.txt").read_text() if (out / "times.txt").exists() else "")
PY
