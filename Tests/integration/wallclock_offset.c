/*
 * A wall clock set wrong, for test_clock.py: an LD_PRELOAD library that shifts CLOCK_REALTIME
 * (clock_gettime, gettimeofday, time) by $EMBER_WALLCLOCK_OFFSET_MS; monotonic clocks pass
 * untouched, as on a machine whose clock is merely set wrong. Debian's faketime cannot run
 * emberd: libfaketime's clock_gettime recurses into jemalloc's initialisation and hangs. This
 * library makes the system calls itself (no dlsym, no allocation), so the allocator may call it.
 * Built by test_clock.py with the C compiler next to swift (clang) or cc.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long offset_ms(void) {
    /* Read once; a race between threads reads the same value twice. */
    static long long cached;
    static int read_done;
    if (!read_done) {
        const char *v = getenv("EMBER_WALLCLOCK_OFFSET_MS");
        cached = v ? atoll(v) : 0;
        read_done = 1;
    }
    return cached;
}

static void shift(struct timespec *ts) {
    long long off = offset_ms();
    long long sec = (long long)ts->tv_sec + off / 1000;
    long long nsec = (long long)ts->tv_nsec + (off % 1000) * 1000000LL;
    if (nsec < 0) { nsec += 1000000000LL; sec -= 1; }
    if (nsec >= 1000000000LL) { nsec -= 1000000000LL; sec += 1; }
    ts->tv_sec = (time_t)sec;
    ts->tv_nsec = (long)nsec;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    int r = (int)syscall(SYS_clock_gettime, clock, ts);
    if (r == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) shift(ts);
    return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    (void)tz;
    struct timespec ts;
    int r = clock_gettime(CLOCK_REALTIME, &ts);
    if (r == 0) {  /* tv is declared nonnull */
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return r;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
    if (out != NULL) *out = ts.tv_sec;
    return ts.tv_sec;
}
