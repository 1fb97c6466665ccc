import CLMDB
import Foundation
import Synchronization

/// Watches the room left for writes: in the LMDB map (`StoreOptions.mapSize`, emberd's
/// `--max-db-size`) and on the data directory's filesystem. Below a reserve it raises the
/// NOSPACE alarm and `hasRoom` turns false: client writes are refused (507) before they reach
/// the log, so the writes already admitted, a new leader's no-op, membership and onDisconnect
/// bookkeeping still find room, and a Raft member never fails an append half way (which stops
/// the node). When a commit fails for lack of room (MDB_MAP_FULL, ENOSPC, EDQUOT) the alarm is
/// raised at once and stays until a measurement finds the reserve above what was left then.
///
/// Measured lazily (at most every `measureInterval`, by whoever asks: a write's admission, the
/// status, a scrape), so writes resume by themselves once space is freed.
public final class SpaceGuard: Sendable {
    /// Room kept free below which client writes are refused: 8 MiB, or an eighth of a smaller
    /// map or filesystem (a small filesystem would otherwise be refused writes from the start).
    let maxReserve: Int
    /// Measurements are reused this long (a statvfs, an mdb_env_info and a walk of the free list)…
    static let measureInterval: Duration = .milliseconds(250)
    /// …while the room is at least this many reserves; closer to the reserve every check
    /// measures, so writes admitted between two measurements cannot use up the reserve.
    static let closeToReserve = 4

    public struct Room: Sendable, Equatable {
        /// Bytes the map can still grow by plus the bytes of its free pages.
        public var mapBytes: Int
        /// Bytes available on the data directory's filesystem, and its size.
        public var filesystemBytes: Int
        public var filesystemSize: Int
        public var bytes: Int { min(mapBytes, filesystemBytes) }
    }

    private struct State {
        var measured: (at: ContinuousClock.Instant, room: Room)?
        /// After a failed commit: room that must be exceeded (plus the reserve) to clear the alarm.
        var failedAt: Int?
    }

    private let state = Mutex(State())
    private let alarms: StoreAlarms
    private let measure: @Sendable () throws -> Room

    init(mapSize: Int, alarms: StoreAlarms, measure: @escaping @Sendable () throws -> Room) {
        maxReserve = min(8 << 20, mapSize / 8)
        self.alarms = alarms
        self.measure = measure
    }

    /// Whether client writes may go on; measures again when the last measurement is stale.
    public var hasRoom: Bool {
        let now = ContinuousClock.now
        let cached = state.withLock { s -> Room? in
            guard let m = s.measured, now - m.at < Self.measureInterval,
                  m.room.bytes >= Self.closeToReserve * reserve(m.room) else { return nil }
            return m.room
        }
        let room = cached ?? refresh(now: now)
        return room.map(judge) ?? (alarms.active(.noSpace) == nil)
    }

    /// Room is close to the reserve (within `closeToReserve` reserves) or the alarm is up. A
    /// Raft member then commits before it answers (`RaftHost.durably`), so a commit failing for
    /// lack of room can be retried instead of stopping the node.
    public var isShort: Bool {
        if !hasRoom { return true }
        guard let room = state.withLock({ $0.measured?.room }) else { return alarms.active(.noSpace) != nil }
        return room.bytes < Self.closeToReserve * reserve(room)
    }

    /// The last measurement (measuring now if there is none).
    public var room: Room? { state.withLock { $0.measured?.room } ?? refresh(now: .now) }

    /// The reserve for the last measurement's filesystem.
    public var reserve: Int { room.map { reserve($0) } ?? maxReserve }

    func reserve(_ room: Room) -> Int { min(maxReserve, room.filesystemSize / 8) }

    /// A commit failed for lack of room: raise the alarm now, and keep it until the room grows.
    func commitFailed(_ error: StorageError) {
        let left = (try? measure())?.bytes ?? 0
        state.withLock { $0.failedAt = left; $0.measured = nil }
        // Which limit it met, as `judge` says it: the operator's remedy differs (a bigger map
        // or a bigger disk), and a commit can fail before any measurement came near the reserve.
        var which = "the data directory's filesystem is full"
        if case .lmdb(let code, _) = error, code == MDB_MAP_FULL { which = "the data file's map (--max-db-size) is full" }
        alarms.raise(.noSpace, "a commit failed for lack of room: \(which) (\(error)); \(left) bytes left, writes are refused until space is freed")
    }

    private func refresh(now: ContinuousClock.Instant) -> Room? {
        guard let room = try? measure() else { return nil }
        state.withLock { $0.measured = (now, room) }
        _ = judge(room)
        return room
    }

    /// Raises or clears the alarm for `room`; true when writes may go on.
    private func judge(_ room: Room) -> Bool {
        let failedAt = state.withLock { $0.failedAt }
        let kept = reserve(room)
        let needed = kept + (failedAt ?? 0)
        if room.bytes >= needed {
            if failedAt != nil { state.withLock { $0.failedAt = nil } }
            alarms.clear(.noSpace)
            return true
        }
        let which = room.mapBytes < room.filesystemBytes
            ? "the data file's map (--max-db-size) has \(room.mapBytes) bytes left"
            : "the data directory's filesystem has \(room.filesystemBytes) bytes free"
        alarms.raise(.noSpace, "\(which), below the \(kept)-byte reserve; writes are refused until space is freed")
        return false
    }

    /// Whether `error` means the disk or the map is full.
    public static func isNoSpace(_ error: any Error) -> Bool {
        guard case .lmdb(let code, _)? = error as? StorageError else { return false }
        return code == MDB_MAP_FULL || code == ENOSPC || code == EDQUOT
    }
}

extension EmberStore {
    /// The node's alarms (NOSPACE, CORRUPT).
    public var alarms: StoreAlarms { core.alarms }
    /// Room left for writes (the NOSPACE alarm's measure).
    public var space: SpaceGuard { core.space }

    /// Map room (growth left plus free pages) and the filesystem's available bytes.
    static func measureRoom(_ core: StoreCore, directory: String) throws -> SpaceGuard.Room {
        let map = try core.withRead { t -> Int in
            var info = MDB_envinfo()
            try check(mdb_env_info(mdb_txn_env(t.ptr), &info))
            var s = MDB_stat()
            try check(mdb_env_stat(mdb_txn_env(t.ptr), &s))
            let page = Int(s.ms_psize)
            let growth = max(0, info.me_mapsize - (info.me_last_pgno + 1) * page)
            return growth + (try freePages(t)) * page
        }
        var fs = statvfs()
        guard statvfs(directory, &fs) == 0 else { throw StorageError.lmdb(code: errno, message: "statvfs \(directory)") }
        return .init(mapBytes: map, filesystemBytes: Int(fs.f_bavail) * Int(fs.f_frsize),
                     filesystemSize: Int(fs.f_blocks) * Int(fs.f_frsize))
    }
}
