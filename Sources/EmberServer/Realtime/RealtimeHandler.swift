import EmberCore
import Foundation

/// Carries out the store operations of one wire-protocol session (reference §6.3): the session's
/// `WireServerSession` decides what each request means and what is answered; this driver judges
/// rules, reads, writes and verifies credentials, and feeds the outcomes back. Every request gets
/// a response carrying its `r`.
struct RealtimeHandler: Sendable {
    /// What every connection of a node shares: held once per node, not copied per connection
    /// (the configuration alone is hundreds of bytes).
    final class Services: Sendable {
        let store: NodePorts
        let config: NodeConfiguration
        /// Rate limits, per-address limits and identity, shared with the REST front.
        let policy: ClientPolicy
        var clock: @Sendable () -> Int64 { policy.clock }
        /// Where the initial data of listens and gets is read (not on Swift's cooperative threads).
        let reads: ReadPool
        let gate: RulesGate
        /// Where onDisconnect writes are registered (nil: the node keeps none, `o` is refused).
        let onDisconnect: OnDisconnectKeeper?
        /// Listens and gets wait here until the node caught up since it started.
        let catchUp: NodeCatchUp

        init(store: NodePorts, config: NodeConfiguration, policy: ClientPolicy, reads: ReadPool, onDisconnect: OnDisconnectKeeper? = nil,
             catchUp: NodeCatchUp = .caughtUp()) {
            self.catchUp = catchUp
            self.store = store
            self.onDisconnect = onDisconnect
            self.config = config
            self.policy = policy
            self.reads = reads
            gate = RulesGate(store: store, defaults: config.rules)
        }
    }

    let session: RealtimeSession
    let services: Services
    /// Pipelined writes (single node and cluster member alike); nil only for a store without
    /// them: each write is then awaited before the next request.
    var pipeline: WirePipeline? = nil

    var store: NodePorts { services.store }
    var config: NodeConfiguration { services.config }
    var clock: @Sendable () -> Int64 { services.clock }
    var reads: ReadPool { services.reads }
    var policy: ClientPolicy { services.policy }
    var gate: RulesGate { services.gate }
    /// Where onDisconnect writes are registered (nil: the node keeps none, `o` is refused).
    var onDisconnect: OnDisconnectKeeper? { services.onDisconnect }

    init(session: RealtimeSession, services: Services, pipeline: WirePipeline?) {
        self.session = session
        self.services = services
        self.pipeline = pipeline
    }

    init(session: RealtimeSession, store: NodePorts, config: NodeConfiguration, policy: ClientPolicy,
         reads: ReadPool, pipeline: WirePipeline? = nil, onDisconnect: OnDisconnectKeeper? = nil) {
        self.init(session: session, services: Services(store: store, config: config, policy: policy, reads: reads, onDisconnect: onDisconnect),
                  pipeline: pipeline)
    }

    /// Handles one reassembled message.
    func handle(_ text: String) async {
        await handle(parsed: WireClientMessage.parse(text))
    }

    /// What the connection's event loop did with a message itself (`inlineWrite`).
    enum Inline {
        /// Not the loop's: the session's task handles the message, in order. Nothing was done.
        case notInline
        /// Answered already (refused by the rate limits).
        case answered
        /// A write that holds response slot `tag`, for the loop's burst (`WirePipeline.enqueue(burst:)`).
        case write(tag: UInt64, request: WriteRequest)
    }

    /// A pipelinable write the connection's event loop handles itself (`WireConnection`), with no
    /// task and no wait: it passed the front's checks and the rate limits and holds a response
    /// slot. Anything else (not a write, refused by a check, no free slot, no pipeline) is
    /// `.notInline`, untouched. Only called with no request of the session queued or being
    /// handled, so it cannot overtake one.
    func inlineWrite(_ parsed: Result<WireClientMessage, WireClientMessage.ParseError>) -> Inline {
        guard let pipeline else { return .notInline }
        let route = WireRequestRoute(parsed, pipelined: true)
        guard let r = route.request, case .pipelined(let action, let body) = route.handling,
              let request = try? pipelinedWrite(action, body), pipeline.responses.hasRoom else { return .notInline }
        // From here on the message is this path's: a refusal by the rate limits is its answer.
        guard admitted(r) else { return .answered }
        // The slot `hasRoom` saw is still free: nothing else reserves while no task runs.
        return .write(tag: pipeline.responses.reserve(r: r, path: request.path), request: request)
    }

    /// The session's and the address's request rates; a refused request is answered here.
    private func admitted(_ r: Int64) -> Bool {
        let refusal: String
        if let sessionRefusal = session.admitRequest(now: clock()) {
            refusal = sessionRefusal
        } else if !policy.admitWire(from: session.address, now: clock()) {
            refusal = policy.addressRequestRate.refusal
        } else {
            return true
        }
        session.drive { $0.refused(r, refusal) }
        return false
    }

