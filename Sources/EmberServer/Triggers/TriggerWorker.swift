import Crypto
import EmberCore
import Foundation
import Logging
import NIOCore
import Synchronization

/// Delivers trigger events from the replicated outboxes (`TriggersPort`) while this node
/// delivers (a single node always; a cluster member while it leads): one lane per trigger,
/// each driving its `TriggerDelivery` state machine — the POSTs here, the decisions there — and
/// logging the trigger's cursor (`settle`) once its receiver answered 2xx, so a new leader, or
/// this node after a restart, resumes from the last settled entry: at least once, in log order.
/// Cursors are logged in the background, one log entry at a time (those due meanwhile go in the
/// next one): POSTs go on while a cursor commits through Raft, so an unbatched trigger is not
/// held to one event per commit round trip; the lanes of a namespace share that entry
/// (`TriggerCursorLog`).
final class TriggerWorker: Sendable {
    let port: any TriggersPort
    let runtime: TriggerRuntime
    let logger: Logger
    private let lanes = Mutex<[String: (definition: TriggerDefinition, lane: TriggerLane)]>([:])
    private let task = Mutex<Task<Void, Never>?>(nil)
    let cursors: TriggerCursorLog
    let bodies = TriggerBodyCache()

    /// How often the worker looks at the definitions and leadership (a commit only wakes the
    /// lanes: with no trigger defined, commits cost the worker nothing).
    static let reconcileInterval = Duration.milliseconds(500)
    /// Named limits: outbox rows read per read, and reads per top-up (a lane's turn).
    static let maxRowsPerRead = 256
    static let maxReadsPerTurn = 8

    init(port: any TriggersPort, runtime: TriggerRuntime, logger: Logger) {
        self.port = port
        self.runtime = runtime
        self.logger = logger
        self.cursors = TriggerCursorLog(port: port)
        port.onTriggerCommit { [weak self] commit in self?.wake(commit) }
    }

    /// After a commit (on the commit path: must not block): the lanes it reaches look for new
    /// events. A lane whose group got no record is not woken (with triggers on ten patterns,
    /// the nine others read the store on every commit for nothing).
    func wake(_ commit: TriggerCommit = .all) {
        if commit.isEmpty { return }
        // Woken under the lock (a wake only flips flags and yields): the lanes copied out per
        // commit (each with its definition, retained and released) were a share of the commit path.
        lanes.withLock { lanes in
            for l in lanes.values where commit.wakes(namespace: l.lane.ns, group: l.definition.group) {
                l.lane.wake(state: commit.changesState(namespace: l.lane.ns))
            }
        }
    }

    func start() {
        task.withLock { t in
            guard t == nil else { return }
            t = Task { [self] in await run() }
        }
    }

    func stop() async {
        let t = task.withLock { t in defer { t = nil }; return t }
        t?.cancel()
        await t?.value
        let all = lanes.withLock { l in defer { l = [:] }; return l }
        for (_, l) in all { await l.lane.stop() }
    }

    private func run() async {
        while !Task.isCancelled {
            reconcile()
            try? await Task.sleep(for: Self.reconcileInterval)
        }
    }

    /// Starts a lane per trigger this node should deliver, stops the others (a definition that
    /// changed restarts its lane with the new limits and target).
    private func reconcile() {
        var want: [String: (String, TriggerDefinition)] = [:]
        if port.delivers, let namespaces = try? port.namespaces() {
            for ns in namespaces {
                guard let set = try? port.definitions(namespace: ns) else { continue }
                // Feeds are read by their consumers (`GET /.ember/feed`), not delivered.
                for d in set.definitions where !d.feed { want[TriggerRuntime.key(ns, d.name)] = (ns, d) }
            }
        }
        // Triggers per group: a lane alone in its group shares no bodies (`TriggerLane.alone`).
        var members: [String: Int] = [:]
        for (ns, d) in want.values where d.group != 0 { members[TriggerRuntime.key(ns, String(d.group)), default: 0] += 1 }
        var stopping: [TriggerLane] = []
        lanes.withLock { lanes in
            for (k, l) in lanes where want[k]?.1 != l.definition {
                stopping.append(l.lane)
                lanes[k] = nil
            }
            for (k, (ns, d)) in want where lanes[k] == nil {
                let lane = TriggerLane(namespace: ns, definition: d, port: port, cursors: cursors, bodies: bodies, runtime: runtime, logger: logger)
                lanes[k] = (d, lane)
                lane.start()
            }
            for (k, l) in lanes {
                guard let w = want[k] else { continue }
                l.lane.alone.store(members[TriggerRuntime.key(w.0, String(w.1.group)), default: 0] <= 1, ordering: .relaxed)
            }
        }
        for l in stopping { Task { await l.stop() } }
    }
}

