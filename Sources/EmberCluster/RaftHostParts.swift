import EmberNodeStore
import EmberRaft
import EmberStorage
import Foundation

/// The persists a driver turn collects before making them durable at once (RaftHost.execute).
struct PersistBuffer {
    /// Term and vote as last made durable.
    var hard: EmberRaft.HardState
    /// Entries to append, in order; a later persist replaces earlier ones from its first index on.
    var entries: [EmberRaft.LogEntry] = []
    /// Term and vote to write (only when they differ from `hard`; the commit index is volatile).
    var pendingHard: EmberRaft.HardState?
    /// The last entry a flush made durable, to report with `Event.persisted` after the turn.
    var report: (index: UInt64, term: UInt64)?
    /// Entries this leader decoded when it checked them (forwarded writes, `checkedStamp`), by
    /// index, for the turn's flush: the storage entry it appends without decoding the bytes
    /// again. Emptied by every flush, so it holds at most one turn's proposals.
    private(set) var decoded: [UInt64: EmberStorage.LogEntry] = [:]

    init(hard: EmberRaft.HardState) { self.hard = hard }

    /// Later persists replace earlier ones from their first index on (Action.swift).
    mutating func buffer(_ new: [EmberRaft.LogEntry]) {
        guard let first = new.first else { return }
        entries.removeAll { $0.index >= first.index }
        entries += new
    }

    mutating func rememberDecoded(_ entry: EmberStorage.LogEntry, index: UInt64, term: UInt64) {
        var entry = entry
        entry.index = index
        entry.term = term
        decoded[index] = entry
    }

    /// The storage entry for `e`: the one decoded at its check when it is that entry (same
    /// index and term), else decoded from its bytes.
    func storageEntry(_ e: EmberRaft.LogEntry) throws -> EmberStorage.LogEntry {
        if e.kind == .normal, let entry = decoded[e.index], entry.term == e.term { return entry }
        return try RaftPersistence.storageEntry(e)
    }

    mutating func forgetDecoded() {
        if !decoded.isEmpty { decoded.removeAll(keepingCapacity: true) }
    }

    /// Whether the buffered persists need a write (new entries, or a new term or vote).
    var mustPersist: Bool {
        !entries.isEmpty || pendingHard.map { $0.term != hard.term || $0.votedFor != hard.votedFor } == true
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
/// written off the loop (awaited on stop: it reads the store).
struct SnapshotBook {
    var outgoing: OutgoingSnapshot?
    var preparing = false
    var task: Task<Void, Never>?
}
