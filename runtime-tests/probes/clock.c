/* Prints what each libc time interface reads, one "name value" line each. With an argument
 * N, also prints N consecutive clock_gettime(CLOCK_REALTIME) readings in nanoseconds, then
 * the realtime-minus-monotonic offset (ns), which is the same for every process of a sandbox.
 * With the argument "cpu", only the CPU-time clocks (ns) after some work, each way a
 * program names one. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/timeb.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void *thread_main(void *arg) {
    (void)arg;
    printf("thread %lld\n", ns(CLOCK_REALTIME) / 1000000000LL);
    return NULL;
}

static int cpu_clocks(void) {
    volatile unsigned long spin = 0;
    clockid_t pid_clock, thread_clock;
    while (spin < 20000000) spin++; /* about 20 ms of CPU time */
    clock_getcpuclockid(0, &pid_clock);
    pthread_getcpuclockid(pthread_self(), &thread_clock);
    printf("cpu-process %lld\n", ns(CLOCK_PROCESS_CPUTIME_ID));
    printf("cpu-thread %lld\n", ns(CLOCK_THREAD_CPUTIME_ID));
    printf("cpu-getcpuclockid %lld\n", ns(pid_clock));
    printf("cpu-pthread_getcpuclockid %lld\n", ns(thread_clock));
    printf("cpu-clock %lld\n", (long long)clock());
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "cpu") == 0) return cpu_clocks();
    struct timeval tv;
    struct timespec ts;
    struct timeb tb;
    gettimeofday(&tv, NULL);
    timespec_get(&ts, TIME_UTC);
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    ftime(&tb);
    printf("realtime %lld\n", ns(CLOCK_REALTIME) / 1000000000LL);
    printf("coarse %lld\n", ns(CLOCK_REALTIME_COARSE) / 1000000000LL);
    printf("tai %lld\n", ns(CLOCK_TAI) / 1000000000LL);
    printf("gettimeofday %ld\n", (long)tv.tv_sec);
    printf("time %ld\n", (long)time(NULL));
    printf("timespec_get %ld\n", (long)ts.tv_sec);
    printf("ftime %ld\n", (long)tb.time);
    pthread_t th;
    pthread_create(&th, NULL, thread_main, NULL);
    pthread_join(th, NULL);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        printf("child %lld\n", ns(CLOCK_REALTIME) / 1000000000LL);
        return 0;
    }
    waitpid(child, NULL, 0);
    if (argc > 1) {
        int n = atoi(argv[1]);
        for (int i = 0; i < n; i++) printf("read %lld\n", ns(CLOCK_REALTIME));
        long long best = 0;
        for (int i = 0; i < 50; i++) { /* the tightest bracket of a realtime read */
            long long a = ns(CLOCK_MONOTONIC), r = ns(CLOCK_REALTIME), b = ns(CLOCK_MONOTONIC);
            if (i == 0 || b - a < best) { best = b - a; printf("offset %lld\n", r - (a + b) / 2); }
        }
    }
    return 0;
}
