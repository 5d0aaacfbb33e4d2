/* ns per clock_gettime(CLOCK_REALTIME) in a tight loop: clockbench [ITERATIONS] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long ns(struct timespec t) { return (long long)t.tv_sec * 1000000000LL + t.tv_nsec; }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 10000000;
    struct timespec t, a, b;
    long long sink = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        clock_gettime(CLOCK_REALTIME, &t);
        sink += t.tv_nsec;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.2f ns/call (realtime %ld, sink %lld)\n", (double)(ns(b) - ns(a)) / n, (long)t.tv_sec, sink & 1);
    return 0;
}
