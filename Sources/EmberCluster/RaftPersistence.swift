import EmberNodeStore
import EmberRaft
import EmberStorage

/// Translation between Raft's log/snapshots and the LMDB store's.
///
/// Raft entries map one-to-one onto storage log entries at the same index and term: a `.normal`
/// entry's data is an encoded storage `LogEntry` (namespace, operation, leader timestamp), a
/// `.noop` is a storage `.noop`, and a `.configChange` is a `set` of the member directory (its
/// context) in the reserved namespace (`MemberDirectory`), so membership survives restarts and
/// rides in snapshots. A Raft snapshot is the store itself: compaction records only the point,
/// and a follower is caught up from a snapshot file (`writeSnapshotFile`) streamed in chunks
/// (RaftHost+Snapshots).
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
                ?? MemberDirectory(members: Dictionary(uniqueKeysWithValues: config.membership.voters.map { ($0, .init(peer: "")) }
                    + config.membership.learners.map { ($0, .init(peer: "", learner: true)) }))
            return EmberStorage.LogEntry(
                index: e.index, term: e.term, namespace: MemberDirectory.namespace,
                operation: .set(path: MemberDirectory.path, value: .string(directory.text())), timestamp: 0)
        case .noop:
            // Any valid namespace: a no-op touches none.
            return EmberStorage.LogEntry(index: e.index, term: e.term, namespace: noopNamespace, operation: .noop, timestamp: 0)
        }
    }

    /// What the store keeps for `e` (decoded as `entry`): a client entry's bytes as the wire
    /// carried them with index and term filled in — not encoded again.
    static func storageEncoding(_ e: EmberRaft.LogEntry, _ entry: EmberStorage.LogEntry) throws -> [UInt8] {
        guard e.kind == .normal else { return entry.encoded() }
        return try EmberStorage.LogEntry.restamped(e.data, index: e.index, term: e.term, timestamp: entry.timestamp)
    }

    static func raftEntry(_ e: EmberStorage.LogEntry) -> EmberRaft.LogEntry {
        if case .noop = e.operation { return EmberRaft.LogEntry(index: e.index, term: e.term, kind: .noop) }
        if e.namespace == MemberDirectory.namespace, case .set(_, .string(let text), _) = e.operation,
           let directory = MemberDirectory(text: text) {
            let data = ConfigEntry(membership: directory.membership, context: directory.context).encoded()
            return EmberRaft.LogEntry(index: e.index, term: e.term, kind: .configChange, data: data)
        }
        return EmberRaft.LogEntry(index: e.index, term: e.term, kind: .normal, data: e.encoded())
    }

    /// The member directory in the store's applied state (nil before the first change).
    static func storedDirectory(_ store: EmberStore) throws -> MemberDirectory? {
        let (node, _) = try store.read(namespace: MemberDirectory.namespace, path: MemberDirectory.path)
        guard case .string(let text) = node.toJSON() else { return nil }
        return MemberDirectory(text: text)
    }

    /// What Raft needs to restart: hard state, the store's applied position as the compaction
    /// point (the tree is the state machine's snapshot: nothing is serialized, so a node holding
    /// a large tree starts at once), and the persisted-but-unapplied log tail.
    /// `voters`: the bootstrap voter set, used while the applied state holds no directory.
    static func load(_ store: EmberStore, voters: [NodeID]) async throws
        -> (PersistentState, applied: UInt64, lastTimestamp: Int64)
    {
        let hs = try await store.hardState()
        let snap = try store.appliedPosition()
        var entries: [EmberRaft.LogEntry] = []
        var next = snap.index + 1
        var lastTimestamp = snap.lastTimestamp
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
        // Learners survive a restart: the stored directory marks them.
        let applied = try storedDirectory(store)?.membership ?? Membership(voters: voters)
        let metadata = SnapshotMetadata(index: snap.index, term: snap.term, membership: applied)
        let state = PersistentState(
            hardState: EmberRaft.HardState(term: hs.term, votedFor: hs.votedFor, commit: snap.index),
            snapshot: metadata, entries: entries)
        return (state, snap.index, lastTimestamp)
    }
}