/// One trigger's delivery loop.
final class TriggerLane: Sendable {
    let ns: String
    let definition: TriggerDefinition
    let port: any TriggersPort
    let cursors: TriggerCursorLog
    let bodies: TriggerBodyCache
    let runtime: TriggerRuntime
    let logger: Logger
    enum Input: Sendable {
        case wake
        /// The lane's own timer (`nextWake`: a retry, a linger's end) came due.
        case timer
        case completed(batch: UInt64, error: String?, status: Int?)
        /// The cursor entry in flight was logged (nil) or not (why).
        case settled(error: String?)
    }

    /// Cursors waiting to be logged and the one being logged; `held`: their entries, which a
    /// top-up from the outbox must not take again (their rows go when the cursor commits).
    struct Settling {
        typealias Item = (indexes: [UInt64], reason: String?, dead: Int, own: [UInt64])
        var queue: [Item] = []
        var inFlight: Item?
        var held = TriggerHeldEntries()
        /// The group the lane reads (named by its cursor entries) and the entries taken from
        /// the trigger's own rows (listed in them).
        var group: UInt64 = 0
        var own: Set<UInt64> = []
        /// Every entry through it was settled (its cursor logged): a read that does not wait
        /// for the last apply's commit may not show that cursor yet (`TriggersPort.deliveryRead`).
        var floor: UInt64 = 0
    }
    /// What every event of this trigger starts with (`TriggerEvent.head`) and its signing key:
    /// made once, not per event or POST.
    private let head: [UInt8]
    private let key: SymmetricKey
    /// The kept-alive connection the lane's POSTs are pipelined on (nil: no TLS context).
    private let pipe: TriggerPipe?
    private let pipeError: String?
    private let inputs = AsyncStream<Input>.makeStream()
    private let wakePending = Atomic<Bool>(false)
    /// A commit that may have changed the trigger's paused or halted flags woke the lane
    /// (`TriggerCommit.changesState`): it reads them again. Commits of records and cursors do
    /// not: a flag read per wake was a store read per lane per commit on a busy leader.
    private let stateDirty = Atomic<Bool>(true)
    /// No other trigger of the namespace reads this one's group (set by the worker as it
    /// reconciles): its bodies are written straight, not through `TriggerBodyCache`, whose
    /// lookups and copies only pay when another lane finds what this one serialized.
    let alone = Atomic<Bool>(false)
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(namespace: String, definition: TriggerDefinition, port: any TriggersPort, cursors: TriggerCursorLog,
         bodies: TriggerBodyCache, runtime: TriggerRuntime, logger: Logger) {
        self.ns = namespace
        self.definition = definition
        self.port = port
        self.cursors = cursors
        self.bodies = bodies
        self.runtime = runtime
        self.logger = logger
        self.head = TriggerEvent.head(namespace: namespace, trigger: definition.name)
        self.key = SymmetricKey(data: Array(definition.secret.utf8))
        var pipe: TriggerPipe?
        var pipeError: String?
        if let url = definition.url {
            do { pipe = try TriggerPipe(url: url, timeoutMs: definition.limits.timeoutMs) } catch { pipeError = "TLS: \(error)" }
        } else {
            pipeError = "no url"
        }
        self.pipe = pipe
        self.pipeError = pipeError
    }

