// 300 forks of children that exit at once, each followed by getrandom calls, with a SIGCHLD
// handler installed without SA_RESTART (as dash does): no fork and no getrandom(3) may fail
// (a call held by the supervisor could, with EINTR). Prints the failures, then, for the
// record, how often a raw getrandom system call and a blocking waitpid saw EINTR (the
// kernel allows EINTR there; the first is what a static program without the preload sees).
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
static void h(int s) { (void)s; }
int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = h;
    sigaction(SIGCHLD, &sa, 0); /* no SA_RESTART */
    int bad_fork = 0, bad_random = 0, raw_eintr = 0, wait_eintr = 0;
    unsigned char b[8];
    for (int i = 0; i < 300; i++) {
        pid_t p = fork();
        if (p < 0) {
            printf("fork failed: %s\n", strerror(errno));
            bad_fork++;
            continue;
        }
        if (p == 0) _exit(0);
        for (int j = 0; j < 3; j++) {
            if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
                printf("getrandom failed: %s\n", strerror(errno));
                bad_random++;
            }
            if (syscall(SYS_getrandom, b, sizeof b, 0) < 0 && errno == EINTR) raw_eintr++;
        }
        if (i % 2 == 0) {
            while (waitpid(p, 0, 0) < 0)
                if (errno == EINTR) wait_eintr++; else break;
        }
    }
    while (wait(0) > 0 || errno == EINTR)
        ;
    printf("bad %d %d\n", bad_fork, bad_random);
    fprintf(stderr, "raw getrandom EINTR %d, waitpid EINTR %d\n", raw_eintr, wait_eintr);
    return 0;
}
