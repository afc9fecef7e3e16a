# Kiln for 64-bit ARM Linux, cross-compiled on a Debian x86-64 machine with Debian's cross
# compiler (g++-aarch64-linux-gnu) against Debian's arm64 packages installed beside the
# host's (dpkg --add-architecture arm64). ctest runs the test programs under qemu-user.
# scripts/aarch64-check.sh installs the packages, configures, builds and tests:
#   cmake -S . -B build-aarch64 -G Ninja -DKILN_NATIVE=OFF \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Multiarch: the arm64 packages put their libraries and CMake packages in
# /usr/lib/aarch64-linux-gnu and their headers in /usr/include and
# /usr/include/aarch64-linux-gnu, which Debian's cross compiler already searches. With the
# library architecture named, find_library and find_package look there and never in the
# host's /usr/lib/x86_64-linux-gnu; find_program still finds the host's tools (ccache, glslc).
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# The test programs run under qemu-user, with the arm64 dynamic loader and libraries of the
# arm64 packages (libc6:arm64 puts the loader at /lib/ld-linux-aarch64.so.1, where the
# programs look for it; the libraries are in /usr/lib/aarch64-linux-gnu). Not with
# `-L /usr/aarch64-linux-gnu`, the cross toolchain's own glibc: under it the conformance
# suite's first test spins forever in a mutex lock inside glibc, called from the loader.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static)