    func wake(state: Bool = true) {
        if state { stateDirty.store(true, ordering: .releasing) }
        if !wakePending.exchange(true, ordering: .acquiringAndReleasing) { inputs.continuation.yield(.wake) }
    }

    func start() { task.withLock { $0 = Task { [self] in await run() } } }

    func stop() async {
        let t = task.withLock { $0 }
        t?.cancel()
        inputs.continuation.yield(.wake)
        await t?.value
        pipe?.close()
        runtime.setDelivering(ns, definition.name, false)
    }

    static func nowMillis() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    private func run() async {
        let name = definition.name
        var machine = TriggerDelivery(limits: definition.limits, seed: UInt64.random(in: .min ... .max))
        var events = TriggerLaneEvents()
        var settling = Settling()
        var iterator = inputs.stream.makeAsyncIterator()
        var timer = Timer()
        defer { timer.task?.cancel() }
        runtime.setDelivering(ns, name, true)
        // The replicated flags are read again after a commit that may have changed them, not
        // after every answer, cursor or commit: a pause, resume or halt is a log entry of the
        // namespace, and its commit wakes every lane of it saying so (`TriggerReach.namespace`,
        // `stateDirty`); a read per input was a store read per POST.
        var stateDue = true
        while !Task.isCancelled {
            // Not while a partial batch lingers for a POST's answer (`TriggerDelivery.readsWait`):
            // the answer, or the linger's end, reads everything committed meanwhile at once,
            // and the commits meanwhile do not wake the lane (its wake stays pending: no read
            // per commit). A wake taken in meanwhile counts once the linger ends.
            let lingering = machine.readsWait(now: Self.nowMillis())
            if !lingering { wakePending.store(false, ordering: .sequentiallyConsistent) }
            if stateDirty.exchange(false, ordering: .acquiringAndReleasing) { stateDue = true }
            // Paused or halted (replicated flags): wait for a change. Read too while the
            // machine halted itself (the halt it logged is committed by now).
            if stateDue || machine.halted != nil {
                let state = try? port.deliveryState(namespace: ns, trigger: name)
                guard let state, !state.paused, state.halted == nil else {
                    if !machine.isIdle { machine.reset(); events.removeAll() }
                    wakePending.store(false, ordering: .relaxed)
                    _ = await next(&iterator, wakeAt: Self.nowMillis() + 1_000, timer: &timer)
                    stateDue = true
                    continue
                }
                stateDue = false
            }
            // Resumed after a halt: from the outbox again.
            if machine.halted != nil { machine.reset(); events.removeAll() }
            // Top up from the outbox (not while lingering): from the oldest row when idle (a
            // replay may have put older rows back), else after the newest row taken.
            // Reads until the machine wants no more or the outbox has no more rows (at most
            // `maxReadsPerTurn`): one read of `maxRowsPerRead` rows a turn capped a batching
            // trigger's POSTs at 256 entries' events whatever its `batchSize`, and a lane
            // behind its writes sent four POSTs where one would do.
            var reads = 0
            while !lingering && machine.wants > 0 && reads < TriggerWorker.maxReadsPerTurn {
                // While cursors are being logged, an idle machine reads after the entries they hold.
                let after = machine.isIdle ? settling.held.max : machine.takenThrough
                let limit = min(TriggerWorker.maxRowsPerRead, machine.wants)
                guard let read = try? port.deliveryRead(namespace: ns, trigger: name, after: after, limit: limit, floor: settling.floor) else { break }
                reads += 1
                settling.group = read.group
                var took = false
                for r in read.rows where !r.events.isEmpty && !settling.held.contains(r.index) && (machine.isIdle || r.index > machine.takenThrough) {
                    machine.take(index: r.index, events: r.events.count)
                    events[r.index] = r.events
                    if r.own { settling.own.insert(r.index) }
                    took = true
                }
                // A short read is the outbox's end; one that took nothing would read the same again.
                if read.rows.count < limit || !took { break }
            }
            await perform(machine.poll(now: Self.nowMillis()), &machine, &events, &settling)
            guard let input = await next(&iterator, wakeAt: machine.nextWake, timer: &timer) else { return }
            switch input {
            case .completed(let batch, let error, _):
                await perform(machine.completed(batch: batch, error: error, now: Self.nowMillis()), &machine, &events, &settling)
            case .settled(let error):
                guard let done = settling.inFlight else { break }
                settling.inFlight = nil
                if let error {
                    // Not logged (no leader, or this node no longer leads): start over from the
                    // replicated cursor; what was delivered since may be delivered again.
                    logger.notice("trigger cursor not logged; delivery restarts from the outbox", metadata: ["trigger": "\(name)", "error": "\(error)"])
                    machine.reset()
                    events.removeAll()
                    settling = Settling()
                    try? await Task.sleep(for: .milliseconds(200))
                    stateDue = true
                    continue
                }
                settling.held.remove(done.indexes)
                settling.floor = max(settling.floor, done.indexes.max() ?? 0)
                if let reason = done.reason {
                    runtime.dead(events: done.dead)
                    logger.warning("trigger events dead-lettered", metadata: ["trigger": "\(name)", "entries": "\(done.indexes.count)", "reason": "\(reason)"])
                }
                logNextCursor(&settling)
            case .wake, .timer:
                break
            }
        }
    }

