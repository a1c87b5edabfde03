/* cpuprobe.c — measures the int8 dot-product peak of sim/hw/h200-host.json (cpu.int8_peak_TOPS):
 * AVX-512 VNNI VPDPBUSD throughput, 1 thread and N threads (OpenMP), 12 independent accumulators
 * per thread so the loop is throughput-bound, not latency-bound. Standalone (not in CMake):
 *   gcc -O2 -mavx512f -mavx512vnni -fopenmp -o cpuprobe sim/hw/measure/cpuprobe.c && ./cpuprobe 15
 * One VPDPBUSD on zmm = 64 u8 x s8 multiply-adds = 128 int ops. Median of 5 runs. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* iters x 12 VPDPBUSD; returns a value that depends on the result so nothing is optimised away */
static int run(long iters)
{
    __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5);
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0,
            c8 = c0, c9 = c0, c10 = c0, c11 = c0;
    for (long i = 0; i < iters; i++) {
        c0 = _mm512_dpbusd_epi32(c0, a, b); c1 = _mm512_dpbusd_epi32(c1, a, b);
        c2 = _mm512_dpbusd_epi32(c2, a, b); c3 = _mm512_dpbusd_epi32(c3, a, b);
        c4 = _mm512_dpbusd_epi32(c4, a, b); c5 = _mm512_dpbusd_epi32(c5, a, b);
        c6 = _mm512_dpbusd_epi32(c6, a, b); c7 = _mm512_dpbusd_epi32(c7, a, b);
        c8 = _mm512_dpbusd_epi32(c8, a, b); c9 = _mm512_dpbusd_epi32(c9, a, b);
        c10 = _mm512_dpbusd_epi32(c10, a, b); c11 = _mm512_dpbusd_epi32(c11, a, b);
        __asm__ volatile("" : "+v"(a));
    }
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
                                 _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7)));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11)));
    return _mm512_reduce_add_epi32(s);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int nmax = argc > 1 ? atoi(argv[1]) : omp_get_max_threads();
    const long iters = 20000000;
    volatile int sink = 0;
    int counts[3] = {1, nmax / 2 > 1 ? nmax / 2 : 1, nmax};
    for (int k = 0; k < 3; k++) {
        int nt = counts[k];
        double v[5];
        for (int r = -1; r < 5; r++) {
            double t0 = now();
#pragma omp parallel num_threads(nt)
            {
                int x = run(iters);
#pragma omp atomic
                sink += x;
            }
            double dt = now() - t0;
            if (r >= 0) v[r] = dt;
        }
        qsort(v, 5, sizeof v[0], cmp);
        double ops = (double)nt * iters * 12 * 128;
        printf("VPDPBUSD zmm, %2d threads: %.3f s, %.3f TOPS int8 (%.1f GOPS/thread, %.2f G instr/s/thread)\n",
               nt, v[2], ops / v[2] / 1e12, ops / v[2] / 1e9 / nt, (double)iters * 12 / v[2] / 1e9);
    }
    return sink == 42;
}
