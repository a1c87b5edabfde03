#!/bin/bash
# Builds <builddir>/ats-load: the load-trace subcommands of `ats` alone (trace, record, stress), for a
# machine where the whole project does not build (e.g. the GPU machine mid-development). Same sources
# as `ats`; only main() and the generated version header are made here.
#   usage: traces/build-loadtool.sh [builddir]   (default build-load; CUDA if nvcc is found)
# GSL and jansson may come from .deps/root (see ../shared/tools/device-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-load}
mkdir -p "$B/gen"
commit=$(git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
cat > "$B/gen/ats_version.h" <<H
#ifndef ATS_VERSION_H
#define ATS_VERSION_H
#define ATS_VERSION_STRING "0.1.0-load"
#define ATS_GIT_COMMIT "$commit"
#define ATS_DEFAULT_MODELS_DIR "$PWD/models"
#define ATS_DEFAULT_HW_DIR "$PWD/sim/hw"
#define ATS_DEFAULT_TRACES_DIR "$PWD/traces"
#endif
H
cat > "$B/gen/main_load.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <gsl/gsl_errno.h>
#include "cli.h"
int main(int argc, char **argv)
{
    gsl_set_error_handler_off();
    if (argc >= 2 && strcmp(argv[1], "trace") == 0) return ats_cmd_trace(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "record") == 0) return ats_cmd_record(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "stress") == 0) return ats_cmd_stress(argc - 1, argv + 1);
    fprintf(stderr, "usage: ats-load trace|record|stress ...\n");
    return 2;
}
C
H5I=""; H5L="-lhdf5"
if pkg-config --exists hdf5 2>/dev/null; then H5I=$(pkg-config --cflags hdf5); H5L=$(pkg-config --libs hdf5);
elif [ -d /usr/include/hdf5/serial ]; then H5I="-I/usr/include/hdf5/serial"; H5L="-L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5"; fi
DEPS=""
if [ -d .deps/root/usr ]; then DEPS="-I$PWD/.deps/root/usr/include -L$PWD/.deps/root/usr/lib/x86_64-linux-gnu -Wl,-rpath,$PWD/.deps/root/usr/lib/x86_64-linux-gnu"; fi
CU=""; CUL=""; NOCU="load/src/gpu_probe_none.c"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$NVCC" ] && [ "${ATS_CUDA:-AUTO}" != OFF ]; then
  CUDA_HOME=$(dirname "$(dirname "$NVCC")")
  "$NVCC" -O2 -arch=${CUDA_ARCH:-sm_90} -Xcompiler=-Wall,-Wextra -c load/cuda/gpu_probe.cu -o "$B/load_probe.o"
  NOCU=""
  CU="-DATS_HAVE_CUDA=1 -I$CUDA_HOME/include"; CUL="$B/load_probe.o -L$CUDA_HOME/lib64 -L$CUDA_HOME/lib64/stubs -lcudart -lstdc++"
fi
gcc -std=c11 -O2 -g -Wall -Wextra -D_GNU_SOURCE -DH5_USE_110_API $CU $H5I $DEPS \
  -Isched/include -Icommon/include -Iexec/include -Iload/include -Iload/src -Icli -I"$B/gen" \
  common/src/trace_io.c common/src/trace_import.c common/src/outfile.c sched/src/status.c cli/cli_util.c cli/cli_out.c cli/cmd_trace.c \
  cli/cmd_record.c cli/cmd_stress.c load/src/record.c load/src/stress.c $NOCU "$B/gen/main_load.c" \
  $CUL $H5L -ljansson -lgsl -lgslcblas -lpthread -lm -o "$B/ats-load"
echo "built $B/ats-load ($([ -n "$CU" ] && echo with || echo without) CUDA)"
