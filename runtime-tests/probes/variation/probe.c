/* Static C probe: what a program that bypasses libc's interposable functions sees. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static void hex(const char *key, const unsigned char *p, int n) {
    printf("c.%s: ", key);
    for (int i = 0; i < n; i++) printf("%02x", p[i]);
    printf("\n");
}

int main(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    printf("c.realtime: %lld.%09ld %lld\n", (long long)ts.tv_sec, ts.tv_nsec, (long long)time(NULL));
    hex("at_random", (const unsigned char *)getauxval(AT_RANDOM), 16);
    unsigned char buf[16];
    if (getrandom(buf, sizeof buf, 0) == sizeof buf) hex("getrandom", buf, 16);
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd >= 0 && read(fd, buf, 16) == 16) hex("urandom", buf, 16);
    if (fd >= 0) close(fd);
    struct utsname u;
    uname(&u);
    printf("c.uname: %s %s %s %s %s\n", u.sysname, u.nodename, u.release, u.version, u.machine);
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    struct sysinfo si;
    sysinfo(&si);
    printf("c.cpus: %d %ld %lu\n", CPU_COUNT(&set), sysconf(_SC_NPROCESSORS_ONLN),
           (unsigned long)si.totalram * si.mem_unit);
    printf("c.ids: %d %d %d\n", (int)getpid(), (int)getuid(), (int)getgid());
    int local = 0;
    void *heap = malloc(100);
    printf("c.stack: %p\n", (void *)&local);
    printf("c.heap: %p %p\n", heap, sbrk(0));
    mode_t old = umask(022);
    printf("c.umask: %03o\n", (unsigned)old);
    char cwd[4096];
    printf("c.cwd: %s\n", getcwd(cwd, sizeof cwd) ? cwd : "?");
    DIR *d = opendir("input");
    printf("c.readdir:");
    struct dirent *e;
    while (d && (e = readdir(d))) printf(" %s", e->d_name);
    printf("\n");
    if (d) {
        rewinddir(d);
        e = readdir(d);
        printf("c.rewind: %s\n", e ? e->d_name : "(none)");
        closedir(d);
    }
    return 0;
}
