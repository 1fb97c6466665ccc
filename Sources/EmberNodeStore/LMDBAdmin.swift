import EmberCore
import EmberStorage

/// The storage admin ports of an LMDB store (a single node's or a cluster member's own file).
public struct LMDBAdmin: StorageStatsPort, DefragPort, BackupPort {
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