    /// Handles one parsed message (`WireClientMessage.parse`).
    func handle(parsed: Result<WireClientMessage, WireClientMessage.ParseError>) async {
        // Writes go down the pipeline without waiting; any other request waits for the writes
        // before it to be answered (`WireRequestRoute`).
        let route = WireRequestRoute(parsed, pipelined: pipeline != nil)
        if let r = route.request {
            guard admitted(r) else { return }
            switch route.handling {
            case .now:
                break
            case .pipelined(let action, let body):
                do {
                    if let request = try pipelinedWrite(action, body) {
                        await pipeline!.submit(r: r, request)
                        return
                    }
                } catch {
                    // Refused by the front's checks: answered in order behind the queued writes.
                    await pipeline!.drained()
                    session.drive { $0.failed(r, WireMessages.failure(error)) }
                    return
                }
                await pipeline!.drained()
            case .afterWrites:
                await pipeline!.drained()
            }
        }
        let now = clock()
        for op in session.drive({ $0.receive(parsed, now: now) }) { await carryOut(op) }
    }

    /// One store operation the session asked for; its outcome goes back to the session.
    func carryOut(_ op: RealtimeSession.Op) async {
        do { try await run(op) } catch let e as CatchingUp {
            // No status answers a listen without the SDKs cancelling it for good (any status but
            // `ok` removes the listener and raises its cancel callback; a get is rejected): the
            // connection is closed instead, and the SDK reconnects and asks again.
            let channel = session.socketChannel
            session.finish(reason: e.message)
            channel?.close(promise: nil)
        } catch {
            guard let r = op.request else { preconditionFailure("only store operations fail") }
            session.drive { $0.failed(r, WireMessages.failure(error)) }
        }
    }

    private func run(_ op: RealtimeSession.Op) async throws {
        switch op {
        case .authorizeListen(let r, let l):
            // Held (nothing sent for it, nor for the requests after it) until the node caught up.
            try await services.catchUp.wait()
            await store.reader.visibleReads()
            try gate.requireRead(session.namespace, l.path, session.identity, query: l.tag == nil ? nil : l.query, now: clock())
            for next in session.beginListen(r: r, l) { await carryOut(next) }
        case .readListen(let r, let l):
            let (store, ns) = (self.store, session.namespace)
            let read: ReadResult
            do { read = try await reads.run { try store.reader.read(namespace: ns, path: l.path) } } catch {
                session.drive { $0.listenReadFailed(r: r, l, WireMessages.failure(error)) }
                return
            }
            session.listenRead(r: r, l, indexed: l.tag == nil || isIndexed(l.query, at: l.path), read: read)
        case .get(let r, let path, let query):
            let data = try await get(path, query)
            session.drive { $0.answer(r, data) }
        case .write(let r, let action, let body):
            let (path, completion) = action == "p" ? try await put(body) : try await merge(body)
            session.send(WireAckQueue.response(r: r, path: path, completion).json)
        case .registerOnDisconnect(let r, let action, let path, let body):
            try await registerOnDisconnect(action, path, body)
            session.drive { $0.answer(r, .string("")) }
        case .cancelOnDisconnect(let r, let path):
            try await onDisconnect?.cancel(at: path, for: session)
            session.cancelOnDisconnect(at: path)
            session.drive { $0.answer(r, .string("")) }
        case .verifyCredential(let r, let credential):
            auth(r, credential)
        case .send, .sendFrame, .listenIndexed, .identityChanged, .armExpiry, .disarmExpiry:
            preconditionFailure("the session carries out its own effects")
        }
    }

    /// The store request of a `p` or `m` that can be pipelined; nil for a priority-only set
    /// (`<path>/.priority`), which reads the current value and takes the awaited path.
    func pipelinedWrite(_ action: String, _ b: KeyMap<JSON>) throws -> WriteRequest? {
        if action == "p", let raw = b["p"]?.stringValue, try PriorityWrite.target(ofRawPath: raw) != nil { return nil }
        return try writeRequest(action, b)
    }

    /// A `p` or `m` request (`WireWrite`) as a store write, as this session's identity.
    func writeRequest(_ action: String, _ b: KeyMap<JSON>) throws -> WriteRequest {
        let w = try WireWrite(action: action, body: b, validation: WriteValidation(config))
        var writer: WriteStamp?
        if let s = w.stamp {
            // The store's rule for the writer's name (`WriteStamp(validating:)`).
            guard let stamp = WriteStamp(validating: s.id, seq: s.n) else { throw WireWrite.invalidStamp }
            writer = stamp
        }
        let kind: WriteRequest.Kind
        switch w.kind {
        case .set(let data): kind = .set(data)
        case .update(let parts): kind = .update(parts)
        }
        let condition: WriteCondition? = switch w.condition {
        case .hash(let h)?: .hash(h)
        case .version(let v)?: .version(v)
        case nil: nil
        }
        return WriteRequest(namespace: session.namespace, path: w.path, kind: kind, condition: condition, identity: session.identity,
                            writer: writer)
    }

