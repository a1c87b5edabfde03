/*
 * test_sim_engine — the simulator core against hand-computed answers and a list-scheduling oracle.
 *
 *  1. max-min water-filling on small cases worked by hand;
 *  2. a copy-engine transfer and an SM copy sharing one link (hand-computed finish times);
 *  3. host-memory interference between a CPU op and a DMA transfer (hand-computed);
 *  4. load-trace change points rescale remaining work (hand-computed);
 *  5. random programs without sharing: every start/end equals the list-scheduling recurrence
 *     start = max(queue predecessor end, dependency ends), end = start + latency + work / rate;
 *  6. the same program run twice gives bit-identical times;
 *  7. random programs WITH link sharing, host-memory interference, a random trace and (in half of
 *     them) a DRAM-read-over-threads curve against a brute-force fixed-step integration of the same
 *     model (independent code, no events);
 *  8. the memory part of a CPU op under CPU availability a with a saturating DRAM curve: at
 *     beta(a) = bw(a T) / bw(T) of idle speed, the compute part at a (hand-computed).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine.h"
#include "testutil.h"

static ats_hw test_hw(void)
{
    ats_hw hw;
    memset(&hw, 0, sizeof hw);
    strcpy(hw.name, "test");
    hw.cpu_threads = 8;
    hw.cpu_flops = 1e12;
    hw.cpu_mem_bw = 50e9;
    hw.gpu_flops = 1e14;
    hw.gpu_mem_bw = 1e12;
    hw.gpu_vram_bytes = 8ull << 30;
    hw.pcie_h2d_bw = 10e9;
    hw.pcie_d2h_bw = 10e9;
    hw.pcie_sm_copy_bw = 8e9;
    hw.pcie_link_bw = 12e9;
    hw.pcie_latency_s = 0.0;
    hw.n_copy_engines = 2;
    hw.hostmem_cpu_factor = 1.0;
    hw.hostmem_dma_factor = 1.0;
    hw.eff_cpu.gemv_bw = hw.eff_cpu.gemm_flop = hw.eff_cpu.attn_bw = hw.eff_cpu.attn_flop = 1.0;
    hw.eff_gpu = hw.eff_cpu;
    return hw;
}

static void test_maxmin(void)
{
    double r[4];
    const double c1[3] = {10, 30, 50};
    sim_maxmin_share(3, c1, 60, r); /* 10 capped; 50 left for two → 25, 25 */
    CHECK_NEAR(r[0], 10, 1e-12);
    CHECK_NEAR(r[1], 25, 1e-12);
    CHECK_NEAR(r[2], 25, 1e-12);
    const double c2[2] = {5, 5};
    sim_maxmin_share(2, c2, 100, r); /* under-subscribed: each its cap */
    CHECK_NEAR(r[0], 5, 1e-12);
    CHECK_NEAR(r[1], 5, 1e-12);
    const double c3[4] = {40, 1, 40, 4};
    sim_maxmin_share(4, c3, 21, r); /* 1 and 4 capped; 16 left for two → 8, 8 */
    CHECK_NEAR(r[0], 8, 1e-12);
    CHECK_NEAR(r[1], 1, 1e-12);
    CHECK_NEAR(r[2], 8, 1e-12);
    CHECK_NEAR(r[3], 4, 1e-12);
    const double c4[2] = {10, 8};
    sim_maxmin_share(2, c4, 12, r); /* 6, 6 */
    CHECK_NEAR(r[0], 6, 1e-12);
    CHECK_NEAR(r[1], 6, 1e-12);
}

static sim_engine *mk(const ats_hw *hw, const sim_trace *tr, int hostmem)
{
    sim_engine_opts o = sim_engine_opts_default();
    o.hostmem = hostmem;
    sim_engine *e = NULL;
    ats_err err = {{0}};
    enum ats_status st = sim_engine_new(hw, tr, &o, &e, &err);
    CHECK_MSG(st == ATS_OK, "%s", err.msg);
    return e;
}

