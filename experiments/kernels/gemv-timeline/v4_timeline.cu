// experiments/kernels/gemv-timeline/v4_timeline.cu — where does a GEMV v4 call's time go when calls run
// back to back? Builds exec/kernels/cuda/gemv_v4.cu itself with V4_MARK defined, so thread 0 of every
// block records %globaltimer and clock64 at the kernel's marks (0 start, 1 copies issued, 2 after
// griddepcontrol.wait, 3 x quantized, 4 warp 0's first slot landed, 5 all items done, 6 end), then times a
// burst of back-to-back calls over cycled weight copies (> 1 GiB, as `ats bench kernels`) and prints, per
// call: when its blocks started against the previous call's end, how long the wait, the quantization, the
// first copy and the item loop took (median / max over blocks), and the period between call ends.
// Timing only: the weights are a constant byte pattern.
// Build (repository root, sm_90; NDEBUG, or every launch syncs): nvcc -arch=sm_90 -O3 -DNDEBUG -std=c++17 -Iexec/include -Isched/include -Iexec/kernels/cuda \
//   -o v4_timeline experiments/kernels/gemv-timeline/v4_timeline.cu   (run.sh does this)
// Run: ./v4_timeline q4_0|q4_k ROWS COLS [CALLS]   (ATS_GEMV_V4_* knobs apply as in the library)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

struct ex_gpu {
    int sm, cc;
};

__device__ unsigned long long *v4tr_buf; /* [call][block][8][2]: marks 0-6 (globaltimer, clock64), then the
                                          * clock64 cycles the block's warps spent in mbarrier waits (mean, max) */
__device__ int *v4tr_cnt;                /* per block: calls seen */
__device__ int v4tr_max_calls;

static __device__ __forceinline__ unsigned long long *v4tr_waitc()
{
    __shared__ unsigned long long w[32];
    return w;
}
static __device__ __forceinline__ void v4tr_mark(int k)
{
    __shared__ int call;
    if (k == 0) {
        call = atomicAdd(&v4tr_cnt[blockIdx.x], 1);
        for (int i = 0; i < 32; i++) v4tr_waitc()[i] = 0; /* read after the kernel's __syncthreads */
    }
    if (call >= v4tr_max_calls) return;
    unsigned long long gt;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
    unsigned long long *p = v4tr_buf + (((size_t)call * gridDim.x + blockIdx.x) * 8 + k) * 2;
    p[0] = gt;
    p[1] = (unsigned long long)clock64();
    if (k == 5) {
        unsigned long long sum = 0, mx = 0;
        for (int i = 0; i < (int)(blockDim.x / 32); i++) sum += v4tr_waitc()[i], mx = max(mx, v4tr_waitc()[i]);
        p[4] = sum / (blockDim.x / 32); /* record 7 = p + 2 records of 2 */
        p[5] = mx;
    }
}
#define V4_WAIT_BEGIN const long long v4tr_t0 = clock64();
#define V4_WAIT_END                                                                    \
    if ((threadIdx.x & 31) == 0) v4tr_waitc()[threadIdx.x >> 5] += clock64() - v4tr_t0;
#define V4_MARK(k)                            \
    do {                                      \
        if (threadIdx.x == 0) v4tr_mark(k);   \
    } while (0)

#include "../../../exec/kernels/cuda/gemv_v4.cu"

extern "C" ex_gpu_status exc_fail(cudaError_t e, const char *what, const char *file, int line)
{
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, cudaGetErrorString(e));
    return EX_GPU_ECUDA;
}
int exc_sm_count(const ex_gpu *g) { return g->sm; }
int exc_cc_major(const ex_gpu *g) { return g->cc; }

#define CK(x)                                                                                     \
    do {                                                                                          \
        cudaError_t e_ = (x);                                                                     \
        if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } \
    } while (0)

