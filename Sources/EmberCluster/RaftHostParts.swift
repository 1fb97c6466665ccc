import EmberNodeStore
import EmberRaft
import EmberStorage
import Foundation

/// Entries this leader decoded when it checked them (forwarded writes, `checkedStamp`), by
/// index, for the turn's write: the storage entry it appends without decoding the bytes again.
/// Emptied by every write, so it holds at most one turn's proposals.
struct DecodedEntries {
    private(set) var entries: [UInt64: EmberStorage.LogEntry] = [:]

    mutating func remember(_ entry: EmberStorage.LogEntry, index: UInt64, term: UInt64) {
        var entry = entry
        entry.index = index
        entry.term = term
        entries[index] = entry
    }

    /// The storage entry for `e`: the one decoded at its check when it is that entry (same
    /// index and term), else decoded from its bytes.
    func storageEntry(_ e: EmberRaft.LogEntry) throws -> EmberStorage.LogEntry {
        try entry(for: e) ?? RaftPersistence.storageEntry(e)
    }

    /// The entry remembered for `e` (same index and term), if any.
    func entry(for e: EmberRaft.LogEntry) -> EmberStorage.LogEntry? {
        guard e.kind == .normal, let entry = entries[e.index], entry.term == e.term else { return nil }
        return entry
    }

    mutating func forget() {
        if !entries.isEmpty { entries.removeAll(keepingCapacity: true) }
    }
}

/// Where every member is reached: from the latest config entry, the stored directory, or the
/// flags (RaftHost+Admin `syncMembership`).
struct DirectoryBook {
    var directory: MemberDirectory
    /// The voter set `directory` was last computed for.
    var synced: Membership?
    var syncedDeparting: [NodeID] = []
    /// Every peer address seen (flags and directories), to keep departing peers reachable.
    var known: [NodeID: PeerAddress] = [:]
}

/// Snapshot transfers (RaftHost+Snapshots): the image file served to followers and the one being
/// written off the loop (awaited on stop: it reads the store). Whether one is being written is
/// the core's (`HostCore.preparingSnapshot`).
struct SnapshotBook {
    var outgoing: OutgoingSnapshot?
    var task: Task<Void, Never>?
}
