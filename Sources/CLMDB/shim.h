#ifndef EMBER_CLMDB_SHIM_H
#define EMBER_CLMDB_SHIM_H
#include <lmdb.h>
#endif
