// 500 loopback connects, each right after forking a child that exits at once, with a SIGCHLD
// handler installed without SA_RESTART: none may fail (a connect held by the supervisor
// would fail with EINTR whenever the signal is pending).
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
static void h(int s) { (void)s; }
int main(void) {
    struct sigaction sa = {0}; sa.sa_handler = h; sigaction(SIGCHLD, &sa, 0);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {0}; a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(0x7f000001);
    bind(l, (void *)&a, sizeof a); listen(l, 1024);
    socklen_t n = sizeof a; getsockname(l, (void *)&a, &n);
    int bad = 0;
    for (int i = 0; i < 500; i++) {
        if (fork() == 0) _exit(0);
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(s, (void *)&a, sizeof a) < 0) { bad++; printf("connect: %s\n", strerror(errno)); }
        close(s);
        int c = accept(l, 0, 0); if (c >= 0) close(c);
    }
    while (wait(0) > 0 || errno == EINTR) ;
    printf("bad %d\n", bad);
}
