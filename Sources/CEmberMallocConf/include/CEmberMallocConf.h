#ifndef CEMBER_MALLOC_CONF_H
#define CEMBER_MALLOC_CONF_H

/// The jemalloc settings `emberd` is built with (jemalloc's `malloc_conf` symbol).
const char *ember_malloc_conf(void);

#endif