static double med(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s q4_0|q4_k ROWS COLS [CALLS]\n", argv[0]);
        return 2;
    }
    const int type = strcmp(argv[1], "q4_k") == 0 ? ATS_Q_Q4_K : ATS_Q_Q4_0;
    const int64_t rows = atoll(argv[2]), cols = atoll(argv[3]);
    const int calls = argc > 4 ? atoi(argv[4]) : 48;
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    ex_gpu g = {pr.multiProcessorCount, pr.major};
    const int64_t bytes = rows * (cols / 256) * 144;
    const int nc = (int)std::max<int64_t>(2, ((int64_t)1 << 30) / bytes + 1);
    std::vector<uint8_t *> w(nc);
    for (auto &p : w) {
        CK(cudaMalloc(&p, bytes));
        CK(cudaMemset(p, 0x11, bytes));
    }
    float *x, *y;
    CK(cudaMalloc(&x, cols * 4));
    CK(cudaMalloc(&y, rows * 4));
    std::vector<float> hx(cols);
    for (int64_t i = 0; i < cols; i++) hx[i] = (float)((i * 7919) % 201 - 100) / 37.0f;
    CK(cudaMemcpy(x, hx.data(), cols * 4, cudaMemcpyHostToDevice));
    const int grid = (int)v4_grid(rows, g.sm);
    unsigned long long *buf;
    int *cnt;
    const size_t nbuf = (size_t)calls * grid * 8 * 2;
    CK(cudaMalloc(&buf, nbuf * 8));
    CK(cudaMalloc(&cnt, grid * 4));
    CK(cudaMemcpyToSymbol(v4tr_buf, &buf, sizeof buf));
    CK(cudaMemcpyToSymbol(v4tr_cnt, &cnt, sizeof cnt));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int used = 0, zero = 0;
    for (int r = 0; r < 3; r++)
        if (exc_gemv_v4(&g, type, w[r % nc], rows, cols, x, y, s, &used) != EX_GPU_OK || !used) {
            fprintf(stderr, "v4 does not take %s %lldx%lld here\n", argv[1], (long long)rows, (long long)cols);
            return 1;
        }
    CK(cudaStreamSynchronize(s));
    v4_geom geo;
    const size_t smem = v4_geometry(rows, cols, grid, v4_config(), &geo);
    printf("%s %lldx%lld, %.1f MB, grid %d, smem %zu B, chunks/row %d, slots/warp %d of %d B, %d copies cycled\n", argv[1],
           (long long)rows, (long long)cols, bytes / 1e6, grid, smem, geo.nch, geo.S, geo.slot, nc);
    /* untraced burst first (the marks' stores are not in it), then the traced one */
    CK(cudaMemcpyToSymbol(v4tr_max_calls, &zero, sizeof zero));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float ms = 0;
    for (int pass = 0; pass < 2; pass++) {
        CK(cudaMemset(cnt, 0, grid * 4));
        CK(cudaMemset(buf, 0, nbuf * 8));
        if (pass == 1) CK(cudaMemcpyToSymbol(v4tr_max_calls, &calls, sizeof calls));
        CK(cudaDeviceSynchronize());
        CK(cudaEventRecord(e0, s));
        for (int c = 0; c < calls; c++) exc_gemv_v4(&g, type, w[c % nc], rows, cols, x, y, s, &used);
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        printf("%s burst: %d calls, %.2f us a call = %.0f GB/s\n", pass ? "traced" : "untraced", calls, ms * 1e3 / calls,
               bytes / (ms * 1e-3 / calls) / 1e9);
    }
    std::vector<unsigned long long> h(nbuf);
    CK(cudaMemcpy(h.data(), buf, nbuf * 8, cudaMemcpyDeviceToHost));
    auto GT = [&](int c, int b, int k) { return (double)h[(((size_t)c * grid + b) * 8 + k) * 2]; };
    auto CL = [&](int c, int b, int k) { return (double)h[(((size_t)c * grid + b) * 8 + k) * 2 + 1]; };
    /* SM clock rate: clock64 over globaltimer from start to end of each block of each call (one SM each;
     * clock64 is not comparable between SMs), the median */
    std::vector<double> rates;
    for (int c = 0; c < calls; c++)
        for (int b = 0; b < grid; b++)
            if (GT(c, b, 6) > GT(c, b, 0)) rates.push_back((CL(c, b, 6) - CL(c, b, 0)) / (GT(c, b, 6) - GT(c, b, 0)));
    const double ghz = med(rates);
    std::vector<double> gts;
    for (int c = 0; c < calls; c++)
        for (int b = 0; b < grid; b++) gts.push_back(GT(c, b, 0));
    std::sort(gts.begin(), gts.end());
    double res = 1e30;
    for (size_t i = 1; i < gts.size(); i++)
        if (gts[i] > gts[i - 1]) res = std::min(res, gts[i] - gts[i - 1]);
    printf("SM clock %.3f GHz (clock64 / globaltimer, block 0); smallest globaltimer step seen %.0f ns\n", ghz, res);
    printf("times in us; start/wait/end relative to the previous call's last block end (prev_end);\n"
           "durations from clock64 (median over blocks / max)\n");
    printf("%4s %8s %8s %8s %8s %13s %13s %13s %13s %8s %8s\n", "call", "st_min", "st_max", "wait_med", "wait_max",
           "issue med/mx", "quant med/mx", "first med/mx", "items med/mx", "end_min", "end_max");
    std::vector<double> wav, wmx;
    std::vector<double> per, stmin, wmed, wmax, qmed, fmed, imed, imax, emin, tailv, headv;
    for (int c = 1; c < calls; c++) {
        double prev_end = 0;
        for (int b = 0; b < grid; b++) prev_end = std::max(prev_end, GT(c - 1, b, 6));
        std::vector<double> st, wt, en, is, qu, fi, it;
        for (int b = 0; b < grid; b++) {
            st.push_back((GT(c, b, 0) - prev_end) / 1e3);
            wt.push_back((GT(c, b, 2) - prev_end) / 1e3);
            en.push_back((GT(c, b, 6) - prev_end) / 1e3);
            is.push_back((CL(c, b, 1) - CL(c, b, 0)) / ghz / 1e3);
            qu.push_back((CL(c, b, 3) - CL(c, b, 2)) / ghz / 1e3);
            fi.push_back((CL(c, b, 4) - CL(c, b, 3)) / ghz / 1e3);
            it.push_back((CL(c, b, 5) - CL(c, b, 3)) / ghz / 1e3);
            wav.push_back(GT(c, b, 7) / ghz / 1e3); /* record 7 holds (mean, max) wait cycles */
            wmx.push_back(CL(c, b, 7) / ghz / 1e3);
        }
        auto mx = [](const std::vector<double> &v) { return *std::max_element(v.begin(), v.end()); };
        auto mn = [](const std::vector<double> &v) { return *std::min_element(v.begin(), v.end()); };
        if (c <= 3)
            printf("%4d %8.2f %8.2f %8.2f %8.2f %6.2f/%6.2f %6.2f/%6.2f %6.2f/%6.2f %6.2f/%6.2f %8.2f %8.2f\n", c, mn(st), mx(st),
                   med(wt), mx(wt), med(is), mx(is), med(qu), mx(qu), med(fi), mx(fi), med(it), mx(it), mn(en), mx(en));
        per.push_back(mx(en));
        stmin.push_back(mn(st));
        wmed.push_back(med(wt));
        wmax.push_back(mx(wt));
        qmed.push_back(med(qu));
        fmed.push_back(med(fi));
        imed.push_back(med(it));
        imax.push_back(mx(it));
        emin.push_back(mn(en));
        tailv.push_back(mx(en) - mn(en));
        headv.push_back(mx(wt) - med(wt));
    }
    printf("median over calls: period %.2f us (%.0f GB/s), first block start %.2f, wait returns %.2f (max %.2f), quantize %.2f,"
           " first slot after quantize %.2f, items %.2f (max %.2f), first block end %.2f, tail (last - first block end) %.2f\n",
           med(per), bytes / (med(per) * 1e-6) / 1e9, med(stmin), med(wmed), med(wmax), med(qmed), med(fmed), med(imed),
           med(imax), med(emin), med(tailv));
    printf("mbarrier waits in the item loop, per warp: mean %.2f us (median over blocks and calls), the block's slowest warp %.2f us\n",
           med(wav), med(wmx));
    return 0;
}
