// Plain CUDA C workload for preload_check.sh: the runtime reaches the driver
// through cuGetProcAddress, as every real program does. It keeps its own sums
// of live device bytes and the peak, prints them as CHECK lines and waits for
// a line on stdin so the checker can compare what the interposer reports.
#include <cstdio>
#include <cuda_runtime.h>

static long long live = 0, peak = 0;

static void check(const char *phase) {
    std::printf("CHECK {\"phase\":\"%s\",\"allocated\":%lld,\"peak_allocated\":%lld}\n", phase, live, peak);
    std::fflush(stdout);
    char line[16];
    if (!std::fgets(line, sizeof line, stdin)) std::exit(3);
}

static void *get(size_t n) {
    void *p = nullptr;
    if (cudaMalloc(&p, n) != cudaSuccess) { std::printf("cudaMalloc failed\n"); std::exit(2); }
    live += (long long)n; if (live > peak) peak = live;
    return p;
}

static void put(void *p, size_t n) {
    if (cudaFree(p) != cudaSuccess) { std::printf("cudaFree failed\n"); std::exit(2); }
    live -= (long long)n;
}

int main() {
    cudaFree(nullptr);  // context
    const size_t sizes[] = {1 << 20, 3 << 20, (64 << 20) + 4096, 512, 1000000, 256 << 20};
    void *ptrs[6];
    for (int i = 0; i < 6; i++) ptrs[i] = get(sizes[i]);
    check("after_malloc");
    put(ptrs[5], sizes[5]);
    put(ptrs[2], sizes[2]);
    check("after_free");
    cudaStream_t s; cudaStreamCreate(&s);
    void *a[8];
    for (int i = 0; i < 8; i++) {
        if (cudaMallocAsync(&a[i], (size_t)(i + 1) << 22, s) != cudaSuccess) return 2;
        live += (long long)(i + 1) << 22; if (live > peak) peak = live;
    }
    cudaStreamSynchronize(s);
    check("after_malloc_async");
    for (int i = 0; i < 8; i++) { cudaFreeAsync(a[i], s); live -= (long long)(i + 1) << 22; }
    cudaStreamSynchronize(s);
    for (int i = 0; i < 6; i++) if (i != 2 && i != 5) put(ptrs[i], sizes[i]);
    check("end");
    return 0;
}
