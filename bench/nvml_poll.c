// The floor for any NVML monitor: a bare C program that makes the NVML calls gpumon's sampler
// makes, at the same rates, and nothing else (no screen, no model, no /proc reads). gpumon's
// CPU and RSS are judged against it in bench/monitor_overhead.sh.
//
// Same schedule as src/source/nvml.rs: memory (v2, for "reserved") every tick; compute and
// graphics process lists (v3), utilisation, temperature and power on ticks at most every
// 200 ms. Handles are taken once. libnvidia-ml is opened with dlopen, as nvml-wrapper does,
// so no CUDA headers are needed to build it:  gcc -O2 -o nvml_poll bench/nvml_poll.c -ldl
// usage: nvml_poll INTERVAL_MS
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void *dev_t_;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} mem_v2_t;
typedef struct {
    unsigned int pid;
    unsigned long long used;
    unsigned int gi, ci;
} proc_t_;
typedef struct {
    unsigned int gpu, memory;
} util_t;

#define MAX_DEV 64
#define MAX_PROC 1024
// NVML_STRUCT_VERSION(Memory, 2): sizeof | (2 << 24)
#define MEM_V2 ((unsigned int)(sizeof(mem_v2_t) | (2u << 24)))

static void *sym(void *lib, const char *name) {
    void *f = dlsym(lib, name);
    if (!f) {
        fprintf(stderr, "nvml_poll: %s missing\n", name);
        exit(1);
    }
    return f;
}

int main(int argc, char **argv) {
    long interval_ms = argc > 1 ? atol(argv[1]) : 1000;
    if (interval_ms < 1) interval_ms = 1;
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "nvml_poll: %s\n", dlerror());
        return 1;
    }
    int (*init)(void) = sym(lib, "nvmlInit_v2");
    int (*count)(unsigned int *) = sym(lib, "nvmlDeviceGetCount_v2");
    int (*by_index)(unsigned int, dev_t_ *) = sym(lib, "nvmlDeviceGetHandleByIndex_v2");
    int (*mem)(dev_t_, mem_v2_t *) = sym(lib, "nvmlDeviceGetMemoryInfo_v2");
    int (*compute)(dev_t_, unsigned int *, proc_t_ *) =
        sym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    int (*graphics)(dev_t_, unsigned int *, proc_t_ *) =
        sym(lib, "nvmlDeviceGetGraphicsRunningProcesses_v3");
    int (*util)(dev_t_, util_t *) = sym(lib, "nvmlDeviceGetUtilizationRates");
    int (*temp)(dev_t_, int, unsigned int *) = sym(lib, "nvmlDeviceGetTemperature");
    int (*power)(dev_t_, unsigned int *) = sym(lib, "nvmlDeviceGetPowerUsage");
    if (init() != 0) {
        fprintf(stderr, "nvml_poll: nvmlInit failed\n");
        return 1;
    }
    unsigned int n = 0;
    count(&n);
    if (n > MAX_DEV) n = MAX_DEV;
    dev_t_ devs[MAX_DEV];
    for (unsigned int i = 0; i < n; i++) by_index(i, &devs[i]);
    long slow_every = 200 / interval_ms;
    if (slow_every < 1) slow_every = 1;
    static proc_t_ procs[MAX_PROC];
    unsigned long long sink = 0;  // keeps the results live so nothing is optimised away
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (unsigned long tick = 0;; tick++) {
        int full = tick % slow_every == 0;
        for (unsigned int i = 0; i < n; i++) {
            mem_v2_t m = {.version = MEM_V2};
            if (mem(devs[i], &m) == 0) sink += m.used;
            if (!full) continue;
            unsigned int np = MAX_PROC;
            if (compute(devs[i], &np, procs) == 0) sink += np;
            np = MAX_PROC;
            if (graphics(devs[i], &np, procs) == 0) sink += np;
            util_t u;
            if (util(devs[i], &u) == 0) sink += u.gpu;
            unsigned int v;
            if (temp(devs[i], 0, &v) == 0) sink += v;
            if (power(devs[i], &v) == 0) sink += v;
        }
        next.tv_nsec += interval_ms * 1000000L;
        while (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        if (sink == 42) puts("");  // never true in practice; stops the loop being elided
    }
}
