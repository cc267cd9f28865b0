/* A stand-in libcuda.so.1 for tests and benchmarks without a GPU.
 *
 * It exports the memory entry points the interposer wraps, cuGetProcAddress
 * (v1 and _v2) and the few device queries the reporter makes. Results are
 * deterministic so that a run with and without LD_PRELOAD must print the same
 * thing: pointers come from a counter, and every argument received is folded
 * into fake_checksum() so that any change of arguments shows.
 *
 * Like the real driver, cuGetProcAddress hands out internal functions, not the
 * exported symbols, so the interposer has to wrap what it returns. Special
 * sizes produce failures: 0xBAD -> CUDA_ERROR_OUT_OF_MEMORY, 0xC0DE -> an
 * undefined status (9999) that must still come back bit for bit. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUstream;
typedef void *CUmemoryPool;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct { unsigned type, requestedHandleTypes; struct { unsigned type; int id; } location;
                 void *win32; unsigned char flags[8]; } CUmemAllocationProp;
typedef struct { char bytes[16]; } CUuuid;

#define OK 0
#define INVALID 1
#define OOM 2
#define NOT_FOUND 500
#define PTSZ 2 /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */

static unsigned long long next_ptr = 0x7e0000000000ULL;
static unsigned long long next_handle = 0x100;
static unsigned long long sum = 1469598103934665603ULL;
static int current_dev = 0;
static int used_async[2];
static int used_pool;

static void mix(unsigned long long v) { sum = (sum ^ v) * 1099511628211ULL; }
unsigned long long fake_checksum(void) { return sum; }
void fake_set_device(int d) { current_dev = d; }

static CUresult special(size_t size) {
    if (size == 0) return INVALID;
    if (size == 0xBAD) return OOM;
    if (size == 0xC0DE) return 9999;
    return OK;
}
static CUdeviceptr take(size_t size) {
    CUdeviceptr p = next_ptr;
    next_ptr += (size + 0x1FFFFF) & ~0x1FFFFFULL;
    return p;
}

static CUresult i_alloc(CUdeviceptr *d, size_t s) {
    mix(1); mix(s); CUresult r = special(s); if (r) return r; *d = take(s); return OK;
}
static CUresult i_pitch(CUdeviceptr *d, size_t *pitch, size_t w, size_t h, unsigned e) {
    mix(2); mix(w); mix(h); mix(e); CUresult r = special(w); if (r) return r;
    *pitch = (w + 511) & ~(size_t)511; *d = take(*pitch * h); return OK;
}
static CUresult i_managed(CUdeviceptr *d, size_t s, unsigned f) {
    mix(3); mix(s); mix(f); CUresult r = special(s); if (r) return r; *d = take(s); return OK;
}
static CUresult i_free(CUdeviceptr d) { mix(4); mix(d); return d == 0xDEAD ? INVALID : OK; }
static CUresult i_async(CUdeviceptr *d, size_t s, CUstream st) {
    mix(5); mix(s); mix((uintptr_t)st); CUresult r = special(s); if (r) return r;
    used_async[current_dev & 1] = 1; *d = take(s); return OK;
}
static CUresult i_async_ptsz(CUdeviceptr *d, size_t s, CUstream st) { mix(55); return i_async(d, s, st); }
static CUresult i_pool(CUdeviceptr *d, size_t s, CUmemoryPool p, CUstream st) {
    mix(6); mix(s); mix((uintptr_t)p); mix((uintptr_t)st); CUresult r = special(s); if (r) return r;
    used_pool = 1; *d = take(s); return OK;
}
static CUresult i_pool_ptsz(CUdeviceptr *d, size_t s, CUmemoryPool p, CUstream st) { mix(66); return i_pool(d, s, p, st); }
static CUresult i_free_async(CUdeviceptr d, CUstream st) { mix(7); mix(d); mix((uintptr_t)st); return d == 0xDEAD ? INVALID : OK; }
static CUresult i_free_async_ptsz(CUdeviceptr d, CUstream st) { mix(77); return i_free_async(d, st); }
static CUresult i_create(CUmemGenericAllocationHandle *h, size_t s, const CUmemAllocationProp *p, unsigned long long f) {
    mix(8); mix(s); mix(p ? (unsigned long long)p->location.id : 99); mix(f);
    CUresult r = special(s); if (r) return r; *h = next_handle++; return OK;
}
static CUresult i_release(CUmemGenericAllocationHandle h) { mix(9); mix(h); return OK; }
static CUresult i_map(CUdeviceptr p, size_t s, size_t o, CUmemGenericAllocationHandle h, unsigned long long f) {
    mix(10); mix(p); mix(s); mix(o); mix(h); mix(f); return OK;
}
static CUresult i_unmap(CUdeviceptr p, size_t s) { mix(11); mix(p); mix(s); return OK; }
static CUresult i_host_alloc(void **pp, size_t s, unsigned f) {
    mix(12); mix(s); mix(f); CUresult r = special(s); if (r) return r; *pp = (void *)(uintptr_t)take(s); return OK;
}
static CUresult i_alloc_host(void **pp, size_t s) {
    mix(13); mix(s); CUresult r = special(s); if (r) return r; *pp = (void *)(uintptr_t)take(s); return OK;
}
static CUresult i_free_host(void *p) { mix(14); mix((uintptr_t)p); return OK; }

