import CLMDB
import EmberCore
import EmberRules
import Foundation
import Synchronization

/// A validated write waiting for the writer: its log entry encoded with a zero header (index,
/// term and timestamp are filled in when the writer assigns them; nil when the store keeps no
/// log, `EmberStore.keepsLog`), the entry's size and, for writes without server values, the
/// nodes `Applier` writes (one per part, in the operation's order).
struct PreparedWrite: Sendable {
    var encoded: [UInt8]?
    var size: Int
    var nodes: [Node]?
}

/// State shared by the store facade and the writer thread (so the writer never needs the facade,
/// which may be deinitialising while the writer drains). `@unchecked Sendable`: the LMDB handles
/// are immutable and usable from any thread; everything mutable is in a `Mutex` or `Atomic`.
final class StoreCore: @unchecked Sendable {
    /// The open environment; an online defrag replaces it (`EmberStore.defrag`). Readers hold
    /// the handle they began on until their transaction ends (`withRead`).
    let environment: Mutex<EnvHandle>
    /// The current environment, for the writer thread (the only one that replaces it).
    var env: OpaquePointer { environment.withLock { $0.env } }
    /// Set while a defrag runs (one at a time), and what the last one did.
    let defragRunning = Atomic<Bool>(false)
    let lastDefrag = Mutex<DefragReport?>(nil)
    let tables: Tables
    let options: StoreOptions
    /// Orders reads after results released before their commit (`performReleasing`).
    let visibility = Visibility()
    /// Change records released before their commit, for the delivery lanes (`TriggerReleases`).
    let triggerReleases = TriggerReleases()
    /// Shared change records decoded for the delivery lanes, and those the writer released
    /// before their commit (`TriggerRecordCache`).
    let triggerRecords = TriggerRecordCache()
    /// Tests only: runs on the writer thread just before a released transaction commits, so a
    /// test can hold that moment and look at what readers and callers see meanwhile.
    let beforeReleasedCommit = Mutex<(@Sendable () -> Void)?>(nil)
    /// Tests only: runs on the syncer thread as an interval sync begins (`LazySync`), so a test
    /// can hold it and see the writer go on meanwhile.
    let beforeLazySync = Mutex<(@Sendable () -> Void)?>(nil)
    /// Where a learner's interval syncs run (`LazySync`): one at a time, off the writer thread.
    let lazySyncer = DispatchQueue(label: "ember-lazy-sync")
    /// Tests only: runs on the defrag's copy thread when the copy is made, before any catch-up,
    /// so a test can write while the copy is behind.
    let afterDefragCopy = Mutex<(@Sendable () -> Void)?>(nil)
    /// Tests only: runs on the writer thread right after a releasing job handed its results out,
    /// so a test can see, in the writer's own order, whether that came before or after a commit.
    let afterReleasedHandOut = Mutex<(@Sendable () -> Void)?>(nil)
    /// Tests only: as `afterReleasedHandOut`, for an apply queued without waiting
    /// (`startApplyCommitted`) alone.
    let afterQueuedApplyHandOut = Mutex<(@Sendable () -> Void)?>(nil)

    struct Queue {
        var pending: [Job] = []
        var closed = false
        /// The writer found the queue empty and waits (or is about to) on `wake`: the next
        /// submitter signals it. While it works, submitters skip the semaphore.
        var writerIdle = true

        /// Called under the lock after queueing work: whether to signal `wake`.
        mutating func takeWake() -> Bool {
            defer { writerIdle = false }
            return writerIdle
        }
    }
    /// A queued write. A class: jobs move through arrays several times on the way to the
    /// writer, and a reference moves with one retain instead of copying five fields.
    final class Submission: Sendable {
        let namespace: String
        let operation: WriteOperation
        let auth: WriteAuth
        let writer: WriterStamp?
        let prepared: PreparedWrite
        let completion: Completion

        init(namespace: String, operation: WriteOperation, auth: WriteAuth, writer: WriterStamp?, prepared: PreparedWrite,
             completion: Completion) {
            self.namespace = namespace
            self.operation = operation
            self.auth = auth
            self.writer = writer
            self.prepared = prepared
            self.completion = completion
        }
    }
    enum Job {
        case submit(Submission)
        case exclusive(@Sendable (Writer) -> Void)
        case stop
    }
    /// How a submitted write learns its result: an awaiting task, or a sink that gets the
    /// results of a whole commit at once (pipelined writes, `EmberStore.enqueue`).
    enum Completion: Sendable {
        case resume(CheckedContinuation<WriteResult, any Error>)
        case sink(any CommitSink, UInt64)

