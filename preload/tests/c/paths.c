/* Reaches the driver's memory functions every way a program can:
 *   a: exported symbols (linked against libcuda.so.1),
 *   b: dlopen + dlsym on the libcuda handle,
 *   c: dlsym(cuGetProcAddress_v2) -> cuGetProcAddress("cuGetProcAddress") ->
 *      the memory functions (the CUDA runtime's way), plus the v1 export.
 * Prints every result; the test compares this output with and without the
 * interposer and matches the "alloc"/"free" lines against what it reports.
 * After "ready" it waits for a line on stdin before freeing everything. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUstream;
typedef void *CUmemoryPool;
typedef unsigned long long CUhandle;
typedef struct { unsigned type, requestedHandleTypes; struct { unsigned type; int id; } location;
                 void *win32; unsigned char flags[8]; } CUmemAllocationProp;

CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemHostAlloc(void **, size_t, unsigned);
CUresult cuMemAllocHost_v2(void **, size_t);
CUresult cuMemFreeHost(void *);
CUresult cuGetProcAddress(const char *, void **, int, unsigned long long);
unsigned long long fake_checksum(void);
void fake_set_device(int);

typedef CUresult (*alloc_t)(CUdeviceptr *, size_t);
typedef CUresult (*free_t)(CUdeviceptr);
typedef CUresult (*async_t)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*pool_t)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef CUresult (*free_async_t)(CUdeviceptr, CUstream);
typedef CUresult (*create_t)(CUhandle *, size_t, const CUmemAllocationProp *, unsigned long long);
typedef CUresult (*release_t)(CUhandle);
typedef CUresult (*map_t)(CUdeviceptr, size_t, size_t, CUhandle, unsigned long long);
typedef CUresult (*unmap_t)(CUdeviceptr, size_t);
typedef CUresult (*gpa1_t)(const char *, void **, int, unsigned long long);
typedef CUresult (*gpa2_t)(const char *, void **, int, unsigned long long, int *);

#define MAXA 64
static struct { char path; const char *kind; int dev; unsigned long long ptr, size; int how; } live[MAXA];
static int nlive;

static void note(char path, const char *kind, int dev, CUresult rc, unsigned long long ptr, unsigned long long size, int how) {
    printf("alloc path=%c kind=%s dev=%d size=%llu rc=%d ptr=0x%llx\n", path, kind, dev, size, rc, rc ? 0ULL : ptr);
    if (rc == 0 && nlive < MAXA) {
        live[nlive].path = path; live[nlive].kind = kind; live[nlive].dev = dev;
        live[nlive].ptr = ptr; live[nlive].size = size; live[nlive].how = how; nlive++;
    }
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CUdeviceptr p; void *hp; size_t pitch; CUresult rc;
    CUstream s1 = (CUstream)0x5a, s2 = (CUstream)0x5b;
    CUmemoryPool pool = (CUmemoryPool)0x2000;

    /* a: exported symbols */
    rc = cuMemAlloc_v2(&p, (1 << 20) + 1); note('a', "alloc", 0, rc, p, (1 << 20) + 1, 0);
    rc = cuMemAllocPitch_v2(&p, &pitch, 1000, 30, 4); note('a', "pitch", 0, rc, p, rc ? 0 : pitch * 30, 0);
    rc = cuMemAllocManaged(&p, 3 << 20, 1); note('a', "managed", 0, rc, p, 3 << 20, 0);
    rc = cuMemHostAlloc(&hp, 5 << 20, 0); note('a', "host_alloc", 0, rc, (unsigned long long)hp, 5 << 20, 5);
    rc = cuMemAllocHost_v2(&hp, 7 << 20); note('a', "host", 0, rc, (unsigned long long)hp, 7 << 20, 5);
    rc = cuMemAlloc_v2(&p, 0xBAD); note('a', "alloc", 0, rc, p, 0xBAD, 0);
    rc = cuMemAlloc_v2(&p, 0xC0DE); note('a', "alloc", 0, rc, p, 0xC0DE, 0);
    rc = cuMemFree_v2(0xDEAD); printf("free path=a rc=%d ptr=0xdead\n", rc);

    /* b: dlopen + dlsym on the libcuda handle */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen failed\n"); return 2; }
    alloc_t b_alloc = (alloc_t)dlsym(h, "cuMemAlloc_v2");
    async_t b_async = (async_t)dlsym(h, "cuMemAllocAsync");
    pool_t b_pool = (pool_t)dlsym(h, "cuMemAllocFromPoolAsync_ptsz");
    free_async_t b_free_async = (free_async_t)dlsym(h, "cuMemFreeAsync");
    rc = b_alloc(&p, 9 << 20); note('b', "alloc", 0, rc, p, 9 << 20, 0);
    rc = b_async(&p, 11 << 20, s1); note('b', "async", 0, rc, p, 11 << 20, 1);
    rc = b_pool(&p, 13 << 20, pool, s2); note('b', "pool", 0, rc, p, 13 << 20, 1);

    /* c: cuGetProcAddress of cuGetProcAddress, then the functions */
    gpa2_t gpa2 = (gpa2_t)dlsym(h, "cuGetProcAddress_v2");
    gpa2_t gpa = NULL; int st = -1;
    rc = gpa2("cuGetProcAddress", (void **)&gpa, 13000, 0, &st);
    printf("gpa self rc=%d status=%d\n", rc, st);
    alloc_t c_alloc; free_t c_free; async_t c_async; free_async_t c_free_async;
    create_t c_create; release_t c_release; map_t c_map; unmap_t c_unmap;
    gpa("cuMemAlloc", (void **)&c_alloc, 13000, 0, &st);
    gpa("cuMemFree", (void **)&c_free, 13000, 0, &st);
    gpa("cuMemAllocAsync", (void **)&c_async, 13000, 2, &st);
    gpa("cuMemFreeAsync", (void **)&c_free_async, 13000, 2, &st);
    gpa("cuMemCreate", (void **)&c_create, 13000, 0, &st);
    gpa("cuMemRelease", (void **)&c_release, 13000, 0, &st);
    gpa("cuMemMap", (void **)&c_map, 13000, 0, &st);
    gpa("cuMemUnmap", (void **)&c_unmap, 13000, 0, &st);
    void *nothing = (void *)1;
    rc = gpa("cuNoSuchThing", &nothing, 13000, 0, &st);
    printf("gpa missing rc=%d status=%d null=%d\n", rc, st, nothing == NULL);
    rc = c_alloc(&p, 15 << 20); note('c', "alloc", 0, rc, p, 15 << 20, 2);
    rc = c_async(&p, 17 << 20, s2); note('c', "async", 0, rc, p, 17 << 20, 3);
    CUmemAllocationProp prop; memset(&prop, 0, sizeof prop);
    prop.type = 1; prop.location.type = 1; prop.location.id = 1;
    CUhandle hd; CUdeviceptr va = 0x7f0000000000ULL;
    rc = c_create(&hd, 20 << 20, &prop, 0); note('c', "vmm", 1, rc, hd, 20 << 20, 4);
    printf("map rc=%d\n", c_map(va, 20 << 20, 0, hd, 0));
    /* v1 export, old ABI version of cuGetProcAddress, on device 1 */
    gpa1_t gpa1 = NULL; alloc_t v1_alloc = NULL;
    rc = cuGetProcAddress("cuGetProcAddress", (void **)&gpa1, 11030, 0);
    printf("gpa1 self rc=%d\n", rc);
    gpa1("cuMemAlloc", (void **)&v1_alloc, 11030, 0);
    fake_set_device(1);
    rc = v1_alloc(&p, 19 << 20); note('c', "alloc", 1, rc, p, 19 << 20, 2);
    fake_set_device(0);

    /* RTLD_NEXT from the program must find the next object after the program. */
    void *next = dlsym(RTLD_NEXT, "cuMemAlloc_v2");
    printf("rtld_next_is_first_definition=%d\n", next == (void *)cuMemAlloc_v2);

    printf("ready\n");
    char line[64];
    if (!fgets(line, sizeof line, stdin)) return 3;

    for (int i = 0; i < nlive; i++) {
        switch (live[i].how) {
        case 0: rc = cuMemFree_v2(live[i].ptr); break;
        case 1: rc = b_free_async(live[i].ptr, s1); break;
        case 2: rc = c_free(live[i].ptr); break;
        case 3: rc = c_free_async(live[i].ptr, s2); break;
        case 4: rc = c_unmap(va, 20 << 20); printf("unmap rc=%d\n", rc); rc = c_release(live[i].ptr); break;
        default: rc = cuMemFreeHost((void *)live[i].ptr); break;
        }
        printf("free path=%c kind=%s rc=%d ptr=0x%llx\n", live[i].path, live[i].kind, rc, live[i].ptr);
    }

    /* A forked child allocates on its own; nothing may hang. */
    pid_t kid = fork();
    if (kid == 0) {
        CUdeviceptr q; CUresult r = cuMemAlloc_v2(&q, 1 << 20);
        r |= cuMemFree_v2(q);
        exit(r);
    }
    int ws = 0; waitpid(kid, &ws, 0);
    printf("fork child exit=%d\n", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
    printf("checksum=%llx\n", fake_checksum());
    return 0;
}