CUresult cuMemAlloc_v2(CUdeviceptr *d, size_t s) { return i_alloc(d, s); }
CUresult cuMemAllocPitch_v2(CUdeviceptr *d, size_t *p, size_t w, size_t h, unsigned e) { return i_pitch(d, p, w, h, e); }
CUresult cuMemAllocManaged(CUdeviceptr *d, size_t s, unsigned f) { return i_managed(d, s, f); }
CUresult cuMemFree_v2(CUdeviceptr d) { return i_free(d); }
CUresult cuMemAllocAsync(CUdeviceptr *d, size_t s, CUstream st) { return i_async(d, s, st); }
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *d, size_t s, CUstream st) { return i_async_ptsz(d, s, st); }
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *d, size_t s, CUmemoryPool p, CUstream st) { return i_pool(d, s, p, st); }
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *d, size_t s, CUmemoryPool p, CUstream st) { return i_pool_ptsz(d, s, p, st); }
CUresult cuMemFreeAsync(CUdeviceptr d, CUstream st) { return i_free_async(d, st); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream st) { return i_free_async_ptsz(d, st); }
CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t s, const CUmemAllocationProp *p, unsigned long long f) { return i_create(h, s, p, f); }
CUresult cuMemRelease(CUmemGenericAllocationHandle h) { return i_release(h); }
CUresult cuMemMap(CUdeviceptr p, size_t s, size_t o, CUmemGenericAllocationHandle h, unsigned long long f) { return i_map(p, s, o, h, f); }
CUresult cuMemUnmap(CUdeviceptr p, size_t s) { return i_unmap(p, s); }
CUresult cuMemHostAlloc(void **pp, size_t s, unsigned f) { return i_host_alloc(pp, s, f); }
CUresult cuMemAllocHost_v2(void **pp, size_t s) { return i_alloc_host(pp, s); }
CUresult cuMemFreeHost(void *p) { return i_free_host(p); }

CUresult cuCtxGetDevice(int *d) { *d = current_dev; return OK; }
CUresult cuDeviceGetCount(int *n) { *n = 2; return OK; }
CUresult cuDeviceGet(int *d, int i) { if (i < 0 || i > 1) return INVALID; *d = i; return OK; }
CUresult cuDeviceGetName(char *buf, int len, int d) { (void)d; strncpy(buf, "Stand-in GPU", (size_t)len); return OK; }
CUresult cuDeviceGetUuid_v2(CUuuid *u, int d) { for (int i = 0; i < 16; i++) u->bytes[i] = (char)(0x10 * d + i); return OK; }
CUresult cuDeviceTotalMem_v2(size_t *t, int d) { (void)d; *t = 80ULL << 30; return OK; }
CUresult cuDeviceGetPCIBusId(char *buf, int len, int d) { strncpy(buf, d ? "0000:3c:00.0" : "0000:3b:00.0", (size_t)len); return OK; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return OK; }
CUresult cuDeviceGetMemPool(CUmemoryPool *p, int d) { *p = (CUmemoryPool)(uintptr_t)(0x1000 + d); return OK; }
CUresult cuMemPoolGetAttribute(CUmemoryPool p, int attr, void *out) {
    uintptr_t id = (uintptr_t)p; unsigned long long v = 0;
    if (id == 0x1000 || id == 0x1001) v = used_async[id - 0x1000] ? 64ULL << 20 : 0;
    else if (id == 0x2000) v = used_pool ? 32ULL << 20 : 0;
    else return INVALID;
    if (attr == 6) v *= 2; /* RESERVED_MEM_HIGH */
    else if (attr != 5) return INVALID;
    *(unsigned long long *)out = v; return OK;
}

static CUresult gpa_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status);
static CUresult gpa_v1(const char *sym, void **pfn, int ver, unsigned long long flags) { return gpa_v2(sym, pfn, ver, flags, NULL); }

static CUresult gpa_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status) {
    mix(15); mix((unsigned long long)ver); mix(flags);
    int ptsz = (flags & PTSZ) != 0;
    void *f = NULL;
#define IS(n) (strcmp(sym, n) == 0)
    if (IS("cuGetProcAddress")) f = ver >= 12000 ? (void *)gpa_v2 : (void *)gpa_v1;
    else if (IS("cuMemAlloc") && ver >= 3020) f = (void *)i_alloc;
    else if (IS("cuMemAllocPitch") && ver >= 3020) f = (void *)i_pitch;
    else if (IS("cuMemFree") && ver >= 3020) f = (void *)i_free;
    else if (IS("cuMemAllocHost") && ver >= 3020) f = (void *)i_alloc_host;
    else if (IS("cuMemAllocManaged")) f = (void *)i_managed;
    else if (IS("cuMemAllocAsync")) f = ptsz ? (void *)i_async_ptsz : (void *)i_async;
    else if (IS("cuMemAllocFromPoolAsync")) f = ptsz ? (void *)i_pool_ptsz : (void *)i_pool;
    else if (IS("cuMemFreeAsync")) f = ptsz ? (void *)i_free_async_ptsz : (void *)i_free_async;
    else if (IS("cuMemCreate")) f = (void *)i_create;
    else if (IS("cuMemRelease")) f = (void *)i_release;
    else if (IS("cuMemMap")) f = (void *)i_map;
    else if (IS("cuMemUnmap")) f = (void *)i_unmap;
    else if (IS("cuMemHostAlloc")) f = (void *)i_host_alloc;
    else if (IS("cuMemFreeHost")) f = (void *)i_free_host;
    else if (IS("cuCtxGetDevice")) f = (void *)cuCtxGetDevice;
#undef IS
    *pfn = f;
    if (status) *status = f ? 0 : 1;
    return f ? OK : NOT_FOUND;
}

CUresult cuGetProcAddress(const char *s, void **p, int v, unsigned long long f) { return gpa_v1(s, p, v, f); }
CUresult cuGetProcAddress_v2(const char *s, void **p, int v, unsigned long long f, int *st) { return gpa_v2(s, p, v, f, st); }
