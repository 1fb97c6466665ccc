import EmberNodeStore
import EmberRaft
import EmberRaftHost
import EmberStorage
import Foundation
import Logging
import NIOCore
import Synchronization

/// Runs a Raft host core (`HostCore`, EmberRaftHost) over the LMDB store and the peer transport:
/// the single serial driver of the cluster runtime.
///
/// Everything that touches the Raft state machine runs in ONE task (`loop`), fed through a
/// bounded inbox: timer ticks, peer frames, client writes and linearizable reads. Each turn drains
/// the inbox and feeds every input to the core, then performs the effects the core planned for
/// the turn, in order (`perform`): the core has already ordered them under the persist-before-
/// send contract (one write per turn, with the turn's committed entries applied in it, then the
/// messages that speak for it). Awaiting the store inside the loop is what serializes it; inputs
/// arriving meanwhile are batched into the next turn, which gives group commit under load.
/// Applies are the exception: one with nothing to persist, or too big to ride in the turn's
/// write, is queued on the store's writer and its results come back as an input
/// (RaftHost+Apply), so heartbeats and votes never wait for an apply; and while one is queued
/// there, so are the turn's persists (RaftHost+QueuedPersist): they would wait behind it.
/// The core decides; this class holds what the core must not: the store, the transport, tasks,
/// clocks, and the continuations of waiting requests.
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
    /// Their log entries' bytes (`ClusterConfiguration.maxPendingWriteBytes`).
    let pendingRequestBytes = Atomic<Int>(0)
    let pendingReads = Atomic<Int>(0)
    let stateReplacedHandlers = Mutex<[@Sendable () -> Void]>([])
    /// Pipelined writers with outcomes from this turn, handed over at its end.
    let sinkTurn = SinkTurn()
    /// When a Raft message last came from each peer: a leader's view of which members respond
    /// (onDisconnect's lease reads it through `probe`).
    let lastHeard = Mutex<[NodeID: ContinuousClock.Instant]>([:])
    /// Heartbeat answers the transport's handler gives while a follower's loop is held in a write.
    let stalledHeartbeats = StalledLoopHeartbeats()
    private let wake: AsyncStream<Void>.Continuation
    private let wakeups: AsyncStream<Void>
    private var loopTask: Task<Void, Never>?
    private var ticker: RepeatedTask?
    /// The loop's event loop (the ticker's and the learner batch timer's).
    var loopEventLoop: (any EventLoop)?
    /// Armed while the leader holds entries from a learner (`armLearnerFlush`; loop only).
    var learnerFlush: Scheduled<Void>?
    /// The process's niceness while a learner (`--learner-nice`; loop only).
    var learnerPriority: LearnerPriority

    // Owned by the loop, in parts: Raft's state machine, the persists a turn buffers, client
    // requests (RequestBook), admin operations (AdminBook), the member directory and snapshot
    // transfers — each part a value of its own, handled in its own file.
    var core: HostCore
    /// Raft's state (read-only here: every change goes through `core`).
    var node: RaftNode { core.node }
    /// The storage entries of the turn's forwarded writes, decoded at their check.
    var decoded = DecodedEntries()
    /// The last entry a write made durable, reported to Raft after the turn (`Event.persisted`).
    var durableReport: (index: UInt64, term: UInt64)?
    var requests: RequestBook
    /// Highest entry timestamp seen (stamped by us or persisted from a leader).
    var lastStamp: Int64 = 0
    /// When the last interval sync of a learner's unsynced commits was queued (`syncLazyCommitsIfDue`).
    var lastLazySync = ContinuousClock.now
    /// The commit index of the last `LatencyMarks` commit mark (debugging aid, off by default).
    var markedCommit: UInt64 = 0
    /// Set by `stop()`: a storage call waiting for room gives up (`durably`).
    let stopRequested = Atomic<Bool>(false)
    /// A write was given up (stopping while out of room): nothing after it in the turn may run
    /// (a send after an unpersisted write would acknowledge what is not durable).
    var abandoned = false
    /// Membership changes and leadership transfers in progress (RaftHost+Admin).
    var admin = AdminBook()
    /// Where every member is reached (RaftHost+Admin `syncMembership`).
    var members: DirectoryBook
    let publishedDirectory: Mutex<MemberDirectory>
    /// Snapshot transfers (RaftHost+Snapshots).
    var snapshots = SnapshotBook()
    /// The highest triggers `advance` entry held back from a member connected below peer level 4
    /// (RaftHost+AdvanceGate): Raft's log is compacted past it so that member gets a snapshot.
    var advanceHeld: UInt64 = 0
    /// The last append's entries as encoded for a member, reused for the next member sent
    /// the same entries (`sendRaft`).
    var appendEncodings = AppendEncodings()
    let staging: SnapshotStaging
    /// Applies queued off the loop (RaftHost+Apply), and their outcomes as the writer hands them
    /// back (taken by the loop).
    var applies = ApplyBook()
    let outcomes = Mutex<[ApplyOutcome]>([])
    /// Applies queued on the writer of more than `applyInLoopMaxBytes` whose transaction has not
    /// committed yet (decremented on the writer thread): a persist queued meanwhile waits behind
    /// one for long, so the loop does not wait for it (RaftHost+QueuedPersist).
    let longApplies = Atomic<Int>(0)
    /// A persist queued on the writer while an apply runs there, and what waits for it
    /// (RaftHost+QueuedPersist); its outcome as the writer hands it back.
    var persists = PersistBook()
    let persistOutcome = Mutex<Result<[WriteResult], any Error>?>(nil)

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
        /// An apply queued off the loop handed its results back (`outcomes`).
        case applyDone
        /// A persist queued off the loop is durable, or failed (`persistOutcome`).
        case persistDone
        /// The learner batch timer (`armLearnerFlush`) fired.
        case flushLearners
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
                                    learnerBatchMinEntries: config.learnerBatchMillis > 0 ? config.learnerBatchEntries : 0,
                                    randomSeed: UInt64.random(in: 0...UInt64.max), maxPromotionLag: config.maxPromotionLag)
        core = HostCore(node: RaftNode(id: config.nodeID, config: raftConfig, state: state, appliedIndex: applied))
        learnerPriority = LearnerPriority(nice: config.learnerNice)
        published = Mutex(core.node.status)
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
            "logTail": "\(state.entries.count)", "voters": "\(core.node.membership)"])
    }

    func start(transport: PeerTransport) {
        self.transport = transport
        syncMembership()
        // On the peer transport's event loop (`EventLoopTaskExecutor`): inputs from peers and the
        // frames a turn sends stay on one thread.
        let eventLoop = transport.group.next()
        loopEventLoop = eventLoop
        loopTask = Task(executorPreference: EventLoopTaskExecutor(eventLoop)) { await self.loop() }
        // A timer of that event loop: each tick wakes the loop's own thread only. A task asleep
        // between ticks (`Task.sleep`) woke libdispatch's timer thread and then a worker thread
        // to queue each tick: three threads woken 20 times a second on an idle member.
        let period = TimeAmount.milliseconds(Int64(config.tickMillis))
        ticker = eventLoop.scheduleRepeatedTask(initialDelay: period, delay: period) { [weak self] _ in
            self?.enqueue(.tick)
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
        ticker?.cancel()
        stopRequested.store(true, ordering: .relaxed)
        enqueue(.stop, force: true)
        await loopTask?.value
        await snapshots.task?.value  // the loop has ended: nothing starts another
        closeSnapshotFiles()
        LatencyMarks.write(node: config.nodeID)
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

    /// After a turn: while Raft holds committed entries from a learner for a bigger batch
    /// (`RaftConfig.learnerBatchMinEntries`), one timer of `learnerBatchMillis` sends them
    /// (`Event.flushLearners`); once nothing is held it is cancelled (no wake-up for nothing).
    func armLearnerFlush() {
        guard node.learnerSendsHeld else {
            learnerFlush?.cancel()
            learnerFlush = nil
            return
        }
        guard learnerFlush == nil, let eventLoop = loopEventLoop else { return }
        learnerFlush = eventLoop.scheduleTask(in: .milliseconds(Int64(config.learnerBatchMillis))) { [weak self] in
            self?.enqueue(.flushLearners, force: true)
        }
    }

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
                let turn = Self.turnInputs(batch)
                var stopping = turn.stopping
                for input in turn.inputs { handle(input) }
                // Results of applies that came back: their writes answered, reads released.
                await settleApplies()
                // A queued persist that came back: reported to Raft, what waited for it performed.
                await settlePersist()
                // Queued writes are proposed or forwarded once per turn: a burst becomes one batch.
                routeQueued(now: .now)
                await endTurn()
                // Our own entries count for Raft once durable (HOST CONTRACT 2b); a commit this
                // enables is performed at once (its apply, the new commit index to followers).
                if abandoned { durableReport = nil; stopping = true }
                while let report = durableReport {
                    durableReport = nil
                    step(.persisted(through: report.index, term: report.term))
                    await endTurn()
                }
                syncMembership()
                if let warning = learnerPriority.update(learner: node.isLearner) { logger.warning("\(warning)") }
                adminTurn()
                compactPastHeldAdvance()
                compactIfDue()
                expireSnapshotFile(now: .now)
                sinkTurn.flushAll()
                armLearnerFlush()
                let status = node.status
                published.withLock { $0 = status }
                if stopping {
                    // Applies in flight are committed entries: their writers get their outcome.
                    await drainPersists()
                    await drainApplies()
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

    /// The inputs a turn handles, in order: `.stop` taken out (it ends the loop after the turn),
    /// and one `.tick` at most. Go's ticker under etcd's loop drops ticks alike: a turn held up
    /// by its storage (a bulk import's multi-MB entry applied for a second or more) heard nothing
    /// from its peers meanwhile, and counting every tick that queued up made a follower campaign
    /// and a leader fail its quorum check after such a turn (issue 42: term 14 after a 64 MB
    /// import into 3 nodes on a busy machine). Elections only slow down when every turn is slow.
    static func turnInputs(_ batch: [Input]) -> (inputs: [Input], stopping: Bool) {
        var inputs: [Input] = []
        inputs.reserveCapacity(batch.count)
        var stopping = false, ticked = false
        for input in batch {
            switch input {
            case .stop: stopping = true
            case .tick:
                if !ticked { inputs.append(input) }
                ticked = true
            default: inputs.append(input)
            }
        }
        return (inputs, stopping)
    }

    /// Feeds Raft an event; its actions join the turn. Returns the outcome of a proposal.
    @discardableResult
    func step(_ event: Event) -> [HostEffect] {
        core.handle(.event(event))
    }

    /// Plans the turn (HostCore) and performs it.
    func endTurn() async {
        if LatencyMarks.enabled && node.commitIndex > markedCommit {
            LatencyMarks.mark(.commit, markedCommit + 1, node.commitIndex)
            markedCommit = node.commitIndex
        }
        let waiting = inbox.withLock { !$0.items.isEmpty }
        await perform(core.handle(.endTurn(inputWaiting: waiting)))
    }

    // MARK: - Performing effects

    /// Performs the core's effects in order; a write is durable before the next effect starts.
    /// While a persist queued off the loop is out, the effects that must follow it are held
    /// for it (`hold`), and only sends that may precede durability go out.
    func perform(_ effects: [HostEffect]) async {
        for effect in effects {
            if abandoned { return }
            if persists.writing != nil {
                if case .send(let message) = effect, message.payload.mayPrecedeDurability {
                    sendRaft(message)
                } else {
                    await hold(effect)
                }
                continue
            }
            switch effect {
            case .send(let message):
                sendRaft(message)
            case .persist(let write):
                let first = write.entries.first?.index ?? 0, last = write.entries.last?.index ?? 0
                if first > 0 { LatencyMarks.mark(.writeStart, first, last) }
                if persistsOffLoop(write) { startPersist(write) } else {
                    await writeAnsweringHeartbeats(write)
                    if first > 0 { LatencyMarks.mark(.writeDone, first, last) }
                }
            case .apply(let entries, let metaSync):
                guard let last = entries.last else { continue }
                await apply(through: last.index, metaSync: metaSync, long: Self.applyOffLoop(entries))
            case .stageSnapshotChunk(let chunk):
                stage(chunk)
            case .installSnapshot(let snapshot, let tail):
                await drainApplies()  // the state it replaces is whole, its writes answered
                await installStaged(snapshot, tail: tail)
            case .restoredSnapshot(let snapshot):
                logger.info("state restored from snapshot", metadata: ["index": "\(snapshot.index)"])
            case .compacted:
                break  // the store is durable at its applied index and trims its own log
            case .sendSnapshotChunk(let request):
                sendSnapshotChunk(request)
            case .prepareSnapshot:
                prepareSnapshot()
            case .readReady(let id, let index):
                readMadeReady(id, index: index)
            case .readFailed(let id):
                requests.readFailed(id)
            case .proposalAccepted, .proposalRejected:
                break  // answered where the proposal was stepped
            }
        }
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
