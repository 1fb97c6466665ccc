import EmberNodeStore
import EmberRaft
import EmberStorage
import Foundation
import Logging
import Synchronization

/// Hosts a `RaftNode` over the LMDB store: the single serial driver of the cluster runtime.
///
/// Everything that touches the Raft state machine runs in ONE task (`loop`), fed through a
/// bounded inbox: timer ticks, peer frames, client writes and linearizable reads. Each turn drains
/// the inbox, steps the node once per input, then performs the collected actions under the
/// persist-before-send contract (Action.swift): all of the turn's `persist*` actions are written
/// to LMDB first (one append transaction, one hard-state transaction), with the turn's committed
/// entries applied in the same transaction, then messages go out (`execute`). Awaiting the store
/// inside the loop is what serializes it; inputs arriving meanwhile are batched into the next
/// turn, which gives group commit under load for free.
///
/// `@unchecked Sendable`: the mutable fields below the inbox are touched only by `loop`.
final class RaftHost: @unchecked Sendable {
    let config: ClusterConfiguration
    let store: EmberStore
    let logger: Logger
    var transport: PeerTransport!

    // Shared with callers (locked).
    let inbox: Mutex<Inbox>
    let published: Mutex<RaftStatus>
    /// Client writes / linearizable reads accepted and not yet answered (admission control).
    let pendingRequests = Atomic<Int>(0)
    let pendingReads = Atomic<Int>(0)
    let stateReplacedHandlers = Mutex<[@Sendable () -> Void]>([])
    /// Pipelined writers with outcomes from this turn, handed over at its end.
    let sinkTurn = SinkTurn()
    /// When a Raft message last came from each peer: a leader's view of which members respond
    /// (onDisconnect's lease reads it through `probe`).
    let lastHeard = Mutex<[NodeID: ContinuousClock.Instant]>([:])
    private let wake: AsyncStream<Void>.Continuation
    private let wakeups: AsyncStream<Void>
    private var loopTask: Task<Void, Never>?
    private var tickTask: Task<Void, Never>?

    // Owned by the loop, in parts: Raft's state machine, the persists a turn buffers, client
    // requests (RequestBook), admin operations (AdminBook), the member directory and snapshot
    // transfers — each part a value of its own, handled in its own file.
    var node: RaftNode
    /// A follower's committed entries whose apply waits for the next turn, which has input
    /// waiting (`execute`); 0 when none.
    var deferredApply: UInt64 = 0
    var persist: PersistBuffer
    var requests: RequestBook
    /// Highest entry timestamp seen (stamped by us or persisted from a leader).
    var lastStamp: Int64 = 0
    /// Membership changes and leadership transfers in progress (RaftHost+Admin).
    var admin = AdminBook()
    /// Where every member is reached (RaftHost+Admin `syncMembership`).
    var members: DirectoryBook
    let publishedDirectory: Mutex<MemberDirectory>
    /// Snapshot transfers (RaftHost+Snapshots).
    var snapshots = SnapshotBook()
    let staging: SnapshotStaging

    /// Inputs taken per loop turn (bounds a turn's latency and memory).
    static let maxInputsPerTurn = 1_024

    enum Input: Sendable {
        case tick
        case frame(PeerFrame)
        case write(PendingWrite)
        /// A pipelined writer's writes, in order (one inbox slot for a connection's burst).
        case writes([PendingWrite])
        case read(PendingRead)
        /// An operator's membership change or leadership transfer (REST admin endpoints).
        case admin(PendingAdmin)
        /// Hand leadership to the most up-to-date peer (graceful shutdown).
        case handOver
        /// The snapshot file for followers was written (nil: writing it failed).
        case snapshotPrepared(SnapshotFileInfo?)
        case stop
    }

    struct Inbox {
        var items: [Input] = []
        var stopped = false
    }

