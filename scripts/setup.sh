#!/usr/bin/env bash
# Installs the Debian 12 packages Kiln needs to build and test. Idempotent: when every
# package is already installed it does nothing (no apt-get update), so re-runs are fast.
# Run as root (CI does); otherwise it uses sudo when something has to be installed.
set -euo pipefail

packages=(
  cmake ninja-build g++ ccache          # toolchain
  libeigen3-dev libdnnl-dev             # CPU kernels: Eigen, oneDNN
  ocl-icd-opencl-dev                    # oneDNN's CMake package requires OpenCL headers
  libfmt-dev                            # formatting, used by the public headers
  libgtest-dev googletest               # tests
  libbenchmark-dev                      # bench/ (-DKILN_BUILD_BENCHMARKS=ON)
  python3                               # tests/golden and bench/ scripts
  libvulkan-dev glslang-dev spirv-tools # Vulkan backend: loader, headers, run-time GLSL compiler
  glslc                                 # Vulkan backend: kernels/glsl at build time; tests/codegen
  mesa-vulkan-drivers                   # lavapipe, the CPU Vulkan driver the Vulkan tests run on
  zlib1g-dev                            # kiln::data: gzip-compressed IDX, CIFAR and CSV files
  libstb-dev                            # kiln::data: stb_image decodes PNG/JPEG image folders (libstb)
  dataset-fashion-mnist                 # Fashion-MNIST in /usr/share/datasets (data tests, examples)
  libonnx-testdata                      # ONNX's node tests (tests/onnx runs them through kiln::onnx)
  libopenmpi-dev openmpi-bin            # kiln::dist: MPI (OpenMPI) and mpirun for the distributed tests
  iproute2                              # tests/dist/two_hosts.sh: two network namespaces as two MPI hosts
  hipcc libamdhip64-dev                 # HIP 5.2: kernels/cuda and the CUDA renderings compiled for AMD GPUs (tests/codegen)
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages are installed"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