static void test_link_sharing(void)
{
    ats_hw hw = test_hw();
    sim_engine *e = mk(&hw, NULL, 0);
    sim_prog p;
    sim_prog_init(&p);
    int32_t a, b;
    CHECK(sim_prog_add(&p, SIM_TASK_CE_H2D, SIM_Q_CE0, 12e9, NULL, 0, &a, NULL) == ATS_OK);
    CHECK(sim_prog_add(&p, SIM_TASK_SM_H2D, SIM_Q_GPU, 4e9, NULL, 0, &b, NULL) == ATS_OK);
    CHECK(sim_engine_run(e, &p, NULL) == ATS_OK);
    /* caps 10 and 8 GB/s on a 12 GB/s link → 6 and 6. The SM copy ends at 4/6 s with 4 GB of the
     * transfer done; the remaining 8 GB at the full 10 GB/s take 0.8 s more. */
    CHECK_NEAR(p.tasks[b].t_end_s, 4.0 / 6.0, 1e-12);
    CHECK_NEAR(p.tasks[a].t_end_s, 4.0 / 6.0 + 0.8, 1e-12);
    CHECK_NEAR(sim_engine_now(e), 4.0 / 6.0 + 0.8, 1e-12);
    CHECK_NEAR(sim_engine_stats(e)->bytes_h2d, 16e9, 1);
    /* the opposite direction does not share: a d2h SM copy alongside a CE h2d */
    sim_prog_clear(&p);
    CHECK(sim_prog_add(&p, SIM_TASK_CE_H2D, SIM_Q_CE0, 10e9, NULL, 0, &a, NULL) == ATS_OK);
    CHECK(sim_prog_add(&p, SIM_TASK_SM_D2H, SIM_Q_GPU, 8e9, NULL, 0, &b, NULL) == ATS_OK);
    double t0 = sim_engine_now(e);
    CHECK(sim_engine_run(e, &p, NULL) == ATS_OK);
    CHECK_NEAR(p.tasks[a].t_end_s - t0, 1.0, 1e-12);
    CHECK_NEAR(p.tasks[b].t_end_s - t0, 1.0, 1e-12);
    /* two copy engines and an SM copy: caps 10, 10, 8 on 12 → 4 each. SM (4 GB) ends at 1 s; then
     * the two CE flows (6 GB each, 2 GB left) share 12 → 6 each: 1/3 s more. */
    sim_prog_clear(&p);
    int32_t c;
    CHECK(sim_prog_add(&p, SIM_TASK_CE_H2D, SIM_Q_CE0, 6e9, NULL, 0, &a, NULL) == ATS_OK);
    CHECK(sim_prog_add(&p, SIM_TASK_CE_H2D, SIM_Q_CE0 + 1, 6e9, NULL, 0, &c, NULL) == ATS_OK);
    CHECK(sim_prog_add(&p, SIM_TASK_SM_H2D, SIM_Q_GPU, 4e9, NULL, 0, &b, NULL) == ATS_OK);
    t0 = sim_engine_now(e);
    CHECK(sim_engine_run(e, &p, NULL) == ATS_OK);
    CHECK_NEAR(p.tasks[b].t_end_s - t0, 1.0, 1e-12);
    CHECK_NEAR(p.tasks[a].t_end_s - t0, 1.0 + 1.0 / 3.0, 1e-12);
    CHECK_NEAR(p.tasks[c].t_end_s - t0, 1.0 + 1.0 / 3.0, 1e-12);
    sim_prog_free(&p);
    sim_engine_free(e);
}

static void test_hostmem(void)
{
    ats_hw hw = test_hw();
    hw.pcie_link_bw = 100e9; /* no link sharing here */
    hw.hostmem_cpu_factor = 0.5;
    hw.hostmem_dma_factor = 0.9;
    sim_engine *e = mk(&hw, NULL, 1);
    sim_prog p;
    sim_prog_init(&p);
    int32_t cpu, dma;
    /* CPU op: 1 s of memory-bound work; DMA: 4.5 GB. With the CPU reading, the DMA cap is
     * 0.9 · 10 = 9 GB/s = the calibrated operating point (u = 9 / (10 · 0.9) = 1), so the CPU runs
     * at f = 0.5. DMA ends at 4.5 / 9 = 0.5 s, when the CPU has done 0.25 s of work; the remaining
     * 0.75 s run at full speed: CPU ends at 1.25 s. */
    CHECK(sim_prog_add(&p, SIM_TASK_CPU, SIM_Q_CPU, 1.0, NULL, 0, &cpu, NULL) == ATS_OK);
    CHECK(sim_prog_add(&p, SIM_TASK_CE_H2D, SIM_Q_CE0, 4.5e9, NULL, 0, &dma, NULL) == ATS_OK);
    CHECK(sim_engine_run(e, &p, NULL) == ATS_OK);
    CHECK_NEAR(p.tasks[dma].t_end_s, 0.5, 1e-12);
    CHECK_NEAR(p.tasks[cpu].t_end_s, 1.25, 1e-12);
    /* a compute-bound CPU op (flop share 1, memory share 0.3) is not slowed by the DMA:
     * max(1, 0.3 / 0.5) = 1; and it barely slows the DMA: cap 10 · (1 - 0.1 · 0.3) = 9.7 GB/s */
    sim_prog_clear(&p);
    CHECK(sim_prog_add(&p, SIM_TASK_CPU, SIM_Q_CPU, 1.0, NULL, 0, &cpu, NULL) == ATS_OK);
    p.tasks[cpu].mem_frac = 0.3;
    p.tasks[cpu].flop_frac = 1.0;
    CHECK(sim_prog_add(&p, SIM_TASK_CE_H2D, SIM_Q_CE0, 9.7e9, NULL, 0, &dma, NULL) == ATS_OK);
    double t0 = sim_engine_now(e);
    CHECK(sim_engine_run(e, &p, NULL) == ATS_OK);
    CHECK_NEAR(p.tasks[cpu].t_end_s - t0, 1.0, 1e-12);
    CHECK_NEAR(p.tasks[dma].t_end_s - t0, 1.0, 1e-12);
    /* with interference off both run at their idle speed */
    sim_engine_free(e);
    e = mk(&hw, NULL, 0);
    sim_prog_clear(&p);
    CHECK(sim_prog_add(&p, SIM_TASK_CPU, SIM_Q_CPU, 1.0, NULL, 0, &cpu, NULL) == ATS_OK);
    CHECK(sim_prog_add(&p, SIM_TASK_CE_H2D, SIM_Q_CE0, 4.5e9, NULL, 0, &dma, NULL) == ATS_OK);
    CHECK(sim_engine_run(e, &p, NULL) == ATS_OK);
    CHECK_NEAR(p.tasks[dma].t_end_s, 0.45, 1e-12);
    CHECK_NEAR(p.tasks[cpu].t_end_s, 1.0, 1e-12);
    sim_prog_free(&p);
    sim_engine_free(e);
}