    init(config: ClusterConfiguration, store: EmberStore, logger: Logger) async throws {
        self.config = config
        self.store = store
        self.logger = logger
        // A joining node starts with no voters and learns the membership from the leader.
        let (state, applied, lastTimestamp) = try await RaftPersistence.load(store, voters: config.join ? [] : config.voters)
        lastStamp = lastTimestamp
        let raftConfig = RaftConfig(electionTick: config.electionTicks, heartbeatTick: config.heartbeatTicks,
                                    randomSeed: UInt64.random(in: 0...UInt64.max))
        node = RaftNode(id: config.nodeID, config: raftConfig, state: state, appliedIndex: applied)
        persist = PersistBuffer(hard: state.hardState)
        published = Mutex(node.status)
        members = DirectoryBook(directory: MemberDirectory(peers: config.peers))
        publishedDirectory = Mutex(members.directory)
        inbox = Mutex(Inbox())
        staging = SnapshotStaging(path: Self.snapshotPath(store, "incoming"))
        Self.removeSnapshotFiles(store)  // leftovers of a previous run are never resumed
        requests = RequestBook(recentLimit: config.recentResults)
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        wakeups = stream
        wake = continuation
        logger.info("raft host loaded", metadata: [
            "node": "\(config.nodeID)", "term": "\(state.hardState.term)", "applied": "\(applied)",
            "logTail": "\(state.entries.count)", "voters": "\(node.membership)"])
    }

