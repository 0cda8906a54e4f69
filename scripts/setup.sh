#!/usr/bin/env bash
# Installs the Debian packages dtsim needs. Safe to run twice: apt-get skips what is installed.
# The CUDA toolkit (nvcc, cuBLAS, NCCL) is not installed here: where /usr/local/cuda exists the
# CUDA parts are built, otherwise they are skipped.
set -euo pipefail
packages=(build-essential cmake pkg-config
          libsimgrid-dev libjansson-dev zlib1g-dev libopenblas-dev libcmocka-dev
          libopenmpi-dev openmpi-bin gnuplot-nox)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