/* the DESIGN.md measurement (H200 machine, 8 reader threads): CPU 72.7 GB/s alone, copy engine
 * 55.4 GB/s alone; together CPU 34.8 and copy engine 53.6 GB/s. With the factors taken from that
 * table the engine reproduces both rates while the two overlap. */
static void test_hostmem_calibration(void)
{
    ats_hw hw = test_hw();
    hw.pcie_h2d_bw = 55.4e9;
    hw.pcie_link_bw = 63e9;
    hw.hostmem_cpu_factor = 34.8 / 72.7;
    hw.hostmem_dma_factor = 53.6 / 55.4;
    sim_engine *e = mk(&hw, NULL, 1);
    sim_prog p;
    sim_prog_init(&p);
    int32_t cpu, dma;
    /* the CPU task reads 72.7 GB at 72.7 GB/s alone (1 s of work); the transfer is long */
    CHECK(sim_prog_add(&p, SIM_TASK_CPU, SIM_Q_CPU, 1.0, NULL, 0, &cpu, NULL) == ATS_OK);
    CHECK(sim_prog_add(&p, SIM_TASK_CE_H2D, SIM_Q_CE0, 1000e9, NULL, 0, &dma, NULL) == ATS_OK);
    CHECK(sim_engine_run(e, &p, NULL) == ATS_OK);
    /* CPU at 34.8 GB/s: 72.7 GB take 72.7 / 34.8 s; meanwhile the DMA moved 53.6 GB/s of it */
    double t_cpu = 72.7 / 34.8;
    CHECK_NEAR(p.tasks[cpu].t_end_s, t_cpu, 1e-9);
    CHECK_NEAR(p.tasks[dma].t_end_s, t_cpu + (1000e9 - 53.6e9 * t_cpu) / 55.4e9, 1e-9);
    sim_prog_free(&p);
    sim_engine_free(e);
}

static void test_trace(void)
{
    ats_hw hw = test_hw();
    hw.pcie_latency_s = 0.01;
    const double t[3] = {0.0, 0.5, 2.0}, cpu[3] = {1.0, 0.25, 1.0}, gpu[3] = {1.0, 0.5, 1.0},
                 pcie[3] = {1.0, 0.2, 0.4};
    sim_trace tr = {3, t, cpu, gpu, pcie};
    sim_engine *e = mk(&hw, &tr, 0);
    sim_prog p;
    sim_prog_init(&p);
    int32_t g, c, x;
    CHECK(sim_prog_add(&p, SIM_TASK_GPU, SIM_Q_GPU, 1.0, NULL, 0, &g, NULL) == ATS_OK);
    CHECK(sim_prog_add(&p, SIM_TASK_CPU, SIM_Q_CPU, 0.75, NULL, 0, &c, NULL) == ATS_OK);
    CHECK(sim_prog_add(&p, SIM_TASK_CE_H2D, SIM_Q_CE0, 8e9, NULL, 0, &x, NULL) == ATS_OK);
    CHECK(sim_engine_run(e, &p, NULL) == ATS_OK);
    /* GPU: 0.5 s done by 0.5, the other 0.5 at half speed → 1.5 */
    CHECK_NEAR(p.tasks[g].t_end_s, 1.5, 1e-12);
    /* CPU: 0.5 done by 0.5, 0.25 at quarter speed → 1.5 */
    CHECK_NEAR(p.tasks[c].t_end_s, 1.5, 1e-12);
    /* transfer: latency 0.01, then 10 GB/s until 0.5 (4.9 GB), then 2 GB/s until 2.0 (3 GB),
     * then 4 GB/s for the last 0.1 GB → 2.025 */
    CHECK_NEAR(p.tasks[x].t_end_s, 2.025, 1e-12);
    double a_cpu, a_gpu, a_pcie;
    sim_engine_avail(e, &a_cpu, &a_gpu, &a_pcie);
    CHECK(a_cpu == 1.0 && a_gpu == 1.0 && a_pcie == 0.4);
    sim_prog_free(&p);
    sim_engine_free(e);

    /* a trace offset shifts the replay; advance() crosses change points while idle */
    sim_engine_opts o = sim_engine_opts_default();
    o.trace_offset_s = 0.25;
    CHECK(sim_engine_new(&hw, &tr, &o, &e, NULL) == ATS_OK);
    sim_engine_advance(e, 1.0);
    sim_engine_avail(e, &a_cpu, NULL, NULL);
    CHECK(a_cpu == 0.25);
    sim_engine_advance(e, 1.75);
    sim_engine_avail(e, &a_cpu, NULL, NULL);
    CHECK(a_cpu == 1.0);
    sim_engine_free(e);
}

