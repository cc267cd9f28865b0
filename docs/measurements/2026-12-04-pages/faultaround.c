// What one read fault maps of a cached file: mmap FILE read-only, optionally madvise ADVICE
// on the whole mapping (1 = MADV_RANDOM), read one byte every STRIDE KiB, print how much
// RssFile grew per read. 64 KiB per read is the kernel's fault-around; 4 KiB would be the
// page alone.
//   gcc -O2 -o /tmp/faultaround faultaround.c
//   cat FILE >/dev/null; /tmp/faultaround FILE 256 [ADVICE]
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static long rss_file_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "RssFile:", 8)) v = atol(line + 8);
    fclose(f);
    return v;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int fd = open(argv[1], O_RDONLY);
    off_t n = lseek(fd, 0, SEEK_END);
    long stride = atol(argv[2]) * 1024;
    char *p = mmap(0, n, PROT_READ, MAP_PRIVATE, fd, 0);
    int advised = argc > 3 ? madvise(p, n, atoi(argv[3])) : 0;
    long before = rss_file_kb(), reads = 0;
    volatile char sink = 0;
    for (off_t o = 0; o < n; o += stride, reads++) sink += p[o];
    long grew = rss_file_kb() - before;
    printf("advice %s (madvise %d): %ld reads %ld KiB apart, RssFile +%ld kB, %.1f kB a read\n",
           argc > 3 ? argv[3] : "none", advised, reads, stride / 1024, grew, (double)grew / reads);
    return 0;
}
