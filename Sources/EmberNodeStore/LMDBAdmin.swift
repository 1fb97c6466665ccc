import EmberCore
import EmberStorage

/// The storage admin ports of an LMDB store (a single node's or a cluster member's own file).
public struct LMDBAdmin: StorageStatsPort, DefragPort, BackupPort, AlarmPort {
    let store: EmberStore

    public init(store: EmberStore) { self.store = store }

    public var counters: StoreCounters {
        let m = store.metrics
        return StoreCounters(pendingWrites: m.pendingWrites, queueRejections: m.queueRejections, commits: m.commits,
                             maxBatchEntries: m.maxBatchEntries, transactionNanos: m.transactionNanos, commitNanos: m.commitNanos)
    }

    public func footprint() throws -> DiskFootprint {
        let f = try store.footprint()
        return DiskFootprint(fileBytes: f.fileBytes, freePages: f.freePages, freeBytes: f.freeBytes, json: f.json())
    }

    public var defragRunning: Bool { store.defragRunning }
    public var lastDefrag: DefragResult? { store.lastDefrag.map(Self.result) }

    public func defrag() async throws -> DefragResult {
        do { return Self.result(try await store.defrag()) } catch let e as DefragError {
            switch e {
            case .insufficientSpace(let needed, let available):
                throw DefragRefusal.insufficientSpace(needed: needed, available: available, message: e.description)
            case .busy: throw DefragRefusal.busy(e.description)
            case .gaveUp: throw DefragRefusal.gaveUp(e.description)
            }
        }
    }

    public func writeBackup(to path: String) throws -> BackupResult {
        BackupResult(appliedIndex: try store.writeBackup(to: path).appliedIndex)
    }

    static func result(_ r: DefragReport) -> DefragResult {
        DefragResult(bytesBefore: r.bytesBefore, bytesAfter: r.bytesAfter, pauseNanos: r.pauseNanos,
                     finishedAtMs: r.finishedAtMs, json: r.json())
    }
}

extension LMDBAdmin {
    public var raised: [NodeAlarm] { store.alarms.all.map(Self.alarm) }
    public var hasRoomForWrites: Bool { store.space.hasRoom }
    public var room: WriteRoom? {
        store.space.room.map { WriteRoom(mapBytes: $0.mapBytes, filesystemBytes: $0.filesystemBytes, reserveBytes: store.space.reserve) }
    }

    public func observe(_ observer: @escaping @Sendable (NodeAlarm.Kind, NodeAlarm?) -> Void) {
        store.alarms.observe { kind, alarm in observer(Self.kind(kind), alarm.map(Self.alarm)) }
    }

    static func kind(_ k: StoreAlarms.Kind) -> NodeAlarm.Kind {
        switch k {
        case .noSpace: return .noSpace
        case .corrupt: return .corrupt
        }
    }

    static func alarm(_ a: StoreAlarms.Alarm) -> NodeAlarm { NodeAlarm(kind: kind(a.kind), message: a.message, since: a.since) }
}
