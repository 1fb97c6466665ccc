/* CLMDB: the system library over Debian's liblmdb-dev, for EmberStorage only.
   Must not: hold code of its own (EmberStorage wraps LMDB in Swift). */
#ifndef EMBER_CLMDB_SHIM_H
#define EMBER_CLMDB_SHIM_H
#include <lmdb.h>
#endif
