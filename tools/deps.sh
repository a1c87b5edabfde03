#!/bin/bash
# Installs ATS's build and test dependencies from Debian 12 (run as root). CUDA (nvcc + cuBLAS) is not
# a Debian package here: when /usr/local/cuda/bin/nvcc exists the build adds the GPU backend, otherwise
# it builds CPU-only. Open MPI (libopenmpi-dev, openmpi-bin) lets `mpirun -n N ats sweep` spread a sweep over ranks.
set -euo pipefail
pkgs=(build-essential cmake git pkg-config libhdf5-dev libgsl-dev libjansson-dev
      python3 python3-h5py python3-matplotlib hdf5-tools clang libclang-rt-14-dev
      libopenmpi-dev openmpi-bin)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
