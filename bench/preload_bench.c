/* Nanoseconds per cuMemAlloc/cuMemFree pair, run with and without
 * LD_PRELOAD=libgpumon_preload.so by preload_bench.sh; the difference is what
 * the interposer adds.
 *
 * Built against the stand-in libcuda (preload/tests/c/fake_cuda.c) by default,
 * where a pair costs a few ns, so the hook's own cost dominates. With
 * -DREAL_CUDA (nvcc or cc -lcuda) it runs against the real driver on device 0.
 * Paths: exported symbols (a program linked to libcuda) and pointers from
 * cuGetProcAddress (the CUDA runtime's way). "window" keeps 4,096 allocations
 * live, so the live table is not trivially small. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuGetProcAddress_v2(const char *, void **, int, unsigned long long, int *);
#ifdef REAL_CUDA
CUresult cuInit(unsigned);
CUresult cuDeviceGet(int *, int);
CUresult cuDevicePrimaryCtxRetain(void **, int);
CUresult cuCtxSetCurrent(void *);
#endif

typedef CUresult (*alloc_t)(CUdeviceptr *, size_t);
typedef CUresult (*free_t)(CUdeviceptr);

/* Thread CPU time, not wall time: on a shared machine other processes'
 * preemption would otherwise dominate a nanosecond-scale difference. */
static double now_ns(void) {
    struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

#define WINDOW 4096
static CUdeviceptr ring[WINDOW];

static double pairs(alloc_t a, free_t f, long n, size_t size, int window) {
    CUdeviceptr p;
    if (window) for (int i = 0; i < WINDOW; i++) if (a(&ring[i], size)) return -1;
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        if (window) {
            int k = (int)(i % WINDOW);
            if (f(ring[k]) || a(&ring[k], size)) return -1;
        } else {
            if (a(&p, size) || f(p)) return -1;
        }
    }
    double per = (now_ns() - t0) / n;
    if (window) for (int i = 0; i < WINDOW; i++) f(ring[i]);
    return per;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    size_t size = argc > 2 ? (size_t)atol(argv[2]) : (1 << 20);
#ifdef REAL_CUDA
    int dev; void *ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "no CUDA device\n"); return 2;
    }
#endif
    alloc_t ga; free_t gf; int st;
    if (cuGetProcAddress_v2("cuMemAlloc", (void **)&ga, 13000, 0, &st) ||
        cuGetProcAddress_v2("cuMemFree", (void **)&gf, 13000, 0, &st)) {
        fprintf(stderr, "cuGetProcAddress failed\n"); return 2;
    }
    /* Warm up: the first call initialises the interposer and its reporter. */
    pairs(cuMemAlloc_v2, cuMemFree_v2, 1000, size, 0);
    double best[4] = {1e18, 1e18, 1e18, 1e18};
    for (int rep = 0; rep < 5; rep++) {
        double r[4] = {
            pairs(cuMemAlloc_v2, cuMemFree_v2, n, size, 0),
            pairs(ga, gf, n, size, 0),
            pairs(cuMemAlloc_v2, cuMemFree_v2, n, size, 1),
            pairs(ga, gf, n, size, 1),
        };
        for (int i = 0; i < 4; i++) {
            if (r[i] < 0) { fprintf(stderr, "driver call failed\n"); return 1; }
            if (r[i] < best[i]) best[i] = r[i];
        }
    }
    printf("export_pair_ns=%.1f proc_pair_ns=%.1f export_window_ns=%.1f proc_window_ns=%.1f\n",
           best[0], best[1], best[2], best[3]);
    return 0;
}