    func start(transport: PeerTransport) {
        self.transport = transport
        syncMembership()
        // On the peer transport's event loop (`EventLoopTaskExecutor`): inputs from peers and the
        // frames a turn sends stay on one thread.
        loopTask = Task(executorPreference: EventLoopTaskExecutor(transport.group.next())) { await self.loop() }
        let period = UInt64(config.tickMillis) * 1_000_000
        tickTask = Task {
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: period)
                self.enqueue(.tick)
            }
        }
    }

    /// Longest a stopping leader waits for a peer to take over (a rolling restart then costs
    /// no election timeout).
    static let handOverMillis = 1_500

    func stop() async {
        if status.role == .leader && status.membership.voters.count > 1 {
            enqueue(.handOver, force: true)
            let deadline = ContinuousClock.now + .milliseconds(Self.handOverMillis)
            while status.role == .leader && ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        tickTask?.cancel()
        enqueue(.stop, force: true)
        await loopTask?.value
        await snapshots.task?.value  // the loop has ended: nothing starts another
        closeSnapshotFiles()
    }

    /// Adds an input; false when the inbox is full (the caller sheds the request).
    @discardableResult
    func enqueue(_ input: Input, force: Bool = false) -> Bool {
        let ok = inbox.withLock { box -> Bool in
            if box.stopped { return false }
            if !force && box.items.count >= config.maxQueuedEvents { return false }
            box.items.append(input)
            return true
        }
        if ok { wake.yield() }
        return ok
    }

    var status: RaftStatus { published.withLock { $0 } }

    // MARK: - Loop

    private func loop() async {
        for await _ in wakeups {
            while true {
                let batch = inbox.withLock { box -> [Input] in
                    // Usually all of it: taken whole (no copy, no shifting what stays).
                    if box.items.count <= Self.maxInputsPerTurn {
                        // The inbox keeps an empty buffer of this turn's size, the next one's likely size.
                        var taken: [Input] = []
                        taken.reserveCapacity(box.items.count)
                        swap(&taken, &box.items)
                        return taken
                    }
                    defer { box.items.removeFirst(Self.maxInputsPerTurn) }
                    return Array(box.items.prefix(Self.maxInputsPerTurn))
                }
                if batch.isEmpty { break }
                var actions: [Action] = []
                var stopping = false
                for input in batch {
                    if case .stop = input { stopping = true; continue }
                    actions += handle(input)
                }
                // Queued writes are proposed or forwarded once per turn: a burst becomes one batch.
                actions += routeQueued(now: .now)
                await execute(actions)
                // Our own entries count for Raft once durable (HOST CONTRACT 2b); a commit this
                // enables is performed at once (its apply, the new commit index to followers).
                while let report = persist.report {
                    persist.report = nil
                    await execute(step(.persisted(through: report.index, term: report.term)))
                }
                syncMembership()
                adminTurn()
                compactIfDue()
                expireSnapshotFile(now: .now)
                sinkTurn.flushAll()
                let status = node.status
                published.withLock { $0 = status }
                if stopping {
                    // Requests that raced in after `.stop` must still be answered.
                    let late = inbox.withLock { box -> [Input] in
                        box.stopped = true
                        defer { box.items.removeAll() }
                        return box.items
                    }
                    for input in late {
                        if case .write(let w) = input { w.reply.resume(throwing: ClusterError.shuttingDown) }
                        if case .writes(let ws) = input { for w in ws { w.reply.resume(throwing: ClusterError.shuttingDown) } }
                        if case .read(let r) = input { r.reply.resume(throwing: ClusterError.shuttingDown) }
                        if case .admin(let a) = input { answer(a, .error(503, ClusterError.shuttingDown.description)) }
                    }
                    failAllAdmin()
                    requests.failAll(ClusterError.shuttingDown)
                    sinkTurn.flushAll()
                    wake.finish()
                    return
                }
            }
        }
    }

    /// Feeds the node; returns the actions to perform (bookkeeping actions are handled here).
    func step(_ event: Event) -> [Action] {
        node.step(event)
    }

    // MARK: - Executing actions

    /// Performs one turn's actions. A turn without snapshots is done in two phases: every
    /// `persist*` of the turn is made durable at once, with every committed entry applied in the
    /// same append transaction (plus one transaction for term and vote when they changed), then
    /// every message is sent and the reads made ready are served. A leader's AppendEntries and
    /// heartbeats go out before that write (thesis 10.2.1, Action.swift contract 2's exception):
    /// followers write the entries while we do, and Raft counts our copy only once `.persisted`.
    /// When nothing needs persisting, messages go first and the apply after. That is the contract's order
    /// (Action.swift) with persists moved earlier, which is always allowed: making state durable
    /// sooner never breaks persist-before-send. Performing the actions strictly in order instead
    /// cost one fsync per client write (each proposal's persist followed by its own send), so a
    /// turn of N proposals was N fsyncs long: no group commit at all.
    func execute(_ actions: [Action]) async {
        if actions.contains(where: \.touchesSnapshot) {
            await executeInOrder(actions)
            return
        }
        // An apply the last turn left to this one (at most one turn: `carried` applies now).
        var applyThrough = deferredApply
        let carried = deferredApply > 0
        deferredApply = 0
        for action in actions {
            switch action {
            case .persistHardState(let hs): persist.pendingHard = hs
            case .persistEntries(let entries): persist.buffer(entries)
            case .apply(let entries): applyThrough = max(applyThrough, entries.last?.index ?? 0)
            default: break
            }
        }
        if persist.mustPersist {
            var afterWrite: [Message] = []
            for case .send(let message) in actions {
                if message.payload.isReplication {
                    transport.send(.raft(message), to: message.to)
                } else {
                    afterWrite.append(message)  // votes and acks speak for what we wrote
                }
            }
            // The other sends wait for an fsync anyway: applying in the append's transaction
            // delays them only by the apply's CPU time and saves a whole fsync per turn. The
            // apply's writes are answered before that fsync (`flush(applyingThrough:)`).
            await flush(applyingThrough: applyThrough)
            for message in afterWrite { transport.send(.raft(message), to: message.to) }
        } else {
            // Nothing to make durable (e.g. a leader's turn of acks): the new commit index goes
            // out before the apply's fsync, so followers apply (and answer) in parallel with us.
            await flush()
            for case .send(let message) in actions { transport.send(.raft(message), to: message.to) }
            // With nothing else waiting (an idle node: this apply is most of the way from the
            // commit to listeners), the apply's commit skips the meta page's sync; under load it
            // syncs as every commit does (EmberStore.applyCommitted).
            if applyThrough > 0 {
                let idle = inbox.withLock { $0.items.isEmpty }
                let readsReady = actions.contains { if case .readReady = $0 { true } else { false } }
                if !idle && !carried && !readsReady && node.role == .follower {
                    // A follower that learned of a commit (the leader's durable notice) while more
                    // input waits — usually the next entries to append — applies in that turn's
                    // append transaction: an apply-only commit now would hold that append (and
                    // its ack) up by one whole sync, and a follower answering two syncs late on a
                    // slow disk costs the leader its lease (check quorum). Not with reads made
                    // ready this turn: they must see the apply first.
                    deferredApply = applyThrough
                } else {
                    await applyCommitted(through: applyThrough, metaSync: !idle)
                }
            }
        }
        for action in actions {
            switch action {
            case .sendSnapshotChunk(let request): sendSnapshotChunk(request)
            case .prepareSnapshot: prepareSnapshot()
            case .readReady(let id, _): requests.readReady(id)
            case .readFailed(let id): requests.readFailed(id)
            default: break
            }
        }
    }

    /// The strict in-order path, for turns that persist or restore a snapshot (rare: a follower
    /// far behind, or a compaction).
    func executeInOrder(_ actions: [Action]) async {
        // A deferred apply (`execute`) first: entries committed before this turn's snapshot work.
        if deferredApply > 0 {
            let through = deferredApply
            deferredApply = 0
            await applyCommitted(through: through)
        }
        for action in actions {
            switch action {
            case .persistHardState(let hs):
                persist.pendingHard = hs
            case .persistEntries(let entries):
                persist.buffer(entries)
            case .persistSnapshot(let snapshot, let discardLog):
                await flush()
                // Compaction needs nothing here: the store is durable at its applied index and
                // trims its own log (StoreOptions.logRetention).
                if discardLog { await installStaged(snapshot) }
            case .stageSnapshotChunk(let chunk):
                stage(chunk)
            case .restoreSnapshot(let snapshot):
                await flush()
                logger.info("state restored from snapshot", metadata: ["index": "\(snapshot.index)"])
            case .send(let message):
                await flush()
                transport.send(.raft(message), to: message.to)
            case .sendSnapshotChunk(let request):
                await flush()
                sendSnapshotChunk(request)
            case .prepareSnapshot:
                prepareSnapshot()
            case .apply(let entries):
                await flush()
                guard let last = entries.last else { continue }
                await applyCommitted(through: last.index)
            case .readReady(let id, _):
                await flush()
                requests.readReady(id)
            case .readFailed(let id):
                requests.readFailed(id)
            case .proposalAccepted, .proposalRejected:
                break  // consumed where the proposal was stepped
            }
        }
        await flush()
    }
}

/// Why a cluster request failed. All are retryable (REST answers 503).
enum ClusterError: Error, CustomStringConvertible {
    case noLeader(seconds: Double)
    case overloaded
    case leadershipLost
    case outcomeUnknown(String)
    case shuttingDown
    case refused(String)

    var description: String {
        switch self {
        case .noLeader(let s): return "No cluster leader was reachable within \(s) s; retry later"
        case .overloaded: return "The node has too many pending requests; retry later"
        case .leadershipLost: return "Leadership changed before the write committed; it was not applied, retry"
        case .outcomeUnknown(let why): return "The write's outcome is unknown (\(why)); read before retrying"
        case .shuttingDown: return "The node is shutting down"
        case .refused(let why): return why
        }
    }
}

extension Message.Payload {
    /// A leader replicating: may be sent before the turn's persists are durable (Action.swift).
    var isReplication: Bool {
        switch self {
        case .appendEntries, .heartbeat: return true
        default: return false
        }
    }
}

extension Action {
    /// Snapshot actions must run strictly in order with the rest (RaftHost.executeInOrder).
    var touchesSnapshot: Bool {
        switch self {
        case .persistSnapshot, .restoreSnapshot, .stageSnapshotChunk: return true
        default: return false
        }
    }
}