/* random programs without link sharing against the list-scheduling recurrence */
static void test_random_oracle(uint64_t *rs)
{
    ats_hw hw = test_hw();
    hw.pcie_latency_s = 1e-5;
    hw.pcie_link_bw = 1e12; /* never binding */
    hw.n_copy_engines = 2;
    sim_engine *e = mk(&hw, NULL, 0);
    sim_prog p;
    sim_prog_init(&p);
    double *end = malloc(sizeof(double) * 400), *start = malloc(sizeof(double) * 400);
    for (int rep = 0; rep < 200; rep++) {
        sim_prog_clear(&p);
        int n = 1 + (int)(tu_rand(rs) % 300);
        double qend[SIM_MAX_QUEUES];
        double t0 = sim_engine_now(e);
        for (int q = 0; q < SIM_MAX_QUEUES; q++) qend[q] = t0;
        for (int i = 0; i < n; i++) {
            /* queues: CPU, GPU (GPU op only: an SM copy could overlap a CE flow), CE0, CE1 (one
             * direction each, so no two flows share a direction) */
            int pick = (int)(tu_rand(rs) % 4);
            sim_task_kind k = pick == 0 ? SIM_TASK_CPU : pick == 1 ? SIM_TASK_GPU
                              : pick == 2 ? SIM_TASK_CE_H2D : SIM_TASK_CE_D2H;
            int q = pick == 0 ? SIM_Q_CPU : pick == 1 ? SIM_Q_GPU : pick == 2 ? SIM_Q_CE0 : SIM_Q_CE0 + 1;
            double work = pick < 2 ? tu_uniform(rs, 1e-6, 1e-3) : tu_uniform(rs, 1e3, 1e7);
            int32_t deps[4];
            int nd = i ? (int)(tu_rand(rs) % 4) : 0;
            for (int d = 0; d < nd; d++) deps[d] = (int32_t)(tu_rand(rs) % (uint64_t)i);
            int32_t idx;
            CHECK(sim_prog_add(&p, k, q, work, deps, nd, &idx, NULL) == ATS_OK);
            double s = qend[q];
            for (int d = 0; d < nd; d++) s = end[deps[d]] > s ? end[deps[d]] : s;
            start[i] = s;
            double dur = pick < 2 ? work : hw.pcie_latency_s + work / 10e9;
            end[i] = s + dur;
            qend[q] = end[i];
        }
        CHECK(sim_engine_run(e, &p, NULL) == ATS_OK);
        double last = t0;
        int bad = 0;
        for (int i = 0; i < n; i++) {
            if (fabs(p.tasks[i].t_start_s - start[i]) > 1e-12 * (1 + fabs(start[i])) ||
                fabs(p.tasks[i].t_end_s - end[i]) > 1e-12 * (1 + fabs(end[i])))
                bad++;
            last = end[i] > last ? end[i] : last;
        }
        CHECK_MSG(bad == 0, "rep %d: %d of %d tasks differ from the oracle", rep, bad, n);
        CHECK_NEAR(sim_engine_now(e), last, 1e-12 * (1 + last));
    }
    /* reproducibility: rerun the last program on a fresh engine, identical bits */
    sim_engine *e2 = mk(&hw, NULL, 0);
    sim_prog q2 = p;
    q2.tasks = malloc(sizeof(sim_task) * (size_t)p.n);
    memcpy(q2.tasks, p.tasks, sizeof(sim_task) * (size_t)p.n);
    sim_engine_advance(e2, p.tasks[0].t_start_s); /* programs start at the same clock */
    CHECK(sim_engine_run(e2, &q2, NULL) == ATS_OK);
    int same = 1;
    for (int i = 0; i < p.n; i++) same &= q2.tasks[i].t_end_s == p.tasks[i].t_end_s;
    CHECK(same);
    free(q2.tasks);
    sim_engine_free(e2);
    free(end);
    free(start);
    sim_prog_free(&p);
    sim_engine_free(e);
}


