#!/usr/bin/env bash
# On a GPU machine without the project's Debian packages: unpacks what scripts/gpu_bundle.sh
# made into ./build and /opt/dtsim-rt, and writes /opt/dtsim-rt/env.sh to source before running
# anything from it:
#   scripts/gpu_unbundle.sh [BUNDLE.tar.xz] && . /opt/dtsim-rt/env.sh
# env.sh puts the bundled libraries after the machine's CUDA, cuBLAS and NCCL on the library
# path, OpenMPI's launcher first on PATH, and OpenMPI's plugins and help texts where it looks.
# CTest's files name the build's absolute path at bundling time: when the repository sits
# elsewhere here, that path becomes a link to this checkout (created only where nothing is).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=$(realpath "${1:-$root/.gpu/bundle.tar.xz}")
rt=/opt/dtsim-rt
[ -f "$bundle" ] || { echo "gpu_unbundle: $bundle not found" >&2; exit 2; }
rm -rf "$rt" && mkdir -p "$rt"
xz -dc "$bundle" | tar xf - -C "$rt"
rm -rf "$root/build" && mv "$rt/build" "$root/build"

from=$(cat "$root/build/.bundled-from")
if [ "$from" != "$root/build" ]; then
  fromroot=$(dirname "$from")
  if [ ! -e "$fromroot" ]; then
    mkdir -p "$(dirname "$fromroot")" && ln -s "$root" "$fromroot"
  elif [ "$(realpath "$fromroot")" != "$root" ]; then
    echo "gpu_unbundle: $fromroot exists here and is not this checkout: CTest's paths will not resolve" >&2
  fi
fi

# CUDA's libraries from the machine: the toolkit's, then the Python wheels' (NCCL ships only there
# on images built around PyTorch).
cudalibs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && cudalibs="$cudalibs:$d"
done
for so in libnccl.so.2 libcublas.so.13 libcublasLt.so.13 libcudart.so.13; do
  if ! ldconfig -p | grep -q "$so"; then
    hit=$(find /usr/local /opt -name "$so" -print -quit 2>/dev/null || true)
    [ -n "$hit" ] && cudalibs="$cudalibs:$(dirname "$hit")"
  fi
done

# A library the machine has under the same name (soname) is the machine's to give: its OpenMPI's
# launcher and plugins, say, must load its own libmpi and PMIx, not this bundle's.
ldconfig -p | awk '{ print $1 }' | sort -u >"$rt/machine-libs"
for f in "$rt"/rt/lib/*; do
  grep -qxF "$(basename "$f")" "$rt/machine-libs" && rm -f "$f"
done
echo "gpu_unbundle: $(ls "$rt/rt/lib" | wc -l) bundled libraries the machine lacks: $(ls "$rt/rt/lib" | tr '\n' ' ')"

# OpenMPI finds its plugins, help texts and settings at the paths Debian built it for: put them
# there when the machine has none (nothing of the machine's own is replaced).
ompi=$rt/rt/openmpi
if [ -d "$ompi/lib" ]; then
  for pair in "lib:/usr/lib/x86_64-linux-gnu/openmpi/lib" "share:/usr/share/openmpi" "etc:/etc/openmpi"; do
    src=$ompi/${pair%%:*} dst=${pair#*:}
    [ -e "$dst" ] || { mkdir -p "$(dirname "$dst")" && cp -a "$src" "$dst"; }
  done
fi
# CTest runs mpirun by the path the build found it at (Debian: /usr/bin/mpirun).
mpiexec=$(sed -n 's/^MPIEXEC_EXECUTABLE:FILEPATH=//p' "$root/build/CMakeCache.txt")
if [ -n "$mpiexec" ] && [ ! -e "$mpiexec" ] && [ -x "$ompi/bin/orterun" ]; then
  mkdir -p "$(dirname "$mpiexec")" && ln -s "$ompi/bin/orterun" "$mpiexec"
fi
cat >"$rt/env.sh" <<EOF
export LD_LIBRARY_PATH="${cudalibs#:}:$rt/rt/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PATH="$ompi/bin:\$PATH"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
EOF
echo "gpu_unbundle: build/ and $rt ready; source $rt/env.sh"
