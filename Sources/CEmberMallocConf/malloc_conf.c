#include "CEmberMallocConf.h"

// jemalloc reads this string when it starts (before main): the node's allocator settings.
// One arena: a node's threads (event loops, writer, fan-out) allocate and free a bulk write's
// megabyte buffers on different threads; with jemalloc's default of 4 arenas per core each
// arena kept its own freed pages, and a 1 GB import held ~100 MiB more resident than it had
// allocated (BENCHMARKS.md, session 20). Small allocations still come from per-thread caches.
// MALLOC_CONF in the environment is read after this and overrides it (e.g. "narenas:8").
const char *malloc_conf = "narenas:1";

const char *ember_malloc_conf(void) { return malloc_conf; }
