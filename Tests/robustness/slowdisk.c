/*
 * Slow disks for the fault campaign: an LD_PRELOAD library that delays fsync, fdatasync and
 * msync while a control file exists. The file named by $EMBER_SLOWDISK_FILE holds the delay in
 * milliseconds (ASCII; empty or unreadable: 100 ms); without the file, syncs pass at once.
 * The nemesis creates and removes the file, so a node's disk turns slow and fast again while
 * the process runs. Built by campaign.py with the C compiler next to swift (clang) or cc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* Named limit: the longest delay one sync may get, whatever the file says. */
#define MAX_DELAY_MS 10000

static void delay_if_slow(void) {
    const char *path = getenv("EMBER_SLOWDISK_FILE");
    if (path == NULL) return;
    FILE *f = fopen(path, "r");
    if (f == NULL) return;
    long ms = 100;
    long read_ms;
    if (fscanf(f, "%ld", &read_ms) == 1 && read_ms >= 0) ms = read_ms;
    fclose(f);
    if (ms > MAX_DELAY_MS) ms = MAX_DELAY_MS;
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

int fsync(int fd) {
    static int (*real)(int);
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    delay_if_slow();
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    delay_if_slow();
    return real(fd);
}

int msync(void *addr, size_t length, int flags) {
    static int (*real)(void *, size_t, int);
    if (real == NULL) real = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "msync");
    if (flags & MS_SYNC) delay_if_slow();
    return real(addr, length, flags);
}