    /// Carries out the machine's actions: POSTs run concurrently and report back as inputs;
    /// cursors are queued to be logged in order in the background (`logNextCursor`); a halt is
    /// logged before the loop goes on.
    private func perform(_ actions: [TriggerDelivery.Action], _ machine: inout TriggerDelivery,
                         _ events: inout TriggerLaneEvents, _ settling: inout Settling) async {
        let name = definition.name
        for a in actions {
            switch a {
            case .send(let batch, let items):
                // Each event's entry timestamp (for the latency); the events themselves are
                // copied out only for a body not made by another lane of the group yet.
                var stamps: [Int64] = []
                stamps.reserveCapacity(items.count)
                // Each event's members as the apply serialized them for its group's lanes
                // (`TriggerEvent.sharedMembers`), while every one has them.
                var members: [[UInt8]]? = []
                members?.reserveCapacity(items.count)
                // Read in place: subscripting the array copied each event whole (retaining
                // every part), a share of a crowded group's lane per event.
                events.forEach(items) { _, e in
                    stamps.append(e.pointee.timestamp)
                    if members != nil, let m = e.pointee.sharedMembers { members?.append(m) } else { members = nil }
                }
                let continuation = inputs.continuation
                // Queued on the connection here, in the machine's order; answered in the background.
                let start = Self.nowMillis()
                // Events of the group's records (named by the group they were read from) share
                // their serialized members with its other lanes; a trigger's own rows do not.
                let group = alone.load(ordering: .relaxed) || (!settling.own.isEmpty && items.contains { settling.own.contains($0.index) })
                    ? 0 : settling.group
                var shared: TriggerBodyCache.SharedBatch?
                let serialized = members.flatMap { $0.count == items.count && !$0.isEmpty ? $0 : nil }
                if serialized == nil && group != 0 && definition.limits.batchSize > 1 && stamps.count == items.count {
                    shared = bodies.batch(ns, group: group, count: items.count, key: { (items[$0].index, items[$0].seq) },
                                          event: { k in events.event(items[k]) })
                }
                // Members serialized already go straight into the buffer the POST is written
                // from (a body array copied into it was one more copy of every byte sent).
                let body: ByteBuffer
                if let serialized {
                    body = Self.buffer(head: head, members: serialized, batch: definition.limits.batchSize > 1)
                } else if let shared {
                    body = ByteBuffer(bytes: TriggerEvent.cloudEventBody(head: head, joined: shared.bytes, ends: shared.ends))
                } else if group == 0 {
                    body = ByteBuffer(bytes: Self.body(items, events, namespace: ns, head: head, batch: definition.limits.batchSize > 1))
                } else {
                    let payload = items.compactMap { events.event($0) }
                    body = ByteBuffer(bytes: Self.body(payload, namespace: ns, trigger: name, head: head, batch: definition.limits.batchSize > 1,
                                                       group: group, bodies: bodies))
                }
                // Answered by a callback on the connection's loop, not a task per POST.
                let done: @Sendable (Result<Int, any Error>?) -> Void = { [self, stamps] answer in
                    let (error, status) = finish(items, stamps, answer, start: start)
                    continuation.yield(.completed(batch: batch, error: error, status: status))
                }
                if let answer = send(body) { answer.whenComplete { done($0) } } else { done(nil) }
            case .settle(let indexes, let reason):
                let dead = reason == nil ? 0 : indexes.reduce(0) { $0 + (events[$1]?.count ?? 0) }
                events.forget(indexes)
                // Own rows are rare (a 0.6.0 outbox's, replayed dead letters): no lookup per entry without them.
                let own = settling.own.isEmpty ? [] : indexes.filter { settling.own.remove($0) != nil }
                settling.queue.append((indexes, reason, dead, own))
                settling.held.add(indexes)
                logNextCursor(&settling)
            case .halt(let reason):
                try? await port.log(namespace: ns, .halt(name: name, reason: reason))
                logger.warning("trigger halted", metadata: ["trigger": "\(name)", "reason": "\(reason)"])
            }
        }
    }