/* ---- brute force: a fixed-step fluid integration of the same model, coded independently ------ */

typedef struct ref_task {
    int kind, queue, n_dep, dep[4];
    double work, mem, flop;
    double start, end, rem, lat_left;
    int state; /* 0 waiting, 1 running, 2 done */
} ref_task;

static double ref_trace(const sim_trace *tr, int which, double t)
{
    int i = 0;
    while (i + 1 < tr->n && tr->t_s[i + 1] <= t) i++;
    return which == 0 ? tr->cpu[i] : which == 1 ? tr->gpu[i] : tr->pcie[i];
}

/* beta(a) of sim/engine.h written plainly: the DRAM rate at a·T threads over the rate at T, linear
 * through (0, 0) and the points, constant after the last; a without a curve */
static double ref_beta(const ats_hw *hw, double a)
{
    if (hw->cpu_bw_n == 0) return a;
    double bw[2], n[2] = {a * hw->cpu_threads, hw->cpu_threads};
    for (int j = 0; j < 2; j++) {
        bw[j] = hw->cpu_bw_Bps[hw->cpu_bw_n - 1];
        for (int k = hw->cpu_bw_n - 1; k >= 0; k--) {
            double t0 = k ? hw->cpu_bw_threads[k - 1] : 0, b0 = k ? hw->cpu_bw_Bps[k - 1] : 0;
            if (n[j] <= hw->cpu_bw_threads[k] && n[j] >= t0)
                bw[j] = b0 + (hw->cpu_bw_Bps[k] - b0) * (n[j] - t0) / (hw->cpu_bw_threads[k] - t0);
        }
    }
    return bw[0] / bw[1];
}

/* rates of the running tasks at time t (same model as sim/engine.h, written plainly) */
static void ref_rates(const ats_hw *hw, const sim_trace *tr, double t, ref_task *T, int n, double *rate)
{
    double acpu = ref_trace(tr, 0, t), agpu = ref_trace(tr, 1, t), apcie = ref_trace(tr, 2, t);
    double u_cpu = 0;
    for (int i = 0; i < n; i++)
        if (T[i].state == 1 && T[i].kind == SIM_TASK_CPU) u_cpu = T[i].mem;
    double dmaf = 1 - (1 - hw->hostmem_dma_factor) * u_cpu;
    double dma = 0;
    for (int dir = 0; dir < 2; dir++) {
        double cap[8];
        int idx[8], m = 0;
        for (int i = 0; i < n; i++) {
            if (T[i].state != 1 || T[i].lat_left > 0) continue;
            int k = T[i].kind;
            int h2d = k == SIM_TASK_CE_H2D || k == SIM_TASK_SM_H2D, d2h = k == SIM_TASK_CE_D2H || k == SIM_TASK_SM_D2H;
            if ((dir == 0 && !h2d) || (dir == 1 && !d2h)) continue;
            double c = k == SIM_TASK_CE_H2D ? hw->pcie_h2d_bw : k == SIM_TASK_CE_D2H ? hw->pcie_d2h_bw : hw->pcie_sm_copy_bw;
            cap[m] = c * apcie * dmaf;
            idx[m++] = i;
        }
        /* max-min by repeated equal split among the unsaturated flows */
        double left = hw->pcie_link_bw * apcie, r[8] = {0};
        int sat[8] = {0}, open = m;
        while (open > 0) {
            double share = left / open;
            int any = 0;
            for (int j = 0; j < m; j++)
                if (!sat[j] && cap[j] <= share) { r[j] = cap[j]; sat[j] = 1; left -= cap[j]; open--; any = 1; }
            if (!any) {
                for (int j = 0; j < m; j++) if (!sat[j]) r[j] = share;
                break;
            }
        }
        for (int j = 0; j < m; j++) { rate[idx[j]] = r[j]; dma += r[j]; }
    }
    double u = dma / (hw->pcie_h2d_bw * hw->hostmem_dma_factor);
    double f = 1 - (1 - hw->hostmem_cpu_factor) * (u < 1 ? u : 1);
    for (int i = 0; i < n; i++) {
        if (T[i].state != 1) continue;
        if (T[i].kind == SIM_TASK_CPU) rate[i] = 1.0 / fmax(T[i].flop / acpu, T[i].mem / (f * ref_beta(hw, acpu)));
        else if (T[i].kind == SIM_TASK_GPU) rate[i] = agpu;
        else if (T[i].lat_left > 0) rate[i] = 0;
    }
}

