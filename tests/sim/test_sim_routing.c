/*
 * test_sim_routing — MoE routing of the simulator: k distinct experts per token, uniform and Zipf
 * frequencies against their formulas, same seed → same routing, routing-file replay and refusal of
 * bad files (message names file, dataset and index).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "sim/routing.h"
#include "testutil.h"

static ats_arch moe_arch(int E, int k, int L)
{
    ats_arch a;
    ats_arch_init(&a);
    strcpy(a.name, "test-moe");
    a.n_layer = L;
    a.n_expert = E;
    a.n_expert_used = k;
    return a;
}

static void test_dist(uint64_t seed)
{
    const int E = 64, k = 8, L = 4, T = 20000;
    ats_arch a = moe_arch(E, k, L);
    sim_routing *r = NULL;
    CHECK(sim_routing_new_dist(&a, SIM_ROUTE_UNIFORM, 0.0, seed, &r, NULL) == ATS_OK);
    uint8_t sel[64];
    long cnt[64] = {0};
    for (int t = 0; t < T; t++) {
        int d = sim_routing_round(r, 1, 2, sel);
        CHECK(d == k); /* one token: exactly k distinct */
        for (int e = 0; e < E; e++) cnt[e] += sel[e];
    }
    /* each expert selected with probability k/E per token: binomial, 5 sigma */
    double p = (double)k / E, mu = T * p, sd = sqrt(T * p * (1 - p));
    int bad = 0;
    for (int e = 0; e < E; e++) bad += fabs(cnt[e] - mu) > 5 * sd;
    CHECK_MSG(bad == 0, "%d experts outside mean %.0f ± 5·%.1f", bad, mu, sd);
    /* a 512-token chunk: expected distinct experts E·(1-(1-k/E)^N) ≈ 64 */
    int d = sim_routing_round(r, 512, 0, sel);
    CHECK(d == E);
    sim_routing_free(r);

    /* Zipf s=1.2, k=1: rank-1 expert frequency = 1/H where H = Σ r^-s */
    ats_arch a1 = moe_arch(E, 1, L);
    CHECK(sim_routing_new_dist(&a1, SIM_ROUTE_ZIPF, 1.2, seed, &r, NULL) == ATS_OK);
    memset(cnt, 0, sizeof cnt);
    for (int t = 0; t < T; t++) {
        CHECK(sim_routing_round(r, 1, 1, sel) == 1);
        for (int e = 0; e < E; e++) cnt[e] += sel[e];
    }
    double H = 0;
    for (int i = 1; i <= E; i++) H += pow(i, -1.2);
    long top = 0;
    for (int e = 0; e < E; e++) top = cnt[e] > top ? cnt[e] : top;
    p = 1.0 / H;
    CHECK_NEAR(top, T * p, 5 * sqrt(T * p * (1 - p)));
    sim_routing_free(r);

    /* steep Zipf with k close to E still terminates with k distinct */
    ats_arch a2 = moe_arch(16, 12, 2);
    CHECK(sim_routing_new_dist(&a2, SIM_ROUTE_ZIPF, 6.0, seed, &r, NULL) == ATS_OK);
    for (int t = 0; t < 100; t++) CHECK(sim_routing_round(r, 1, 0, sel) == 12);
    sim_routing_free(r);

    /* same seed, same routing */
    sim_routing *r1 = NULL, *r2 = NULL;
    CHECK(sim_routing_new_dist(&a, SIM_ROUTE_ZIPF, 0.8, seed, &r1, NULL) == ATS_OK);
    CHECK(sim_routing_new_dist(&a, SIM_ROUTE_ZIPF, 0.8, seed, &r2, NULL) == ATS_OK);
    uint8_t s2[64];
    int same = 1;
    for (int t = 0; t < 200; t++) {
        sim_routing_round(r1, 3, t % L, sel);
        sim_routing_round(r2, 3, t % L, s2);
        same &= memcmp(sel, s2, E) == 0;
    }
    CHECK(same);
    sim_routing_free(r1);
    sim_routing_free(r2);

    ats_err err = {{0}};
    ats_arch dense = moe_arch(0, 0, 4);
    CHECK(sim_routing_new_dist(&dense, SIM_ROUTE_UNIFORM, 0, seed, &r, &err) == ATS_EINVAL);
    CHECK(sim_routing_new_dist(&a, SIM_ROUTE_ZIPF, -1, seed, &r, &err) == ATS_EINVAL);
    CHECK(strstr(err.msg, "skew") != NULL);
}

