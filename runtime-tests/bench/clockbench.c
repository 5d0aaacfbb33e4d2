/* ns per clock_gettime(CLOCK_REALTIME) in a tight loop: clockbench [ITERATIONS [monotonic]]
 * (`monotonic`: CLOCK_MONOTONIC instead, which reprorun does not fake but a time namespace
 * offsets).
 * Prints the wall time per call and the CPU time per call (this thread's CPU clock, read by
 * the raw system call: on a machine shared with other work, the CPU time moves less). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

static long long ns(struct timespec t) { return (long long)t.tv_sec * 1000000000LL + t.tv_nsec; }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 10000000;
    clockid_t clk = argc > 2 && argv[2][0] == 'm' ? CLOCK_MONOTONIC : CLOCK_REALTIME;
    struct timespec t, a, b, ca, cb;
    long long sink = 0;
    syscall(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, &ca);
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        clock_gettime(clk, &t);
        sink += t.tv_nsec;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    syscall(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, &cb);
    printf("%.2f ns/call (cpu %.2f ns/call, realtime %ld, sink %lld)\n", (double)(ns(b) - ns(a)) / n,
           (double)(ns(cb) - ns(ca)) / n, (long)t.tv_sec, sink & 1);
    return 0;
}