    /// Logs the queued cursors when none is in flight: the queue's first run of the same
    /// outcome (`coalesce`), delivered ones as this trigger's cursor in the namespace's next
    /// `advance` entry (`TriggerCursorLog`) once every member
    /// reads it (`TriggersPort.logsAdvance`), dead ones (and, until then, delivered ones) as a
    /// `settle` entry of their own; reports `.settled`.
    private func logNextCursor(_ settling: inout Settling) {
        guard settling.inFlight == nil, let first = settling.queue.first else { return }
        let advance = first.reason == nil && port.logsAdvance
        let next = Self.coalesce(&settling.queue, advance: advance)
        settling.inFlight = next
        let (port, ns, name, continuation) = (self.port, self.ns, definition.name, inputs.continuation)
        if advance, let through = next.indexes.max() {
            // Delivered: the cursor goes with the other lanes' in one entry (a cluster with a
            // member of 0.6.0 gets `settle` entries below, which it reads).
            cursors.submit(namespace: ns, TriggerCursor(name: name, group: settling.group, through: through, rows: next.own)) { error in
                continuation.yield(.settled(error: error))
            }
            return
        }
        Task {
            do {
                try await port.log(namespace: ns, .settle(name: name, indexes: next.indexes, deadLetter: next.reason))
                continuation.yield(.settled(error: nil))
            } catch {
                continuation.yield(.settled(error: "\(error)"))
            }
        }
    }

    /// Takes the queue's first run of cursors of one outcome into one. A `settle` entry names
    /// every entry it settles, so it takes at most `TriggerDelivery.maxSettle` of them. An
    /// `advance` names only how far the trigger read, and its own rows: it takes every delivered
    /// cursor queued (at most `maxSettle` own rows). Capping it by entries too held a busy
    /// trigger's cursor to one POST's worth per entry committed: under a saturating write load
    /// the replicated cursor fell further behind the deliveries the longer the run (the lag
    /// grew though delivery kept up, and a failover would resend all of it).
    static func coalesce(_ queue: inout [Settling.Item], advance: Bool) -> Settling.Item {
        precondition(!queue.isEmpty, "a cursor to log")
        var next = queue.removeFirst()
        while let more = queue.first, more.reason == next.reason,
              advance ? next.own.count + more.own.count <= TriggerDelivery.maxSettle
                      : next.indexes.count + more.indexes.count <= TriggerDelivery.maxSettle {
            next.indexes += more.indexes
            next.dead += more.dead
            next.own += more.own
            queue.removeFirst()
        }
        return next
    }

    /// The lane's timer: the task that yields `.timer` at `at` (ms).
    struct Timer {
        var task: Task<Void, Never>?
        var at: Int64?
    }