static void ref_run(const ats_hw *hw, const sim_trace *tr, ref_task *T, int n, double dt)
{
    double t = 0;
    int done = 0;
    double rate[64];
    while (done < n) {
        /* start queue heads whose dependencies are done (program order per queue) */
        for (int q = 0; q < SIM_MAX_QUEUES; q++) {
            int busy = 0, head = -1;
            for (int i = 0; i < n; i++) {
                if (T[i].queue != q) continue;
                if (T[i].state == 1) busy = 1;
                if (T[i].state == 0 && head < 0) head = i;
            }
            if (busy || head < 0) continue;
            int ok = 1;
            for (int d = 0; d < T[head].n_dep; d++) ok &= T[T[head].dep[d]].state == 2;
            if (!ok) continue;
            T[head].state = 1;
            T[head].start = t;
            T[head].rem = T[head].work;
            T[head].lat_left = T[head].kind >= SIM_TASK_CE_H2D ? hw->pcie_latency_s : 0;
        }
        for (int i = 0; i < n; i++) rate[i] = 0;
        ref_rates(hw, tr, t, T, n, rate);
        int finished = 0;
        for (int i = 0; i < n; i++) {
            if (T[i].state != 1) continue;
            if (T[i].lat_left > 0) {
                T[i].lat_left -= dt;
                continue;
            }
            double step = rate[i] * dt;
            if (step >= T[i].rem) { /* finishes inside this step: interpolate */
                T[i].end = t + (rate[i] > 0 ? T[i].rem / rate[i] : 0);
                T[i].state = 2;
                done++;
                finished = 1;
            } else {
                T[i].rem -= step;
            }
        }
        (void)finished;
        t += dt;
    }
}

static void test_bruteforce(uint64_t *rs)
{
    ats_hw hw = test_hw();
    hw.pcie_h2d_bw = 10e9;
    hw.pcie_d2h_bw = 9e9;
    hw.pcie_sm_copy_bw = 8e9;
    hw.pcie_link_bw = 12e9;
    hw.pcie_latency_s = 2e-4;
    hw.hostmem_cpu_factor = 0.5;
    hw.hostmem_dma_factor = 0.8;
    hw.n_copy_engines = 2;
    int worst_rep = -1;
    double worst = 0;
    for (int rep = 0; rep < 30; rep++) {
        const double tt[4] = {0, tu_uniform(rs, 0.002, 0.01), tu_uniform(rs, 0.011, 0.02), tu_uniform(rs, 0.021, 0.03)};
        double cpu[4], gpu[4], pcie[4];
        for (int k = 0; k < 4; k++) {
            cpu[k] = tu_uniform(rs, 0.3, 1.0);
            gpu[k] = tu_uniform(rs, 0.3, 1.0);
            pcie[k] = tu_uniform(rs, 0.3, 1.0);
        }
        sim_trace tr = {4, tt, cpu, gpu, pcie};
        hw.cpu_bw_n = 0;
        if (rep % 2) { /* a random increasing DRAM curve over 1..12 threads (T = 8) */
            hw.cpu_bw_n = 2 + (int32_t)(tu_rand(rs) % 4);
            double b = 0;
            for (int32_t k = 0; k < hw.cpu_bw_n; k++) {
                hw.cpu_bw_threads[k] = (k ? hw.cpu_bw_threads[k - 1] : 0) + 1 + (int32_t)(tu_rand(rs) % 3);
                b += tu_uniform(rs, 1e9, 20e9);
                hw.cpu_bw_Bps[k] = b;
            }
        }
        sim_engine *e = mk(&hw, &tr, 1);
        sim_prog p;
        sim_prog_init(&p);
        ref_task T[40];
        int n = 5 + (int)(tu_rand(rs) % 30);
        for (int i = 0; i < n; i++) {
            static const int kinds[6] = {SIM_TASK_CPU, SIM_TASK_GPU, SIM_TASK_CE_H2D, SIM_TASK_CE_D2H, SIM_TASK_SM_H2D, SIM_TASK_SM_D2H};
            int k = kinds[tu_rand(rs) % 6];
            int q = k == SIM_TASK_CPU ? SIM_Q_CPU : (k == SIM_TASK_GPU || k >= SIM_TASK_SM_H2D) ? SIM_Q_GPU
                                                   : SIM_Q_CE0 + (int)(tu_rand(rs) % 2);
            double work = k <= SIM_TASK_GPU ? tu_uniform(rs, 1e-4, 2e-3) : tu_uniform(rs, 1e6, 2e7);
            int32_t deps[4];
            int nd = i ? (int)(tu_rand(rs) % 3) : 0;
            for (int d = 0; d < nd; d++) deps[d] = (int32_t)(tu_rand(rs) % (uint64_t)i);
            int32_t idx;
            CHECK(sim_prog_add(&p, (sim_task_kind)k, q, work, deps, nd, &idx, NULL) == ATS_OK);
            memset(&T[i], 0, sizeof T[i]);
            T[i].kind = k;
            T[i].queue = q;
            T[i].work = work;
            T[i].n_dep = nd;
            for (int d = 0; d < nd; d++) T[i].dep[d] = deps[d];
            T[i].mem = 1.0;
            T[i].flop = 0.0;
            if (k == SIM_TASK_CPU && tu_rand(rs) % 2) { /* some compute-bound CPU ops */
                T[i].flop = 1.0;
                T[i].mem = tu_uniform(rs, 0.1, 1.0);
                p.tasks[idx].flop_frac = T[i].flop;
                p.tasks[idx].mem_frac = T[i].mem;
            }
        }
        CHECK(sim_engine_run(e, &p, NULL) == ATS_OK);
        double span = sim_engine_now(e);
        ref_run(&hw, &tr, T, n, span * 2e-6);
        for (int i = 0; i < n; i++) {
            double d = fmax(fabs(p.tasks[i].t_end_s - T[i].end), fabs(p.tasks[i].t_start_s - T[i].start)) / span;
            if (d > worst) worst = d, worst_rep = rep;
        }
        sim_prog_free(&p);
        sim_engine_free(e);
    }
    /* the reference's error is O(tasks · dt) = O(40 · 2e-6) of the span */
    CHECK_MSG(worst < 5e-4, "largest start/end difference to the fixed-step reference: %.3g of the span (rep %d)", worst,
              worst_rep);
}