    /// `o`/`om`: logs the write to run when this connection ends (checked by the rules when
    /// registered, as Firebase does, and judged again when it runs).
    func registerOnDisconnect(_ action: String, _ path: Path, _ b: KeyMap<JSON>) async throws {
        let kind: WriteRequest.Kind
        if action == "o" {
            let data = b["d"] ?? .null
            try WriteValidation(config).validateFully(data, at: path)
            kind = .set(data)
        } else {
            kind = .update(try mergeParts(path, b["d"], full: true))
        }
        guard try gate.canWrite(session.namespace, path, kind, session.identity, now: clock()) else { throw PermissionDenied() }
        guard let onDisconnect else { throw StoreUnavailable("This node keeps no onDisconnect operations") }
        let write = WriteRequest(namespace: session.namespace, path: path, kind: kind, identity: session.identity)
        guard session.addOnDisconnect(OnDisconnectWrite(path: path, kind: kind)) else { throw RealtimeSession.Wire.tooManyOnDisconnect }
        do { try await onDisconnect.register(write, for: session) } catch {
            session.removeLastOnDisconnect()
            throw error
        }
    }

    func isIndexed(_ q: QuerySpec, at path: Path) -> Bool {
        switch q.index {
        case .key, .priority: return true
        case .value: return gate.hasIndex(session.namespace, at: path, named: ".value")
        case .child(let c): return gate.hasIndex(session.namespace, at: path, named: c.segments.joined(separator: "/"))
        }
    }

    func get(_ path: Path, _ query: QuerySpec?) async throws -> JSON {
        try await services.catchUp.wait()
        await store.reader.visibleReads()
        try gate.requireRead(session.namespace, path, session.identity, query: query, now: clock())
        let (store, ns, window) = (self.store, session.namespace, query)
        // The read and its conversion (both grow with the data) on the read pool.
        return try await reads.run {
            let node = try store.reader.read(namespace: ns, path: path).node
            return (window.map { $0.apply(to: node) } ?? node).exportJSON()
        }
    }

    /// An awaited `p` (no pipeline, or a priority-only set).
    func put(_ b: KeyMap<JSON>) async throws -> (Path, WireAckQueue.Completion) {
        // `p` to `<path>/.priority` (the SDKs' setPriority) sets the priority alone.
        if let raw = b["p"]?.stringValue, let node = try PriorityWrite.target(ofRawPath: raw) {
            // It reads the node first (nothing written when it finds none): not before this
            // member caught up since its start, as listens and gets.
            try await services.catchUp.wait()
            _ = try await PriorityWrite.set(b["d"] ?? .null, at: node, namespace: session.namespace, identity: session.identity, store: store)
            await session.feed?.barrier()
            return (node, .applied)
        }
        let request = try writeRequest("p", b)
        let outcome = try await store.writer.write(request)
        // The change is on the node's feed: the response waits until the listeners have it.
        await session.feed?.barrier()
        // A failed compare-and-set: the current value reached the client's listens before this
        // response, because pushes and responses share the session's ordered queue.
        return (request.path, outcome.applied ? .applied : .stale)
    }

    /// An awaited `m` (no pipeline).
    func merge(_ b: KeyMap<JSON>) async throws -> (Path, WireAckQueue.Completion) {
        let request = try writeRequest("m", b)
        _ = try await store.writer.write(request)
        await session.feed?.barrier()
        return (request.path, .applied)
    }

    func mergeParts(_ path: Path, _ d: JSON?, full: Bool = false) throws -> [(Path, JSON)] {
        guard case .object(let obj)? = d else { throw EmberError.invalidData("a merge needs an object") }
        return try WriteValidation(config).updateParts(base: path, obj, full: full)
    }

    /// A new identity may lose read access: the session's listens are judged again (revoked with
    /// `c`). Run by the session on every identity change (auth, unauth, expiry).
    static func rejudgeListens(of session: RealtimeSession, gate: RulesGate, now: Int64) {
        let ns = session.namespace
        session.revokeListens { path, query, identity in
            (try? gate.canRead(ns, path, identity, query: query.isDefault ? nil : query, now: now)) ?? false
        }
    }

    /// `auth`/`gauth`: the node's verifier judges the credential; the session decides the rest (a
    /// refused one leaves the connection at its base identity; an accepted one with an expiry is
    /// revoked with `ac` when it expires).
    func auth(_ r: Int64, _ credential: String) {
        let now = clock()
        do {
            let identity = try policy.verify(credential: credential, address: session.address, now: now)
            session.drive { $0.credentialVerified(r: r, identity, now: now) }
        } catch {
            session.drive { $0.credentialRefused(r: r, status: error.wireStatus, message: error.message, now: now) }
        }
    }
}