    /// The next input, or `.timer` at `wakeAt` (ms); nil once cancelled. A timer already
    /// armed for the same time is kept: the machine's next wake (a retry, a linger's end)
    /// stays the same over many inputs, and a task per input to sleep again was a share of a
    /// busy lane's cost.
    private func next(_ it: inout AsyncStream<Input>.Iterator, wakeAt: Int64?, timer: inout Timer) async -> Input? {
        if timer.task == nil || timer.at != wakeAt {
            timer.task?.cancel()
            timer = Timer()
            if let wakeAt {
                let delay = max(0, wakeAt - Self.nowMillis())
                let c = inputs.continuation
                timer.task = Task {
                    try? await Task.sleep(for: .milliseconds(delay))
                    if !Task.isCancelled { c.yield(.timer) }
                }
                timer.at = wakeAt
            }
        }
        if Task.isCancelled { return nil }
        let input = await it.next()
        // Fired (or a cancelled one's late yield): armed again when still wanted.
        if case .timer? = input {
            timer.task?.cancel()
            timer = Timer()
        }
        return input
    }

    /// Header carrying `sha256=<hex HMAC-SHA256 of the body with the trigger's secret>`.
    static let signatureHeader = "X-Ember-Signature"

    private static let hexDigits = Array("0123456789abcdef".utf8)

    static func signature(_ body: [UInt8], secret: String) -> String {
        signature(body, key: SymmetricKey(data: Array(secret.utf8)))
    }

    static func signature(_ body: [UInt8], key: SymmetricKey) -> String {
        hex(HMAC<SHA256>.authenticationCode(for: body, using: key))
    }

    static func signature(_ body: ByteBuffer, secret: String) -> String {
        signature(body, key: SymmetricKey(data: Array(secret.utf8)))
    }

    /// `signature` of the bytes `body` holds.
    static func signature(_ body: ByteBuffer, key: SymmetricKey) -> String {
        hex(body.withUnsafeReadableBytes { HMAC<SHA256>.authenticationCode(for: $0, using: key) })
    }

    private static func hex(_ mac: HashedAuthenticationCode<SHA256>) -> String {
        // Hex by table: `String(format:)` per byte was a tenth of an unbatched leader's CPU.
        var hex = Array("sha256=".utf8)
        hex.reserveCapacity(7 + 64)
        for b in mac {
            hex.append(hexDigits[Int(b >> 4)])
            hex.append(hexDigits[Int(b & 15)])
        }
        return String(decoding: hex, as: UTF8.self)
    }

    /// Queues one POST of `body` (a CloudEvent, or an array of them when the trigger batches)
    /// on the lane's connection, signed with the trigger's secret; its status when answered.
    private func send(_ body: ByteBuffer) -> EventLoopFuture<Int>? {
        let name = definition.name
        let batch = definition.limits.batchSize > 1
        return pipe?.post(body: body, headers: [
            ("Content-Type", batch ? "application/cloudevents-batch+json" : "application/cloudevents+json"),
            (Self.signatureHeader, Self.signature(body, key: key)),
            ("X-Ember-Trigger", name),
        ])
    }

    /// `TriggerEvent.cloudEventBody(head:shared:batch:)` written into the POST's buffer.
    static func buffer(head: [UInt8], members: [[UInt8]], batch: Bool) -> ByteBuffer {
        guard batch else {
            guard let first = members.first else { return ByteBuffer(string: "null") }
            var b = ByteBuffer()
            b.reserveCapacity(head.count + first.count)
            b.writeBytes(head)
            b.writeBytes(first)
            return b
        }
        var b = ByteBuffer()
        b.reserveCapacity(members.reduce(2) { $0 + head.count + 1 + $1.count })
        b.writeInteger(UInt8(0x5B))
        for (k, m) in members.enumerated() {
            if k > 0 { b.writeInteger(UInt8(0x2C)) }
            b.writeBytes(head)
            b.writeBytes(m)
        }
        b.writeInteger(UInt8(0x5D))
        return b
    }

