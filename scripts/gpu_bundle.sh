#!/usr/bin/env bash
# Packs a build made here (with nvcc, -DCMAKE_CUDA_ARCHITECTURES for the target GPU) for a GPU
# machine that has the CUDA toolkit but none of the project's Debian packages (jansson, SimGrid,
# OpenBLAS, OpenMPI, cmocka), such as a lent cloud GPU that cannot reach a package registry:
#   scripts/gpu_bundle.sh [BUILD_DIR] [OUT.tar.xz]        (defaults: build, .gpu/bundle.tar.xz)
# The archive holds BUILD_DIR's programs, data and CTest files (no objects, no test outputs),
# rt/lib/: every shared library they and OpenMPI load, except the C library, the C++ runtime
# and CUDA's own libraries (cudart, cuBLAS, cuBLASLt, NCCL: the GPU machine's must match its
# driver), and rt/openmpi/: OpenMPI's plugins, help texts and settings. On the GPU machine,
# scripts/gpu_unbundle.sh unpacks it so that ctest, tests/gpu/calibrate.sh and mpirun run there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath "${1:-$root/build}")
out=$(realpath -m "${2:-$root/.gpu/bundle.tar.xz}")
[ -x "$build/bin/dtrain" ] || { echo "gpu_bundle: $build/bin/dtrain not found: build first" >&2; exit 2; }
grep -q 'DTSIM_CUDA:BOOL=ON' "$build/CMakeCache.txt" ||
  { echo "gpu_bundle: $build was configured without CUDA (DTSIM_CUDA=OFF)" >&2; exit 2; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/rt/lib" "$stage/rt/openmpi"

# The build tree minus what only the compiler and earlier test runs left there.
(cd "$(dirname "$build")" && tar cf - --exclude='*.o' --exclude='*.a' --exclude=CMakeFiles \
   --exclude=Testing --exclude=compile_commands.json --exclude=gpu-run --exclude=gpu-cal \
   --exclude='ck*' --exclude='*.bin' "$(basename "$build")") | tar xf - -C "$stage"
[ "$(basename "$build")" = build ] || mv "$stage/$(basename "$build")" "$stage/build"
echo "$build" >"$stage/build/.bundled-from" # the absolute path CTest's files name

# OpenMPI as Debian installs it: the launcher, its plugins (loaded by path at run time),
# help texts and default settings.
ompi_lib=/usr/lib/x86_64-linux-gnu/openmpi
if [ -d "$ompi_lib" ]; then
  cp -a "$ompi_lib/lib" "$stage/rt/openmpi/lib"
  cp -aL /usr/share/openmpi "$stage/rt/openmpi/share"
  cp -aL /etc/openmpi "$stage/rt/openmpi/etc"
  mkdir -p "$stage/rt/openmpi/bin"
  cp -L "$(readlink -f /usr/bin/mpirun)" "$stage/rt/openmpi/bin/orterun"
  [ -x /usr/bin/orted ] && cp -L /usr/bin/orted "$stage/rt/openmpi/bin/orted"
fi

# Every library the programs, the test binaries and OpenMPI's plugins load, resolved here.
skip='^(libc|libm|libdl|librt|libpthread|libutil|libresolv|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia-ml)\.so'
{ find "$stage/build/bin" "$stage/build/lib" -type f -perm -u+x 2>/dev/null
  find "$stage/build" -name '*.so*' -type f
  find "$stage/rt/openmpi" -name '*.so*' -type f
  [ -f "$stage/rt/openmpi/bin/orterun" ] && echo "$stage/rt/openmpi/bin/orterun"
} | sort -u | while read -r f; do
  ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
  name=$(basename "$lib")
  echo "$name" | grep -Eq "$skip" && continue
  [ -e "$stage/rt/lib/$name" ] || cp -L "$lib" "$stage/rt/lib/$name"
done

mkdir -p "$(dirname "$out")"
tmp="$out.partial"
tar cf - -C "$stage" build rt | xz -T0 -6 >"$tmp"
mv "$tmp" "$out"
echo "gpu_bundle: $out ($(du -h "$out" | cut -f1); $(ls "$stage/rt/lib" | wc -l) libraries)"