static void write_ids(const char *path, const int32_t *ids, hsize_t t, hsize_t l, hsize_t k, hid_t type)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t g = H5Gcreate2(f, "/routing", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[3] = {t, l, k};
    hid_t sp = H5Screate_simple(3, dims, NULL);
    hid_t d = H5Dcreate2(f, "/routing/expert_ids", type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids);
    H5Dclose(d);
    H5Sclose(sp);
    H5Gclose(g);
    H5Fclose(f);
}

static void test_file(uint64_t seed)
{
    const int E = 8, k = 2, L = 3, T = 5;
    ats_arch a = moe_arch(E, k, L);
    int32_t ids[5 * 3 * 2];
    uint64_t s = seed;
    for (int i = 0; i < T * L * k; i += 2) { /* two distinct ids per (token, layer) */
        ids[i] = (int32_t)(tu_rand(&s) % E);
        ids[i + 1] = (ids[i] + 1 + (int32_t)(tu_rand(&s) % (E - 1))) % E;
    }
    char path[256];
    snprintf(path, sizeof path, "/tmp/test_sim_routing.%d.h5", (int)getpid());
    write_ids(path, ids, T, L, k, H5T_STD_I32LE);
    sim_routing *r = NULL;
    ats_err err = {{0}};
    CHECK_MSG(sim_routing_load(path, &a, &r, &err) == ATS_OK, "%s", err.msg);
    uint8_t sel[8];
    /* replay token by token, wrapping after T tokens */
    int ok = 1;
    for (int t = 0; t < 2 * T + 1; t++) {
        for (int l = 0; l < L; l++) {
            int d = sim_routing_round(r, 1, l, sel);
            const int32_t *row = ids + ((t % T) * L + l) * k;
            ok &= d == 2 && sel[row[0]] && sel[row[1]];
        }
        sim_routing_next_round(r, 1);
    }
    CHECK(ok);
    /* a 3-token round: union of three tokens' picks */
    int d = sim_routing_round(r, 3, 1, sel);
    int expect = 0;
    uint8_t u[8] = {0};
    for (int t = 0; t < 3; t++)
        for (int j = 0; j < k; j++) u[ids[(((2 * T + 1) + t) % T * L + 1) * k + j]] = 1;
    for (int e = 0; e < E; e++) expect += u[e];
    CHECK(d == expect && memcmp(u, sel, E) == 0);
    sim_routing_free(r);

    /* bad: id out of range names the index */
    ids[(3 * L + 2) * k + 1] = E + 5;
    write_ids(path, ids, T, L, k, H5T_STD_I32LE);
    CHECK(sim_routing_load(path, &a, &r, &err) == ATS_EINVAL);
    CHECK_MSG(strstr(err.msg, "/routing/expert_ids[3][2][1] = 13") != NULL, "%s", err.msg);
    /* bad: a token picks the same expert twice (random token and layer) */
    {
        int bt = (int)(tu_rand(&s) % T), bl = (int)(tu_rand(&s) % L);
        int32_t keep[5 * 3 * 2];
        memcpy(keep, ids, sizeof ids);
        keep[(3 * L + 2) * k + 1] = (keep[(3 * L + 2) * k] + 1) % E; /* undo the out-of-range id */
        keep[(bt * L + bl) * k + 1] = keep[(bt * L + bl) * k];
        write_ids(path, keep, T, L, k, H5T_STD_I32LE);
        CHECK(sim_routing_load(path, &a, &r, &err) == ATS_EINVAL);
        char want[96];
        snprintf(want, sizeof want, "/routing/expert_ids[%d][%d][1] = %d: expert already selected at [%d][%d][0]", bt,
                 bl, keep[(bt * L + bl) * k], bt, bl);
        CHECK_MSG(strstr(err.msg, want) != NULL && strstr(err.msg, path) != NULL, "want '%s': %s", want, err.msg);
        write_ids(path, ids, T, L, k, H5T_STD_I32LE);
    }
    /* bad: shape does not match the model */
    ats_arch a4 = moe_arch(E, k, 4);
    CHECK(sim_routing_load(path, &a4, &r, &err) == ATS_EINVAL);
    CHECK_MSG(strstr(err.msg, "shape") != NULL, "%s", err.msg);
    /* bad: type */
    ids[(3 * L + 2) * k + 1] = 1;
    write_ids(path, ids, T, L, k, H5T_IEEE_F64LE);
    CHECK(sim_routing_load(path, &a, &r, &err) == ATS_EINVAL);
    CHECK_MSG(strstr(err.msg, "int32") != NULL, "%s", err.msg);
    unlink(path);
    CHECK(sim_routing_load(path, &a, &r, &err) == ATS_ENOTFOUND);
}

int main(void)
{
    uint64_t seed = tu_seed("test_sim_routing");
    test_dist(seed);
    test_file(seed);
    return tu_finish("test_sim_routing");
}