/* CPU availability 0.4 on T = 16 threads with DRAM 20, 40, 60, 64 GB/s at 2, 4, 8, 16 threads:
 * beta(0.4) = bw(6.4) / bw(16) = (40 + 20 · 2.4 / 4) / 64 = 0.8125. A memory-bound CPU op of 1 s idle
 * work takes 1 / 0.8125 s (2.5 s without the curve); a compute-bound one 1 / 0.4 s either way; a mixed
 * one max(flop_frac / 0.4, mem_frac / 0.8125). With host-memory interference at its calibrated
 * operating point the memory part runs at f · beta. */
static void test_dram_curve(void)
{
    ats_hw hw = test_hw();
    hw.cpu_threads = 16;
    const double t[1] = {0.0}, cpu[1] = {0.4}, one[1] = {1.0};
    sim_trace tr = {1, t, cpu, one, one};
    const double beta = (40.0 + 20.0 * 2.4 / 4.0) / 64.0;
    for (int curve = 0; curve < 2; curve++) {
        hw.cpu_bw_n = 0;
        if (curve) {
            hw.cpu_bw_n = 4;
            const int32_t th[4] = {2, 4, 8, 16};
            const double bw[4] = {20e9, 40e9, 60e9, 64e9};
            for (int k = 0; k < 4; k++) hw.cpu_bw_threads[k] = th[k], hw.cpu_bw_Bps[k] = bw[k];
        }
        const double b = curve ? beta : 0.4;
        sim_engine *e = mk(&hw, &tr, 0);
        sim_prog p;
        sim_prog_init(&p);
        int32_t mem, comp, mix, mix2;
        CHECK(sim_prog_add(&p, SIM_TASK_CPU, SIM_Q_CPU, 1.0, NULL, 0, &mem, NULL) == ATS_OK);
        CHECK(sim_prog_add(&p, SIM_TASK_CPU, SIM_Q_CPU, 1.0, NULL, 0, &comp, NULL) == ATS_OK);
        p.tasks[comp].flop_frac = 1.0;
        p.tasks[comp].mem_frac = 0.5;
        CHECK(sim_prog_add(&p, SIM_TASK_CPU, SIM_Q_CPU, 1.0, NULL, 0, &mix, NULL) == ATS_OK);
        p.tasks[mix].flop_frac = 0.6; /* compute time 1.5 s beats memory time 1.23 s with the curve */
        CHECK(sim_prog_add(&p, SIM_TASK_CPU, SIM_Q_CPU, 1.0, NULL, 0, &mix2, NULL) == ATS_OK);
        p.tasks[mix2].flop_frac = 0.3;
        CHECK(sim_engine_run(e, &p, NULL) == ATS_OK);
        const double d_mem = 1.0 / b, d_comp = fmax(1.0 / 0.4, 0.5 / b), d_mix = fmax(0.6 / 0.4, 1.0 / b),
                     d_mix2 = fmax(0.3 / 0.4, 1.0 / b);
        CHECK_NEAR(p.tasks[mem].t_end_s, d_mem, 1e-12);
        CHECK_NEAR(p.tasks[comp].t_end_s - p.tasks[comp].t_start_s, d_comp, 1e-12);
        CHECK_NEAR(p.tasks[mix].t_end_s - p.tasks[mix].t_start_s, d_mix, 1e-12);
        CHECK_NEAR(p.tasks[mix2].t_end_s - p.tasks[mix2].t_start_s, d_mix2, 1e-12);
        if (curve) {
            CHECK_NEAR(p.tasks[mem].t_end_s, 1.0 / 0.8125, 1e-12); /* 1.2308 s, not 2.5 s */
            CHECK(p.tasks[mem].t_end_s < 2.5 - 1.0);
            CHECK_NEAR(p.tasks[mix].t_end_s - p.tasks[mix].t_start_s, 1.5, 1e-12);
        } else {
            CHECK_NEAR(p.tasks[mem].t_end_s, 2.5, 1e-12);
        }
        sim_prog_free(&p);
        sim_engine_free(e);
    }
    /* with the curve and host-memory interference: a copy engine at its calibrated operating point
     * (cap 10 · 0.9 = 9 GB/s, u = 1; the trace's PCIe availability is 1) while the CPU op reads gives
     * f = 0.5, so the memory part runs at 0.5 · 0.8125 of idle speed until the transfer ends */
    hw.pcie_link_bw = 100e9;
    hw.hostmem_cpu_factor = 0.5;
    hw.hostmem_dma_factor = 0.9;
    sim_engine *e = mk(&hw, &tr, 1);
    sim_prog p;
    sim_prog_init(&p);
    int32_t c, x;
    CHECK(sim_prog_add(&p, SIM_TASK_CPU, SIM_Q_CPU, 1.0, NULL, 0, &c, NULL) == ATS_OK);
    CHECK(sim_prog_add(&p, SIM_TASK_CE_H2D, SIM_Q_CE0, 4.5e9, NULL, 0, &x, NULL) == ATS_OK);
    CHECK(sim_engine_run(e, &p, NULL) == ATS_OK);
    /* DMA at 0.9 · 10 GB/s ends at 0.5 s; the CPU did 0.5 · 0.5 · beta s of work by then */
    CHECK_NEAR(p.tasks[x].t_end_s, 0.5, 1e-12);
    CHECK_NEAR(p.tasks[c].t_end_s, 0.5 + (1.0 - 0.25 * beta) / beta, 1e-12);
    sim_prog_free(&p);
    sim_engine_free(e);
}

