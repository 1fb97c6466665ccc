import EmberCore
import Foundation

/// Handles the requests of one wire-protocol session (reference §6.3): listens, gets, writes,
/// onDisconnect, auth. Every request gets a response carrying its `r`.
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

        init(store: NodePorts, config: NodeConfiguration, policy: ClientPolicy, reads: ReadPool, onDisconnect: OnDisconnectKeeper? = nil) {
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
        guard let pipeline, case .success(.request(let r, let action, let body)) = parsed, action == "p" || action == "m",
              let request = try? pipelinedWrite(action, body), pipeline.responses.hasRoom else { return .notInline }
        // From here on the message is this path's: a refusal by the rate limits is its answer.
        guard admitted(r) else { return .answered }
        // The slot `hasRoom` saw is still free: nothing else reserves while no task runs.
        return .write(tag: pipeline.responses.reserve(r: r, path: request.path), request: request)
    }

    /// The session's and the address's request rates; a refused request is answered here.
    private func admitted(_ r: Int64) -> Bool {
        guard session.admitRequest(now: clock()) else {
            session.send(WireMessages.response(r, status: "too_many_requests",
                                               data: .string("Too many requests (limit \(Int(session.limits.requestRate.perSecond)) per second)")))
            return false
        }
        if !policy.admitWire(from: session.address, now: clock()) {
            session.send(WireMessages.response(r, status: "too_many_requests", data: .string(policy.addressRequestRate.refusal)))
            return false
        }
        return true
    }

    /// Handles one parsed message (`WireClientMessage.parse`).
    func handle(parsed: Result<WireClientMessage, WireClientMessage.ParseError>) async {
        let r: Int64, action: String, body: KeyMap<JSON>
        switch parsed {
        case .failure(.notProtocol):
            session.send(WireServerMessage.protocolError("Invalid message").json)
            return
        case .failure(.missingRequestFields):
            session.send(WireServerMessage.protocolError("Request without r or a").json)
            return
        case .success(.ping):
            session.send(WireMessages.pong)
            return
        case .success(.ignored):
            return
        case .success(.request(let rr, let a, let b)):
            (r, action, body) = (rr, a, b)
        }
        guard admitted(r) else { return }
        if let pipeline {
            // Writes go down the pipeline without waiting; anything else waits for the writes
            // before it to be answered (it must see them, and answer after them).
            if action == "p" || action == "m" {
                do {
                    if let request = try pipelinedWrite(action, body) {
                        await pipeline.submit(r: r, request)
                        return
                    }
                } catch {
                    // Refused by the front's checks: answered in order behind the queued writes.
                    await pipeline.drained()
                    session.send(WireMessages.errorResponse(r, error))
                    return
                }
            }
            await pipeline.drained()
        }
        do {
            let (status, data) = try await dispatch(action, body, r: r)
            if let status { session.send(WireMessages.response(r, status: status, data: data)) }
        } catch {
            session.send(WireMessages.errorResponse(r, error))
        }
    }

    /// The store request of a `p` or `m` that can be pipelined; nil for a priority-only set
    /// (`<path>/.priority`), which reads the current value and takes the awaited path.
    func pipelinedWrite(_ action: String, _ b: KeyMap<JSON>) throws -> WriteRequest? {
        if action == "m" {
            let path = try wirePath(b)
            return WriteRequest(namespace: session.namespace, path: path, kind: .update(try mergeParts(path, b["d"])),
                                identity: session.identity, writer: try writerStamp(b))
        }
        if let raw = b["p"]?.stringValue, try PriorityWrite.target(ofRawPath: raw) != nil { return nil }
        return try setRequest(b)
    }

    /// A `p` request as a store write: `h` (hash) or `v` (version) make it a compare-and-set.
    func setRequest(_ b: KeyMap<JSON>) throws -> WriteRequest {
        let path = try wirePath(b)
        let data = b["d"] ?? .null
        try validate(data, at: path)
        var condition: WriteCondition?
        if let h = b["h"]?.stringValue { condition = .hash(h) }
        if case .int(let v)? = b["v"], v >= 0 { condition = .version(UInt64(v)) }
        return WriteRequest(namespace: session.namespace, path: path, kind: .set(data), condition: condition, identity: session.identity,
                            writer: try writerStamp(b))
    }

    /// Ember extension of `p`/`m`: `"w": {"id": "<writer>", "n": <seq>}` names the write for
    /// exactly-once across resends (`WriteStamp`). Absent: an ordinary write.
    func writerStamp(_ b: KeyMap<JSON>) throws -> WriteStamp? {
        guard let w = b["w"] else { return nil }
        guard case .string(let id)? = w["id"], case .int(let n)? = w["n"], let stamp = WriteStamp(validating: id, seq: n) else {
            throw EmberError.invalidData("w must be {\"id\": 1-64 characters of A-Z a-z 0-9 - _, \"n\": a positive integer}")
        }
        return stamp
    }

    /// Returns the response (status, data), or nil status when the response was already queued.
    func dispatch(_ action: String, _ b: KeyMap<JSON>, r: Int64) async throws -> (String?, JSON) {
        switch action {
        case "q", "l": return try await listen(b, r: r)
        case "n", "u":
            let (path, qw, tag) = try listenIdentity(b)
            session.endListen(path: path, queryWire: qw, tag: tag)
            return ("ok", .object([:]))
        case "g": return try await get(b)
        case "p": return try await put(b)
        case "m": return try await merge(b)
        case "o":
            let path = try wirePath(b)
            let data = b["d"] ?? .null
            try WriteValidation(config).validateFully(data, at: path)
            guard try gate.canWrite(session.namespace, path, .set(data), session.identity, now: clock()) else { throw PermissionDenied() }
            try await registerOnDisconnect(path, .set(data))
            return ("ok", .string(""))
        case "om":
            let path = try wirePath(b)
            let parts = try mergeParts(path, b["d"], full: true)
            guard try gate.canWrite(session.namespace, path, .update(parts), session.identity, now: clock()) else { throw PermissionDenied() }
            try await registerOnDisconnect(path, .update(parts))
            return ("ok", .string(""))
        case "oc":
            let path = try wirePath(b)
            try await onDisconnect?.cancel(at: path, for: session)
            session.cancelOnDisconnect(at: path)
            return ("ok", .string(""))
        case "auth", "gauth": return auth(b)
        case "unauth":
            session.setIdentity(session.baseIdentity, now: clock())
            return ("ok", .string(""))
        case "s", "appcheck", "unappeck", "unappcheck":
            return ("ok", .string(""))
        default:
            return ("invalid_request", .string("Unknown action \(action)"))
        }
    }

    /// Logs the write to run when this connection ends (checked by the rules when registered,
    /// as Firebase does, and judged again when it runs).
    func registerOnDisconnect(_ path: Path, _ kind: WriteRequest.Kind) async throws {
        guard let onDisconnect else { throw StoreUnavailable("This node keeps no onDisconnect operations") }
        let write = WriteRequest(namespace: session.namespace, path: path, kind: kind, identity: session.identity)
        guard session.addOnDisconnect(OnDisconnectWrite(path: path, kind: kind)) else {
            throw RestError(429, "Too many onDisconnect operations")
        }
        do { try await onDisconnect.register(write, for: session) } catch {
            session.removeLastOnDisconnect()
            throw error
        }
    }

    func wirePath(_ b: KeyMap<JSON>) throws -> Path {
        guard let p = b["p"]?.stringValue else { throw EmberError.invalidData("request needs a path p") }
        return try Path(p)
    }

    func listenIdentity(_ b: KeyMap<JSON>) throws -> (Path, JSON?, Int64?) {
        let path = try wirePath(b)
        var tag: Int64?
        if case .int(let t)? = b["t"] { tag = t }
        let qw = b["q"]
        return (path, tag == nil ? nil : qw, tag)
    }

    func listen(_ b: KeyMap<JSON>, r: Int64) async throws -> (String?, JSON) {
        let (path, qw, tag) = try listenIdentity(b)
        let query = try tag == nil ? QuerySpec.default : QuerySpec(wire: qw ?? .object([:]))
        await store.reader.visibleReads()
        try gate.requireRead(session.namespace, path, session.identity, query: tag == nil ? nil : query, now: clock())
        switch session.beginListen(path: path, query: query, queryWire: qw, tag: tag) {
        case .duplicate: return ("ok", .object([:]))
        case .tooMany: return ("too_many_listens", .string("Too many listens on this connection (limit \(session.limits.maxListens))"))
        case .started: break
        }
        let read: ReadResult
        let (store, ns) = (self.store, session.namespace)
        do { read = try await reads.run { try store.reader.read(namespace: ns, path: path) } } catch {
            session.endListen(path: path, queryWire: qw, tag: tag)
            throw error
        }
        var ok: KeyMap<JSON> = [:]
        if tag != nil, !isIndexed(query, at: path) { ok["w"] = .array([.string("no_index")]) }
        session.completeListen(path: path, queryWire: qw, tag: tag, read: read,
                               response: WireMessages.response(r, status: "ok", data: .object(ok)))
        return (nil, .null)
    }

    func isIndexed(_ q: QuerySpec, at path: Path) -> Bool {
        switch q.index {
        case .key, .priority: return true
        case .value: return gate.hasIndex(session.namespace, at: path, named: ".value")
        case .child(let c): return gate.hasIndex(session.namespace, at: path, named: c.segments.joined(separator: "/"))
        }
    }

    func get(_ b: KeyMap<JSON>) async throws -> (String?, JSON) {
        let path = try wirePath(b)
        var query: QuerySpec?
        if let qw = b["q"], case .object(let o) = qw, !o.isEmpty { query = try QuerySpec(wire: qw) }
        await store.reader.visibleReads()
        try gate.requireRead(session.namespace, path, session.identity, query: query, now: clock())
        let (store, ns, window) = (self.store, session.namespace, query)
        // The read and its conversion (both grow with the data) on the read pool.
        return ("ok", try await reads.run {
            let node = try store.reader.read(namespace: ns, path: path).node
            return (window.map { $0.apply(to: node) } ?? node).exportJSON()
        })
    }

    func put(_ b: KeyMap<JSON>) async throws -> (String?, JSON) {
        // `p` to `<path>/.priority` (the SDKs' setPriority) sets the priority alone.
        if let raw = b["p"]?.stringValue, let node = try PriorityWrite.target(ofRawPath: raw) {
            _ = try await PriorityWrite.set(b["d"] ?? .null, at: node, namespace: session.namespace, identity: session.identity, store: store)
            await session.feed?.barrier()
            return ("ok", .string(""))
        }
        let request = try setRequest(b)
        let path = request.path
        let outcome = try await store.writer.write(request)
        // The change is on the node's feed: the response waits until the listeners have it.
        await session.feed?.barrier()
        // A failed compare-and-set: the current value reached the client's listens before this
        // response, because pushes and responses share the session's ordered queue.
        return outcome.applied ? ("ok", .string("")) : ("datastale", .string("The data at \(path) changed; retry the transaction"))
    }

    func merge(_ b: KeyMap<JSON>) async throws -> (String?, JSON) {
        let path = try wirePath(b)
        let parts = try mergeParts(path, b["d"])
        _ = try await store.writer.write(WriteRequest(namespace: session.namespace, path: path, kind: .update(parts),
                                               identity: session.identity, writer: try writerStamp(b)))
        await session.feed?.barrier()
        return ("ok", .string(""))
    }

    func mergeParts(_ path: Path, _ d: JSON?, full: Bool = false) throws -> [(Path, JSON)] {
        guard case .object(let obj)? = d else { throw EmberError.invalidData("a merge needs an object") }
        return try WriteValidation(config).updateParts(base: path, obj, full: full)
    }

    func validate(_ json: JSON, at path: Path) throws {
        try WriteValidation(config).validate(json, at: path)
    }

    /// A new identity may lose read access: the session's listens are judged again (revoked with
    /// `c`). Run by the session on every identity change (auth, unauth, expiry).
    static func rejudgeListens(of session: RealtimeSession, gate: RulesGate, now: Int64) {
        let ns = session.namespace
        session.revokeListens { path, query, identity in
            (try? gate.canRead(ns, path, identity, query: query.isDefault ? nil : query, now: now)) ?? false
        }
    }

    /// `auth`/`gauth`: the node's verifier judges the credential. A refused one leaves the
    /// connection anonymous; an accepted one with an expiry is revoked (`ac`) when it expires.
    func auth(_ b: KeyMap<JSON>) -> (String?, JSON) {
        guard let cred = b["cred"]?.stringValue else { return ("invalid_token", .string("auth needs cred")) }
        // An admin client certificate outranks tokens, as on REST.
        if session.baseIdentity.isAdmin { return ("ok", .object(["auth": .null, "expires": .null])) }
        let now = clock()
        let identity: Identity
        do { identity = try policy.verify(credential: cred, address: session.address, now: now) } catch {
            session.setIdentity(session.baseIdentity, now: now)
            return (error.wireStatus, .string(error.message))
        }
        session.setIdentity(identity, now: now)
        switch identity {
        case .user(let claims, let expiresAt):
            let expires: JSON = expiresAt.map { .int($0 / 1000) } ?? .null
            return ("ok", .object(["auth": claims, "expires": expires]))
        case .admin, .anonymous:
            return ("ok", .object(["auth": .null, "expires": .null]))
        }
    }
}
