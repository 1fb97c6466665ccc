// EmberStorage — LMDB-backed durable storage for Ember's JSON trees.
// Must not: import network packages or EmberRaft (it stores the log entries and hard state a
// Raft host hands it; committing is the host's decision).
//
// Layout: one LMDB environment per node (a data directory) with named databases `tree`, `ver`,
// `idx`, `log`, `meta` (see `Tables`), and overflow twins `treex`, `verx`, `idxx` for keys longer
// than 480 bytes (`SplitTable`). Every key of the tree, versions and
// indexes starts with the namespace (1–64 chars of A–Z a–z 0–9 - _) and a 0x00 byte.
//
// Tree: leaves are stored under the order-preserving encoding of their path (`KeyCodec`), so a
// subtree is one cursor range scan and a `$key` range is a cursor walk. An interior node's
// priority is a record at the node's own key (which sorts right before its descendants). Empty
// objects are never stored; deleting the last child removes the parent and its priority; writing
// under a leaf turns it into an object that keeps the leaf's priority.
//
// Writes: every accepted write is one `LogEntry`. Appending it, applying it (tree, versions,
// indexes) and recording `appliedIndex` happen in one LMDB write transaction; `submit` returns
// after that transaction committed (fsync unless `durable = false`). Entries are group-committed
// on the writer thread. Each entry is applied in a nested transaction so one entry's apply-time
// failure (`.rejected`) leaves the others of its batch intact; a multi-path update is all or
// nothing. A failed condition is a result (`.conditionFailed` with current value and version),
// decided at apply time like on every replica: it writes nothing but consumes its log index
// (the entry stays in the log, so a follower replaying it reaches the same decision).
//
// Server values are resolved when an entry is applied, against the stored data, with the
// timestamp fixed in the entry. The entry encoding is binary and exact (an integral double stays
// a double) so every replica resolves increments identically.
//
// Versions: `ver[P] = (sub, at)`; `sub` = last index that changed P or anything below it, `at` =
// last index of a write targeting exactly P. version(P) = max(sub[P], at[A] for A = root…P):
// O(depth) point reads. Writes that change nothing (exactly equal data) do not bump versions.
// REST's ETags are made of versions by the front (`ifDataVersion` conditions carry them back).
//
// Indexes (`.indexOn`): `setIndexes` builds new definitions from the data and drops removed ones;
// every write refreshes only the entries of the children it touches (or, for a write at or above
// an index location, re-derives that location's entries from the written value). A child's stale
// entry is found from its value before the write (no reverse table). Index keys are
// `def id + location + order-preserving index value + child key`; strings longer than 64 encoded
// bytes are truncated in the key and re-sorted exactly when read.
//
// Log compaction: entries older than `logRetention` (and applied) are deleted during later write
// transactions (bounded per transaction); `firstLogIndex` is recorded in meta. Opening a store
// does not replay anything, so a single node (retention 0) writes no log rows at all, except
// for its point-in-time archive: then each write is a row until archived, in a ring of small
// tables each emptied whole once archived (`LogRing`).
//
// Raft: see `EmberStore.append(entries:)`, `applyCommitted(through:)`, `setHardState`,
// `snapshot(maxChunkBytes:_:)` and `installSnapshot(chunks:)`.
//
// Limits: namespace 1–64 chars; paths as Firebase allows (32 levels of 768-byte keys: keys
// longer than LMDB's 511 bytes go to overflow tables, see `SplitTable`); entry ≤ `maxEntryBytes`; update
// parts ≤ `maxUpdateParts`; queue ≤ `maxPendingWrites` (`.queueFull`); ≤ 256 index definitions
// per namespace. Bad input is rejected by `validate` before anything reaches the log.
