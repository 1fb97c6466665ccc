import EmberRaft
import EmberStorage

/// Translation between Raft's log/snapshots and the LMDB store's.
///
/// Raft entries map one-to-one onto storage log entries at the same index and term: a `.normal`
/// entry's data is an encoded storage `LogEntry` (namespace, operation, leader timestamp), a
/// `.noop` is a storage `.noop`, and a `.configChange` is a `set` of the member directory (its
/// context) in the reserved namespace (`MemberDirectory`), so membership survives restarts and
/// rides in snapshots. A Raft snapshot's data is the
/// store's own snapshot stream (its chunks, each length-prefixed), so installing one is
/// `installSnapshot(chunks:)`.
enum RaftPersistence {
    /// Entries read back from the store per call at startup.
    static let loadBatch = 1_000
    static let noopNamespace = "_raft"

    /// The storage entry for a Raft entry (throws when a normal entry's data is not an entry).
    static func storageEntry(_ e: EmberRaft.LogEntry) throws -> EmberStorage.LogEntry {
        switch e.kind {
        case .normal:
            var entry = try EmberStorage.LogEntry(decoding: e.data)
            entry.index = e.index
            entry.term = e.term
            return entry
        case .configChange:
            guard let config = ConfigEntry(decoding: e.data) else { throw StorageError.corrupt("config entry \(e.index)") }
            // Entries proposed without a directory (none are, by this host) still record the voters.
            let directory = MemberDirectory(context: config.context)
                ?? MemberDirectory(members: Dictionary(uniqueKeysWithValues: config.membership.voters.map { ($0, .init(peer: "")) }))
            return EmberStorage.LogEntry(
                index: e.index, term: e.term, namespace: MemberDirectory.namespace,
                operation: .set(path: MemberDirectory.path, value: .string(directory.text())), timestamp: 0)
        case .noop:
            // Any valid namespace: a no-op touches none.
            return EmberStorage.LogEntry(index: e.index, term: e.term, namespace: noopNamespace, operation: .noop, timestamp: 0)
        }
    }

    static func raftEntry(_ e: EmberStorage.LogEntry) -> EmberRaft.LogEntry {
        if case .noop = e.operation { return EmberRaft.LogEntry(index: e.index, term: e.term, kind: .noop) }
        if e.namespace == MemberDirectory.namespace, case .set(_, .string(let text), _) = e.operation,
           let directory = MemberDirectory(text: text) {
            let data = ConfigEntry(membership: Membership(voters: directory.voters), context: directory.context).encoded()
            return EmberRaft.LogEntry(index: e.index, term: e.term, kind: .configChange, data: data)
        }
        return EmberRaft.LogEntry(index: e.index, term: e.term, kind: .normal, data: e.encoded())
    }

    /// The store's state as one byte array: `[u32 BE length][chunk]...`.
    static func serialize(_ store: EmberStore) throws -> (data: [UInt8], index: UInt64, term: UInt64, timestamp: Int64) {
        var out: [UInt8] = []
        var header: (UInt64, UInt64, Int64)?
        try store.snapshot { chunk in
            if header == nil { header = try parseHeader(chunk) }
            let n = UInt32(chunk.count)
            out += [UInt8(n >> 24), UInt8(truncatingIfNeeded: n >> 16), UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n)]
            out += chunk
        }
        guard let header else { throw StorageError.corrupt("snapshot without header") }
        return (out, header.0, header.1, header.2)
    }

    static func chunks(_ data: [UInt8]) throws -> [[UInt8]] {
        var out: [[UInt8]] = []
        var i = 0
        while i < data.count {
            guard i + 4 <= data.count else { throw StorageError.corrupt("snapshot framing") }
            let n = data[i..<i + 4].reduce(0) { ($0 << 8) | Int($1) }
            i += 4
            guard i + n <= data.count else { throw StorageError.corrupt("snapshot framing") }
            out.append(Array(data[i..<i + n]))
            i += n
        }
        return out
    }

    /// The first record of a store snapshot: table 0xFF, empty key, value = applied index,
    /// applied term, last timestamp (u64 BE each); lengths are LEB128 varints.
    static func parseHeader(_ chunk: [UInt8]) throws -> (UInt64, UInt64, Int64) {
        // tag(1) + key length varint (0) + value length varint (24) + 24 bytes
        guard chunk.count >= 27, chunk[0] == 0xFF, chunk[1] == 0, chunk[2] == 24 else {
            throw StorageError.corrupt("snapshot header")
        }
        func u64(_ at: Int) -> UInt64 { chunk[at..<at + 8].reduce(0) { ($0 << 8) | UInt64($1) } }
        return (u64(3), u64(11), Int64(bitPattern: u64(19)))
    }

    /// What Raft needs to restart: hard state, the store's applied state as the snapshot, and
    /// the persisted-but-unapplied log tail.
    /// The member directory in the store's applied state (nil before the first change).
    static func storedDirectory(_ store: EmberStore) throws -> MemberDirectory? {
        let (node, _) = try store.read(namespace: MemberDirectory.namespace, path: MemberDirectory.path)
        guard case .string(let text) = node.toJSON() else { return nil }
        return MemberDirectory(text: text)
    }

    /// `voters`: the bootstrap voter set, used while the applied state holds no directory.
    static func load(_ store: EmberStore, voters: [NodeID]) async throws
        -> (PersistentState, applied: UInt64, lastTimestamp: Int64)
    {
        let hs = try await store.hardState()
        let snap = try serialize(store)
        var entries: [EmberRaft.LogEntry] = []
        var next = snap.index + 1
        var lastTimestamp = snap.timestamp
        while next <= store.lastLogIndex {
            let batch = try store.entries(from: next, maxCount: loadBatch)
            guard !batch.isEmpty else { break }
            for e in batch {
                guard e.index == next else { throw StorageError.corrupt("log gap at \(next)") }
                entries.append(raftEntry(e))
                lastTimestamp = max(lastTimestamp, e.timestamp)
                next += 1
            }
        }
        let applied = try storedDirectory(store)?.voters ?? voters
        let metadata = SnapshotMetadata(index: snap.index, term: snap.term, membership: Membership(voters: applied))
        let state = PersistentState(
            hardState: EmberRaft.HardState(term: hs.term, votedFor: hs.votedFor, commit: snap.index),
            snapshot: Snapshot(metadata: metadata, data: snap.data), entries: entries)
        return (state, snap.index, lastTimestamp)
    }
}
