# Cross-compiling radixlm for Linux on ARM64 with Debian's g++-aarch64-linux-gnu and the arm64
# multiarch libraries (scripts/test-arm64.sh installs both); binaries run under
# qemu-user-static (CTest runs every test through it: CMAKE_CROSSCOMPILING_EMULATOR).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Libraries from /usr/lib/aarch64-linux-gnu only; headers from /usr/include (multiarch).
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
# -cpu comes from QEMU_CPU in the environment (scripts/test-arm64.sh runs each dispatch level).
# No -L /usr/aarch64-linux-gnu: the binaries then load the arm64 multiarch libraries through
# /lib/ld-linux-aarch64.so.1 (libc6:arm64); the cross toolchain's own loader with the multiarch
# libc (two builds of glibc in one process) hangs in pthread_create under qemu.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static)
