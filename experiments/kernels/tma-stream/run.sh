#!/bin/bash
# experiments/kernels/tma-stream/run.sh OUT — how fast do 1-D TMA bulk copies (cp.async.bulk + mbarriers)
# stream HBM into a shared-memory ring, by stage size, ring depth, blocks per SM, source alignment and
# consumer style, next to a plain streaming read? The ceiling GEMV v4's ring design can reach. Writes
# OUT/tma-stream.txt. GPU: sm_90.
set -u
OUT=${1:?usage: $0 OUT}; mkdir -p "$OUT"
nvcc -arch=sm_90 -O3 -o /tmp/tma_stream experiments/kernels/tma-stream/tma_stream.cu || exit 1
timeout 120 /tmp/tma_stream | tee "$OUT/tma-stream.txt"
