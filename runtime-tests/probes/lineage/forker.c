// 300 forks of children that exit at once, with a SIGCHLD handler installed without
// SA_RESTART (as dash does): none may fail (a fork held by the supervisor could, with EINTR).
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <signal.h>
static void h(int s) { (void)s; }
int main(void) {
    struct sigaction sa = {0}; sa.sa_handler = h; sigaction(SIGCHLD, &sa, 0); /* no SA_RESTART */
    int bad = 0;
    for (int i = 0; i < 300; i++) {
        pid_t p = fork();
        if (p < 0) { printf("fork failed: %s\n", strerror(errno)); bad++; continue; }
        if (p == 0) { _exit(0); }
    }
    while (wait(0) > 0 || errno == EINTR) ;
    printf("bad %d\n", bad);
    return 0;
}
