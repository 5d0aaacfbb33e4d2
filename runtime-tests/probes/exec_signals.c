/* Execs a static program many times while signals keep interrupting the exec: each child
 * installs a SIGURG handler (SA_RESTART) and execs argv[2..]; the parent sends it SIGURG at
 * short random intervals until it has exited (after the exec, SIGURG is ignored by default).
 * A signal that lands while the supervisor handles the exec notification invalidates it.
 * Usage: exec_signals ITERATIONS PROGRAM [ARGS...]; prints "done N" when every child exited 0. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void on_urg(int sig) { (void)sig; }

static void pause_ns(long ns) {
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: exec_signals N PROGRAM [ARGS...]\n");
        return 2;
    }
    int n = atoi(argv[1]);
    unsigned seed = 1;
    for (int i = 0; i < n; i++) {
        pid_t child = fork();
        if (child < 0) {
            perror("fork");
            return 1;
        }
        if (child == 0) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_urg;
            sa.sa_flags = SA_RESTART;
            sigaction(SIGURG, &sa, NULL);
            execv(argv[2], argv + 2);
            _exit(127);
        }
        int status = 0;
        for (;;) {
            pid_t got = waitpid(child, &status, WNOHANG);
            if (got == child)
                break;
            if (got < 0) {
                perror("waitpid");
                return 1;
            }
            kill(child, SIGURG);
            pause_ns((long)(rand_r(&seed) % 200) * 1000);
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "child %d: status %#x\n", i, status);
            return 1;
        }
    }
    printf("done %d\n", n);
    return 0;
}
