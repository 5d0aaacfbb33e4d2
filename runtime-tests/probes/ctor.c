/* A library whose constructor reads the clock, and a program linked with it: glibc runs the
 * constructors of a program's own libraries before those of LD_PRELOAD ones, so the time
 * preload library is called before its own constructor has run. Built twice: with -DLIB as
 * the library, without it as the program. */
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

#ifdef LIB
__attribute__((constructor)) static void early(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    printf("ctor-realtime %lld\n", (long long)ts.tv_sec);
    printf("ctor-time %lld\n", (long long)time(NULL));
    fflush(stdout);
}
#else
int main(void) {
    printf("main-time %lld\n", (long long)time(NULL));
    return 0;
}
#endif