    /// A POST's body: events of a group's shared records (`group` != 0) from the members its
    /// lanes serialized once (`TriggerBodyCache`: a batch whole, else event by event) behind
    /// this trigger's `head`; a trigger's own rows serialized here. The same bytes either way.
    static func body(_ payload: [TriggerEvent], namespace ns: String, trigger: String, head: [UInt8], batch: Bool,
                     group: UInt64, bodies: TriggerBodyCache) -> [UInt8] {
        guard group != 0 else { return TriggerEvent.cloudEventBody(payload, namespace: ns, head: head, batch: batch) }
        if batch, let shared = bodies.batch(ns, group: group, count: payload.count, key: { (payload[$0].index, payload[$0].seq) },
                                            event: { payload[$0] }) {
            return TriggerEvent.cloudEventBody(head: head, joined: shared.bytes, ends: shared.ends)
        }
        return TriggerEvent.cloudEventBody(head: head, shared: bodies.members(ns, group: group, batch ? payload : Array(payload.prefix(1))),
                                           batch: batch)
    }

    /// A lane's body of `items` written straight from the events it holds (`events`, by log
    /// index), none copied out: the bytes `TriggerEvent.cloudEventBody` makes of the same events
    /// (an item whose event is not held is left out, as there). A lane alone in its group (one
    /// trigger per pattern) writes every body so, and copying each event into a payload first
    /// (retaining and releasing each of its parts) was a share of its cost per event.
    static func body(_ items: [TriggerDelivery.Event], _ events: TriggerLaneEvents, namespace ns: String, head: [UInt8],
                     batch: Bool) -> [UInt8] {
        var out: [UInt8] = []
        var wrote = 0
        if batch {
            out.reserveCapacity(2 + items.count * (head.count + 384))
            out.append(0x5B)
        }
        var writer = TriggerMembersWriter(namespace: ns)
        events.forEach(items) { _, e in
            // Unbatched: the first event held alone.
            if !batch && wrote > 0 { return }
            if wrote > 0 { out.append(0x2C) }
            out.append(contentsOf: head)
            writer.write(e.pointee, into: &out)
            wrote += 1
        }
        if !batch && wrote > 0 { return out }
        if !batch { return Array("null".utf8) }
        out.append(0x5D)
        return out
    }

    /// Where the event of place `seq` is among an entry's events, compared in place:
    /// `firstIndex(where:)` hands its closure each event, copied whole (every part retained
    /// and released), for every event of every POST.
    static func place(_ seq: Int, in evs: UnsafeBufferPointer<TriggerEvent>) -> Int? {
        var k = 0
        while k < evs.count {
            if evs[k].seq == seq { return k }
            k += 1
        }
        return nil
    }

    /// The POST's outcome: nil error on a 2xx; recorded (recent deliveries, metrics).
    private func finish(_ items: [TriggerDelivery.Event], _ stamps: [Int64], _ answer: Result<Int, any Error>?,
                        start: Int64) -> (String?, Int?) {
        let name = definition.name
        var failure: String?
        var status: Int?
        switch answer {
        case .success(let code)?:
            status = code
            if !(200..<300).contains(code) { failure = "HTTP \(code)" }
        case .failure(let error)?:
            failure = "\(error)"
        case nil:
            failure = pipeError ?? "no connection"
        }
        let end = Self.nowMillis()
        // Events of one entry (and entries of one millisecond) share their stamp: one latency
        // per run of equal stamps, with its count (the histogram was searched per event).
        var latencies: [(seconds: Double, count: Int)] = []
        if failure == nil {
            var k = 0
            while k < stamps.count {
                var j = k + 1
                while j < stamps.count && stamps[j] == stamps[k] { j += 1 }
                latencies.append((Double(max(0, end - stamps[k])) / 1000, j - k))
                k = j
            }
        }
        runtime.recorded(ns, name, .init(events: items, outcome: failure ?? "delivered", status: status, millis: end - start, at: end),
                         events: stamps.count, latencies: latencies)
        return (failure, status)
    }
}
