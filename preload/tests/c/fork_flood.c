/* Forks while monitors flood the interposer's socket.
 * One allocation starts the reporter; after "ready" and a line on stdin it
 * forks N times (each child allocates once and exits) and prints the slowest
 * fork() in microseconds. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);

static long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    int n = argc > 1 ? atoi(argv[1]) : 50;
    CUdeviceptr p;
    cuMemAlloc_v2(&p, 1 << 20);
    printf("ready\n");
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 2;
    long long worst = 0;
    for (int i = 0; i < n; i++) {
        long long t0 = now_us();
        pid_t kid = fork();
        if (kid == 0) {
            CUdeviceptr q;
            cuMemAlloc_v2(&q, 4096);
            _exit(0);
        }
        long long dt = now_us() - t0;
        if (dt > worst) worst = dt;
        int ws;
        waitpid(kid, &ws, 0);
        usleep(20000);
    }
    printf("max_fork_us=%lld\n", worst);
    return 0;
}
