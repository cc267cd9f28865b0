// A stand-in libnvidia-ml.so.1 for profiling the monitor's own cost on a machine without a
// GPU: it answers the calls gpumon's sampler makes (src/source/nvml.rs) in about a
// microsecond each, so what a profile of `gpumon --interval 100ms` shows is gpumon's work,
// not the driver's. Not for tests of what NVML says (scripts/gpu/compare_smi.py is).
//   gcc -O2 -shared -fPIC -o /tmp/fakenvml/libnvidia-ml.so.1 bench/fake_nvml.c
//   LD_LIBRARY_PATH=/tmp/fakenvml target/release/gpumon --interval 100ms
// FAKE_NVML_GPUS (default 1) GPUs of 80 GiB; each lists this process and its parent, with
// memory that rises and falls slowly, so the charts move as they would on a training run.
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} mem_v2_t;
typedef struct {
    unsigned long long total, free, used;
} mem_t;
typedef struct {
    unsigned int pid;
    unsigned long long used;
    unsigned int gi, ci;
} proc_t_;
typedef struct {
    unsigned int gpu, memory;
} util_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} pci_t;

#define GIB (1024ULL * 1024 * 1024)
#define OK 0
#define INVALID_ARG 2
#define NOT_SUPPORTED 3
#define INSUFFICIENT_SIZE 7

static unsigned int gpus(void) {
    const char *s = getenv("FAKE_NVML_GPUS");
    int n = s ? atoi(s) : 1;
    return n < 1 ? 1 : n > 8 ? 8 : (unsigned int)n;
}

static unsigned int index_of(void *dev) { return (unsigned int)(unsigned long)dev - 1; }

static void copy(char *dst, unsigned int len, const char *src) {
    if (len == 0) return;
    strncpy(dst, src, len - 1);
    dst[len - 1] = 0;
}

// A slow saw-tooth: 20 GiB up to 60 GiB over two minutes, per GPU out of phase.
static unsigned long long used_now(unsigned int gpu) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    unsigned long long ms = (unsigned long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
    unsigned long long phase = (ms + gpu * 30000) % 120000;
    return 20 * GIB + phase * (40 * GIB / 120000);
}

int nvmlInit_v2(void) { return OK; }
int nvmlInitWithFlags(unsigned int f) { (void)f; return OK; }
int nvmlShutdown(void) { return OK; }
const char *nvmlErrorString(int r) { (void)r; return "fake NVML error"; }
int nvmlSystemGetDriverVersion(char *v, unsigned int n) { copy(v, n, "999.99 (fake)"); return OK; }
int nvmlSystemGetNVMLVersion(char *v, unsigned int n) { copy(v, n, "99.999 (fake)"); return OK; }
int nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 13000; return OK; }
int nvmlSystemGetCudaDriverVersion(int *v) { *v = 13000; return OK; }
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = gpus(); return OK; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **dev) {
    if (i >= gpus()) return INVALID_ARG;
    *dev = (void *)(unsigned long)(i + 1);
    return OK;
}
int nvmlDeviceGetName(void *d, char *v, unsigned int n) { (void)d; copy(v, n, "Fake H200"); return OK; }
int nvmlDeviceGetUUID(void *d, char *v, unsigned int n) {
    char u[64] = "GPU-fa4e0000-0000-0000-0000-00000000000";
    u[strlen(u) - 1] = (char)('0' + index_of(d));
    copy(v, n, u);
    return OK;
}
int nvmlDeviceGetPciInfo_v3(void *d, pci_t *p) {
    memset(p, 0, sizeof *p);
    p->bus = 0x10 + index_of(d);
    copy(p->busId, sizeof p->busId, "00000000:10:00.0");
    p->busId[13] = (char)('0' + index_of(d));
    copy(p->busIdLegacy, sizeof p->busIdLegacy, "0000:10:00.0");
    return OK;
}
int nvmlDeviceGetMaxMigDeviceCount(void *d, unsigned int *n) { (void)d; (void)n; return NOT_SUPPORTED; }
int nvmlDeviceGetMemoryInfo_v2(void *d, mem_v2_t *m) {
    unsigned long long used = used_now(index_of(d));
    m->total = 80 * GIB;
    m->reserved = GIB / 2;
    m->used = used;
    m->free = m->total - m->reserved - used;
    return OK;
}
int nvmlDeviceGetMemoryInfo(void *d, mem_t *m) {
    mem_v2_t v;
    nvmlDeviceGetMemoryInfo_v2(d, &v);
    m->total = v.total;
    m->used = v.used;
    m->free = v.free;
    return OK;
}
int nvmlDeviceGetComputeRunningProcesses_v3(void *d, unsigned int *count, proc_t_ *p) {
    if (*count < 2) {
        *count = 2;
        return INSUFFICIENT_SIZE;
    }
    unsigned long long used = used_now(index_of(d));
    p[0] = (proc_t_){.pid = (unsigned int)getpid(), .used = used - 2 * GIB};
    p[1] = (proc_t_){.pid = (unsigned int)getppid(), .used = GIB};
    *count = 2;
    return OK;
}
int nvmlDeviceGetGraphicsRunningProcesses_v3(void *d, unsigned int *count, proc_t_ *p) {
    (void)d;
    (void)p;
    *count = 0;
    return OK;
}
int nvmlDeviceGetUtilizationRates(void *d, util_t *u) {
    u->gpu = 50 + index_of(d);
    u->memory = 30;
    return OK;
}
int nvmlDeviceGetTemperature(void *d, int sensor, unsigned int *t) {
    (void)d;
    (void)sensor;
    *t = 41;
    return OK;
}
int nvmlDeviceGetPowerUsage(void *d, unsigned int *mw) {
    (void)d;
    *mw = 350000;
    return OK;
}
