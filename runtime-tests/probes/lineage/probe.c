// Lineage probe. `probe threads`: starts a number of threads that varies from run to run
// (read from the real monotonic clock, which reprorun leaves alone), so that every later
// process would get another pid. `probe print`: prints this process's AT_RANDOM bytes and
// getrandom bytes, then the same for a forked child, both of which must repeat run to run.
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *idle(void *arg) {
    (void)arg;
    usleep(1000);
    return NULL;
}

static void hex(const char *what, const unsigned char *b, size_t n) {
    printf("%s ", what);
    for (size_t i = 0; i < n; i++) printf("%02x", b[i]);
    printf("\n");
}

static void print(const char *who) {
    char label[64];
    unsigned char g[8];
    snprintf(label, sizeof label, "%s.at_random", who);
    hex(label, (const unsigned char *)getauxval(AT_RANDOM), 16);
    if (getrandom(g, sizeof g, 0) != sizeof g) return;
    snprintf(label, sizeof label, "%s.getrandom", who);
    hex(label, g, sizeof g);
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "threads") == 0) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        int n = 1 + (int)((t.tv_nsec / 1000) % 24);
        pthread_t th[24];
        for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, idle, NULL);
        for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
        return 0;
    }
    print(argc > 2 ? argv[2] : "probe");
    pid_t child = fork();
    if (child == 0) {
        print("child");
        _exit(0);
    }
    waitpid(child, NULL, 0);
    return 0;
}
