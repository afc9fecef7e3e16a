#!/usr/bin/env bash
# Builds Kiln's CPU backend for 64-bit ARM (aarch64) with Debian's cross compiler and runs
# the core tests and the CPU part of the conformance suite under qemu-user, through ctest
# (cmake/toolchains/aarch64-linux-gnu.cmake). Installs what is missing first: the cross
# compiler, qemu-user-static and the arm64 packages of the CPU backend's libraries. Ends
# with one summary: compiler, packages, build time, tests passed/failed/skipped, test time.
# Run as root on Debian 12 (otherwise it uses sudo when something has to be installed).
# Environment: KILN_BUILD_DIR (default build-aarch64), KILN_JOBS (default 2); CCACHE_DISABLE=1
# times a build without ccache.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${KILN_BUILD_DIR:-build-aarch64}
jobs=${KILN_JOBS:-2}

# ---- packages
host_packages=(cmake ninja-build ccache python3 g++-aarch64-linux-gnu qemu-user-static
               libeigen3-dev)  # Eigen: headers only, the same for every architecture
# The arm64 builds of the CPU backend's and the tests' libraries, installed beside the host's
# (Debian multiarch), and the arm64 loader and runtime libraries the tests run with under
# qemu. oneDNN's runtime library only: see "oneDNN's headers" below.
arm64_packages=(libc6 libstdc++6 libgomp1 libfmt-dev libdnnl2 libgtest-dev zlib1g-dev libstb-dev
                ocl-icd-opencl-dev)  # the CPU backend's CMake asks for OpenCL before oneDNN

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  sudo="sudo"
fi
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for package in "${host_packages[@]}"; do
  installed "$package" || missing+=("$package")
done
for package in "${arm64_packages[@]}"; do
  installed "$package:arm64" || missing+=("$package:arm64")
done
if ((${#missing[@]} > 0)); then
  echo "aarch64-check: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $sudo dpkg --add-architecture arm64
  fi
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# ---- oneDNN's headers and CMake package for arm64
# libdnnl-dev:arm64 cannot be installed beside libdnnl-dev:amd64 (the host build's): both
# ship /usr/include/oneapi/dnnl/dnnl_config.h and the two differ (Debian's arm64 oneDNN has
# no OpenCL GPU runtime), so dpkg refuses. The package is unpacked into the build folder
# instead, and its library links point at libdnnl2:arm64's, installed above.
dnnl_prefix=$PWD/$build_dir/arm64-dnnl
dnnl_version=$(dpkg-query -W -f='${Version}' libdnnl2:arm64)
if [[ ! -f $dnnl_prefix/version || $(cat "$dnnl_prefix/version") != "$dnnl_version" ]]; then
  rm -rf "$dnnl_prefix"
  mkdir -p "$dnnl_prefix/download"
  # As root, apt downloads as root: there is no sandbox user to hand the folder to.
  (cd "$dnnl_prefix/download" && apt-get download -q -o APT::Sandbox::User=root "libdnnl-dev:arm64=$dnnl_version")
  dpkg-deb -x "$dnnl_prefix"/download/libdnnl-dev_*_arm64.deb "$dnnl_prefix"
  for library in /usr/lib/aarch64-linux-gnu/libdnnl.so.*; do
    ln -sf "$library" "$dnnl_prefix/usr/lib/aarch64-linux-gnu/"
  done
  echo "$dnnl_version" >"$dnnl_prefix/version"
fi

# ---- configure and build: the CPU backend, the core tests and the conformance suite
# No GPU backend and no examples; the host's Vulkan headers and CUDA toolkit (x86-64) are
# not looked at. KILN_NATIVE=OFF leaves the instruction set at the cross compiler's
# default (armv8-a).
start=$SECONDS
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake -DKILN_NATIVE=OFF \
  -Ddnnl_DIR="$dnnl_prefix/usr/lib/aarch64-linux-gnu/cmake/dnnl" \
  -DKILN_CUDA=OFF -DKILN_ROCM=OFF -DCMAKE_DISABLE_FIND_PACKAGE_Vulkan=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DKILN_BUILD_EXAMPLES=OFF
cmake --build "$build_dir" -j "$jobs" --target kiln_core_tests kiln_conformance
build_seconds=$((SECONDS - start))

# ---- test under qemu-aarch64 (ctest runs each test through CMAKE_CROSSCOMPILING_EMULATOR)
# The conformance binary also holds the Dispatch cases, which run the CPU again through
# kiln::Dispatch: GTEST_FILTER keeps the CPU types (Cpu, Autodiff<Cpu>, Fusion<Cpu>,
# Autodiff<Fusion<Cpu>>) and the CPU's own suites (Elementwise* takes that suite's Dispatch
# cases too). The test of KILN_NUM_THREADS runs in
# cpu.threads_from_environment, which sets it. Each binary writes gtest's XML report, which
# the summary counts.
cpu_filter='*/cpu.*:*/autodiff_cpu.*:*/fusion_cpu.*:*/autodiff_fusion_cpu.*:Cpu*:Elementwise*:Program*:Provided*'
cpu_filter+='-CpuRuntime.KilnNumThreadsSetsTheDefault'
reports=$PWD/$build_dir/aarch64-reports
rm -rf "$reports"
start=$SECONDS
status=0
(cd "$build_dir" && GTEST_OUTPUT="xml:$reports/" ctest --output-on-failure -R '^core$') || status=1
(cd "$build_dir" && GTEST_OUTPUT="xml:$reports/" GTEST_FILTER=$cpu_filter \
  ctest --output-on-failure -R '^(conformance|cpu\.threads_from_environment)$') || status=1
test_seconds=$((SECONDS - start))

# ---- summary
minutes() { echo "$(($1 / 60)) min $(($1 % 60)) s"; }
counts=$(python3 - "$reports" <<'EOF'
import pathlib, sys, xml.etree.ElementTree as ET
passed = failed = skipped = 0
for report in sorted(pathlib.Path(sys.argv[1]).glob("*.xml")):
    for case in ET.parse(report).iter("testcase"):
        if case.find("failure") is not None:
            failed += 1
        elif case.get("result") == "skipped" or case.find("skipped") is not None:
            skipped += 1
        elif case.get("status") == "run":
            passed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
EOF
)
packages=$(dpkg-query -W -f='${Package}:${Architecture} ${Version}\n' "${arm64_packages[@]/%/:arm64}" \
           libeigen3-dev qemu-user-static)
echo "aarch64-check summary"
echo "  compiler: $(aarch64-linux-gnu-g++ --version | head -n 1)"
echo "  emulator: $(qemu-aarch64-static --version | head -n 1)"
echo "  packages: $(echo "$packages" | paste -sd ';' | sed 's/;/; /g') (libdnnl-dev:arm64 unpacked)"
echo "  build:    $(minutes "$build_seconds") (configure, CPU backend, core tests, conformance; -j $jobs${CCACHE_DISABLE:+, ccache off})"
echo "  tests:    $counts (core; conformance on the CPU types) in $(minutes "$test_seconds") under qemu"
exit "$status"
