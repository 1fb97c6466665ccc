/* CZlib: the system library over Debian's zlib1g-dev (the node already links libz through its
   HTTP client), for the archive segments' compression in EmberStorage.
   Must not: hold code of its own. */
#ifndef EMBER_CZLIB_SHIM_H
#define EMBER_CZLIB_SHIM_H
#include <zlib.h>
#endif
