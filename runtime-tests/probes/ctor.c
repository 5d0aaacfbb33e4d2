/* A library whose constructor reads the clock, and a program linked with it: glibc runs the
 * constructors of a program's own libraries before those of LD_PRELOAD ones, so the time
 * preload library is called before its own constructor has run. Built twice: with -DLIB as
 * the library, without it as the program.
 *
 * The library also defines getenv, which comes before libc's in the lookup order, so the
 * time library's set-up calls it: the first lookup of REPRORUN_CLOCK_PAGE raises a signal
 * whose handler reads the clock, on the thread that is setting the time library up. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#ifdef LIB
extern char **environ;
static volatile sig_atomic_t armed;
static volatile long long in_handler = -1;

static void on_usr1(int sig) {
    struct timespec ts;
    (void)sig;
    clock_gettime(CLOCK_REALTIME, &ts);
    in_handler = ts.tv_sec;
}

char *getenv(const char *name) {
    size_t n = strlen(name);
    if (armed && strcmp(name, "REPRORUN_CLOCK_PAGE") == 0) {
        armed = 0;
        raise(SIGUSR1);
    }
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

__attribute__((constructor)) static void early(void) {
    struct timespec ts;
    signal(SIGUSR1, on_usr1);
    armed = 1;
    clock_gettime(CLOCK_REALTIME, &ts);
    printf("ctor-realtime %lld\n", (long long)ts.tv_sec);
    printf("ctor-time %lld\n", (long long)time(NULL));
    printf("signal-realtime %lld\n", in_handler);
    fflush(stdout);
}
#else
int main(void) {
    printf("main-time %lld\n", (long long)time(NULL));
    return 0;
}
#endif