static void test_bad_input(void)
{
    sim_prog p;
    sim_prog_init(&p);
    ats_err err = {{0}};
    int32_t dep = 3;
    CHECK(sim_prog_add(&p, SIM_TASK_GPU, SIM_Q_CPU, 1.0, NULL, 0, NULL, &err) == ATS_EINVAL);
    CHECK(sim_prog_add(&p, SIM_TASK_CPU, SIM_Q_CPU, NAN, NULL, 0, NULL, &err) == ATS_EINVAL);
    CHECK(sim_prog_add(&p, SIM_TASK_CPU, SIM_Q_CPU, 1.0, &dep, 1, NULL, &err) == ATS_EINVAL);
    CHECK(strstr(err.msg, "dependency 3") != NULL);
    ats_hw hw = test_hw();
    hw.n_copy_engines = 1;
    sim_engine *e = mk(&hw, NULL, 0);
    CHECK(sim_prog_add(&p, SIM_TASK_CE_H2D, SIM_Q_CE0 + 1, 1.0, NULL, 0, NULL, &err) == ATS_OK);
    CHECK(sim_engine_run(e, &p, &err) == ATS_EINVAL);
    sim_engine_free(e);
    const double t[2] = {0.0, 0.0}, v[2] = {1.0, 1.0}, z[2] = {1.0, 0.0};
    sim_trace tr = {2, t, v, v, v};
    CHECK(sim_engine_new(&hw, &tr, NULL, &e, &err) == ATS_EINVAL);
    const double t2[2] = {0.0, 1.0};
    sim_trace tr2 = {2, t2, v, z, v};
    CHECK(sim_engine_new(&hw, &tr2, NULL, &e, &err) == ATS_EINVAL);
    CHECK(strstr(err.msg, "gpu_avail[1]") != NULL);
    sim_prog_free(&p);
}

int main(void)
{
    uint64_t rs = tu_seed("test_sim_engine");
    test_maxmin();
    test_link_sharing();
    test_hostmem();
    test_hostmem_calibration();
    test_trace();
    test_random_oracle(&rs);
    test_bruteforce(&rs);
    test_dram_curve();
    test_bad_input();
    return tu_finish("test_sim_engine");
}
