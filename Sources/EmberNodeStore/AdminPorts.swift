import EmberCore

// The operations endpoints' ports (`NodePorts.admin`): the node's status, storage figures,
// defrag, backup; `ClusterControl` (ClusterControl.swift) is the cluster's.

/// `GET /.ember/status` and the member directory the WebSocket handshake reads.
public protocol StatusPort: Sendable {
    /// Role, term, indexes, state hash (hashes the state: not for every probe).
    func nodeStatus() async throws -> JSON
    /// The cluster's current members as this node knows them, with the client URLs operators
    /// gave when adding them (cheap: read on every WebSocket handshake); nil for a single node.
    var memberDirectory: MemberDirectory? { get }
}

/// The storage's counters and file figures, for `/metrics` and the status (cheap per scrape).
public protocol StorageStatsPort: Sendable {
    var counters: StoreCounters { get }
    /// Bytes per table and free pages (a few stat calls and a walk of the free list).
    func footprint() throws -> DiskFootprint
    var defragRunning: Bool { get }
    var lastDefrag: DefragResult? { get }
}

/// Rewrites the node's data file compactly while it runs. Throws `DefragRefusal` when it
/// cannot (no room, another one runs, it could not catch up).
public protocol DefragPort: Sendable {
    func defrag() async throws -> DefragResult
}

/// Writes a consistent snapshot of the whole state to a backup file (blocking: long).
public protocol BackupPort: Sendable {
    func writeBackup(to path: String) throws -> BackupResult
}

public struct StoreCounters: Sendable, Equatable {
    /// Writes queued for the storage writer, and writes refused because its queue was full.
    public var pendingWrites: Int
    public var queueRejections: UInt64
    /// Write transactions committed, and the largest group-commit batch so far.
    public var commits: UInt64
    public var maxBatchEntries: Int
    /// Writer time applying entries inside write transactions, and in commits (page write-out
    /// and fsync): whether throughput is bound by the CPU or the disk.
    public var transactionNanos: UInt64
    public var commitNanos: UInt64

    public init(pendingWrites: Int, queueRejections: UInt64, commits: UInt64, maxBatchEntries: Int,
                transactionNanos: UInt64, commitNanos: UInt64) {
        self.pendingWrites = pendingWrites
        self.queueRejections = queueRejections
        self.commits = commits
        self.maxBatchEntries = maxBatchEntries
        self.transactionNanos = transactionNanos
        self.commitNanos = commitNanos
    }
}

public struct DiskFootprint: Sendable {
    public var fileBytes: Int
    public var freePages: Int
    public var freeBytes: Int
    /// The whole breakdown as `/.ember/status` shows it (page size, tables, live bytes).
    public var json: JSON

    public init(fileBytes: Int, freePages: Int, freeBytes: Int, json: JSON) {
        self.fileBytes = fileBytes
        self.freePages = freePages
        self.freeBytes = freeBytes
        self.json = json
    }
}

public struct DefragResult: Sendable {
    public var bytesBefore: Int
    public var bytesAfter: Int
    /// How long writes were held.
    public var pauseNanos: UInt64
    /// When it finished (ms since the epoch).
    public var finishedAtMs: Int64
    /// The whole report as the defrag endpoint answers it.
    public var json: JSON

    public init(bytesBefore: Int, bytesAfter: Int, pauseNanos: UInt64, finishedAtMs: Int64, json: JSON) {
        self.bytesBefore = bytesBefore
        self.bytesAfter = bytesAfter
        self.pauseNanos = pauseNanos
        self.finishedAtMs = finishedAtMs
        self.json = json
    }
}

/// Why a defrag did not run; `description` is the operator's message.
public enum DefragRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// The filesystem lacks room for the copy (HTTP 507).
    case insufficientSpace(needed: Int, available: Int, message: String)
    /// Another defrag runs, or readers from before the last one still hold its file.
    case busy(String)
    /// The copy could not be caught up; nothing changed.
    case gaveUp(String)

    public var description: String {
        switch self {
        case .insufficientSpace(_, _, let m), .busy(let m), .gaveUp(let m): return m
        }
    }
}

public struct BackupResult: Sendable, Equatable {
    /// The log index the backup's state reflects.
    public var appliedIndex: UInt64

    public init(appliedIndex: UInt64) { self.appliedIndex = appliedIndex }
}

/// The node's alarms (etcd's): NOSPACE (less room for writes than a reserve: client writes are
/// refused with 507) and CORRUPT (this member's state hash disagrees with the majority's: it
/// serves no data). Backed by EmberStorage's `StoreAlarms` and `SpaceGuard`.
public protocol AlarmPort: Sendable {
    /// Every raised alarm, NOSPACE first.
    var raised: [NodeAlarm] { get }
    /// Whether client writes may go on; measures the room again when the last measure is stale
    /// (so NOSPACE clears, and writes resume, once space is freed).
    var hasRoomForWrites: Bool { get }
    /// The last measure of the room (measured now if there is none).
    var room: WriteRoom? { get }
    /// `observer(kind, alarm)` on every raise (`alarm`) and clear (nil).
    func observe(_ observer: @escaping @Sendable (NodeAlarm.Kind, NodeAlarm?) -> Void)
}

public struct NodeAlarm: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case noSpace = "NOSPACE"
        case corrupt = "CORRUPT"
    }

    public var kind: Kind
    public var message: String
    /// Wall-clock milliseconds when it was raised.
    public var since: Int64

    public init(kind: Kind, message: String, since: Int64) {
        self.kind = kind
        self.message = message
        self.since = since
    }
}

/// Room left for writes: in the data file's map (`--max-db-size`: growth plus free pages) and on
/// its filesystem, and the reserve below which writes are refused.
public struct WriteRoom: Sendable, Equatable {
    public var mapBytes: Int
    public var filesystemBytes: Int
    public var reserveBytes: Int

    public init(mapBytes: Int, filesystemBytes: Int, reserveBytes: Int) {
        self.mapBytes = mapBytes
        self.filesystemBytes = filesystemBytes
        self.reserveBytes = reserveBytes
    }
}