        /// Outside a commit (queue stopped, batch refused): one write at a time.
        func fail(_ error: any Error) {
            switch self {
            case .resume(let c): c.resume(throwing: error)
            case .sink(let s, let tag): s.committed([(tag, .failure(error))])
            }
        }
    }
    struct Published: Sendable {
        var applied: UInt64 = 0
        var lastIndex: UInt64 = 0
        var lastTerm: UInt64 = 0
        var firstIndex: UInt64 = 1
    }
    let queue = Mutex(Queue())
    let wake = DispatchSemaphore(value: 0)
    let stopped = DispatchSemaphore(value: 0)
    let published = Mutex(Published())
    let metricsState = Mutex(StorageMetrics())
    /// Where the writer thread's write counters are (`EmberStore.writerThreadIO`), set when it starts.
    let writerIOPath = Mutex<String?>(nil)
    let subscribers = Mutex([UInt64: AsyncStream<WriteResult>.Continuation]())
    /// Synchronous commit listeners, run on the writer thread before any submitter resumes.
    let commitHandlers = Mutex([@Sendable ([WriteResult]) -> Void]())
    let isClosed = Atomic<Bool>(false)
    let indexEntriesScanned = Atomic<UInt64>(0)
    /// Streamed reads open now (`TreeStream`).
    let streams = StreamRegistry()
    /// Committed stored rules per namespace (the writer's copy, published after each commit).
    let storedRules = Mutex([String: StoredRules]())
    /// Rules for namespaces without stored rules (the node's `--rules` file); nil = open.
    let defaultRules = Mutex<RulesEngine?>(nil)

    /// NOSPACE and CORRUPT (`StoreAlarms`), and the room measure that raises NOSPACE.
    let alarms: StoreAlarms
    let space: SpaceGuard

    /// `EmberStore.commitsLazily`.
    let lazySyncEnabled: Bool
    /// The writer holds commits made without a data sync, or their marker (`LazySync`): the
    /// interval's sync has something to do (`EmberStore.owesLazySync`). Set on the writer thread.
    let lazySyncOwed = Atomic<Bool>(false)

    init(env: EnvHandle, tables: Tables, options: StoreOptions, directory: String, lazySyncEnabled: Bool = false) {
        self.environment = Mutex(env)
        self.lazySyncEnabled = lazySyncEnabled
        self.tables = tables
        self.options = options
        let alarms = StoreAlarms(directory: directory)
        self.alarms = alarms
        // The guard measures through this core; the box breaks the cycle.
        let box = WeakCore()
        space = SpaceGuard(mapSize: options.mapSize, alarms: alarms) {
            guard let core = box.core else { throw StorageError.closed }
            return try EmberStore.measureRoom(core, directory: directory)
        }
        box.core = self
    }

    /// Queues `job` for the writer thread and wakes it; false (nothing queued) once closed.
    func enqueueExclusive(_ job: @escaping @Sendable (Writer) -> Void) -> Bool {
        let queued = queue.withLock { q in
            if q.closed { return false }
            q.pending.append(.exclusive(job))
            return true
        }
        if queued { wake.signal() }
        return queued
    }

    private final class WeakCore: @unchecked Sendable {
        weak var core: StoreCore?
    }

    func withRead<T>(_ body: (Txn) throws -> T) throws -> T {
        guard !isClosed.load(ordering: .acquiring) else { throw StorageError.closed }
        // Held to the end of the transaction: a defrag switching environments meanwhile closes
        // this one only when its last reader is done (`EnvHandle.deinit`).
        let h = environment.withLock { $0 }
        return try withExtendedLifetime(h) {
            var t: OpaquePointer?
            try check(mdb_txn_begin(h.env, nil, flag(MDB_RDONLY), &t))
            defer { mdb_txn_abort(t) }
            return try body(Txn(ptr: t!))
        }
    }

    func publish(_ results: [WriteResult]) {
        if results.isEmpty { return }
        for h in commitHandlers.withLock({ $0 }) { h(results) }
        let subs = subscribers.withLock { $0 }
        for (id, c) in subs {
            for r in results {
                if case .dropped = c.yield(r) {
                    c.finish()
                    _ = subscribers.withLock { $0.removeValue(forKey: id) }
                    break
                }
            }
        }
    }
}
