import EmberCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// The Firebase REST front: GET / PUT / POST / PATCH / DELETE on `/<path>.json` and SSE streams.
public final class RestHandler: Sendable {
    let store: NodePorts
    let hub: StreamHub
    let config: NodeConfiguration
    /// Rate limits, per-address limits and identity, shared with the wire front.
    let policy: ClientPolicy
    var clock: @Sendable () -> Int64 { policy.clock }
    let pushIDs = Mutex(PushIDGenerator())
    let validation: WriteValidation
    let gate: RulesGate
    /// Where reads of stored data run (not on Swift's cooperative threads).
    let reads: ReadPool
    /// This node's view of trigger delivery (the worker records into it; status and metrics read it).
    public let triggerRuntime = TriggerRuntime()
    /// GETs (reads and SSE streams) wait here until the node caught up since it started.
    let catchUp: NodeCatchUp

    init(store: NodePorts, hub: StreamHub, config: NodeConfiguration, reads: ReadPool, policy: ClientPolicy,
         catchUp: NodeCatchUp = .caughtUp()) {
        self.catchUp = catchUp
        self.store = store
        self.hub = hub
        self.reads = reads
        self.config = config
        self.policy = policy
        self.validation = WriteValidation(config)
        self.gate = RulesGate(store: store, defaults: config.rules)
    }

    static let firebaseETag = HTTPField.Name("X-Firebase-ETag")!
    static let methodOverride = HTTPField.Name("X-HTTP-Method-Override")!

    /// The node's wall clock (`ClientPolicy.wallClockMillis`), for the operations endpoints.
    public static let wallClockMillis = ClientPolicy.wallClockMillis

    /// `base`: the identity of a request without a token (`.admin` over a connection with an admin
    /// client certificate, see `ClientCertificate`).
    public func respond(to request: Request, channel: (any Channel)? = nil, base: Identity = .anonymous) async -> Response {
        do {
            return try await handle(request, channel: channel, base: base)
        } catch {
            return RestAnswer.error(error).response
        }
    }

    func handle(_ request: Request, channel: (any Channel)?, base: Identity) async throws -> Response {
        guard policy.admitREST(channel, now: clock()) else { throw RestError(429, "Too many requests") }
        if request.uri.path == Self.feedPath { return try await feedEndpoint(request, channel: channel, base: base) }
        var req = try RestRequest.parse(uri: request.uri.string)
        var method = request.method
        if method == .post {
            let override = request.headers[Self.methodOverride]?.uppercased() ?? req.methodOverride
            if let o = override { method = HTTPRequest.Method(o) ?? method }
        }
        if method == .options { return RestAnswer.noContent().response }
        if case .node(let name) = req.target {
            if name == "rules/simulate" { return try await rulesPlayground(method: method, request: request, req: req, channel: channel, base: base) }
            if Self.isClusterAdmin(name) { return try await clusterAdmin(name, method: method, request: request, req: req, channel: channel, base: base) }
            if Self.isTriggerAdmin(name) { return try await triggerAdmin(name, method: method, request: request, req: req, channel: channel, base: base) }
            return try await nodeEndpoint(name, method: method)
        }
        let ns = req.namespace ?? config.defaultNamespace
        req.namespace = ns
        let wantETag = request.headers[Self.firebaseETag]?.lowercased() == "true"
        let ifMatch = request.headers[.ifMatch]
        let ifNoneMatch = request.headers[.ifNoneMatch]

        let identity = try policy.restIdentity(req, headers: request.headers, channel: channel, base: base)
        // Every GET answers from this node's state (data, streams, rules, trigger settings): not
        // before it caught up since its start. Writes are judged where they are applied (their
        // conditions too) and are not held, except a priority-only set (`write`: it reads first).
        if method == .get { try await catchUp.wait() }
        if case .rules = req.target { return try await rulesEndpoint(req, method: method, request: request, identity: identity) }
        if case .triggers = req.target { return try await triggersEndpoint(req, method: method, request: request, identity: identity) }
        switch method {
        case .get:
            if ifMatch != nil { throw RestError.badRequest("if-match is not supported on GET requests") }
            if request.headers[.accept]?.contains("text/event-stream") == true {
                return try await stream(req, identity: identity, channel: channel)
            }
            let read = req
            return try await RestTimeout.run(millis: req.timeoutMillis) {
                try await self.get(read, identity: identity, wantETag: wantETag, ifNoneMatch: ifNoneMatch)
            }
        case .put, .post, .patch, .delete:
            if method == .patch && ifMatch != nil { throw RestError.badRequest("if-match is not supported on PATCH requests") }
            if req.shallow || req.query != nil || req.export { throw RestError.badRequest("Query parameters are only supported on GET requests") }
            var body = request.body
            let data = try await Self.collect(&body, contentLength: request.headers[.contentLength], limit: config.maxRequestBytes)
            return try await write(req, identity: identity, method: method, body: data, wantETag: wantETag, ifMatch: ifMatch)
        default:
            throw RestError(405, "Method \(method) is not supported")
        }
    }

    // MARK: - Reads

    func get(_ req: RestRequest, identity: Identity, wantETag: Bool, ifNoneMatch: String?) async throws -> Response {
        let ns = req.namespace!
        if req.linearizable { try await store.reader.linearizableBarrier() }
        await store.reader.visibleReads()
        // Judged here, at the node that serves the read, against its applied state.
        try gate.requireRead(ns, req.path, identity, query: req.query, now: clock())
        let priorityRead: Bool = if case .priority = req.target { true } else { false }
        if !priorityRead, let q = req.query, !req.shallow {
            let path = req.path
            if case .child(let p) = q.index, !gate.hasIndex(ns, at: path, named: p.segments.joined(separator: "/")) {
                throw RestError.badRequest(#"Index not defined, add ".indexOn": "\#(p.segments.joined(separator: "/"))", for path "\#(path)", to the rules"#)
            }
            if q.index == .value, !gate.hasIndex(ns, at: path, named: ".value") {
                throw RestError.badRequest(#"Index not defined, add ".indexOn": ".value", for path "\#(path)", to the rules"#)
            }
            try await store.reader.prepareQueries(namespace: ns)
        }
        if StreamedRead.applies(to: req),
           let streamed = try await streamedResponse(req, wantETag: wantETag, ifNoneMatch: ifNoneMatch) {
            return streamed
        }
        // The read and the response's serialization (both grow with the data) on the read pool.
        return try await reads.run { [self] in try readResponse(req, wantETag: wantETag, ifNoneMatch: ifNoneMatch) }
    }

    /// A GET's answer from the store, once the request passed the rules. Blocking: on the read pool.
    func readResponse(_ req: RestRequest, wantETag: Bool, ifNoneMatch: String?) throws -> Response {
        let ns = req.namespace!
        if case .priority(let path) = req.target {
            let r = try store.reader.read(namespace: ns, path: path)
            return Self.json(r.node.priority?.json ?? .null, pretty: req.print == .pretty)
        }
        let path = req.path
        var value: JSON
        var etag: String?
        if let q = req.query, !req.shallow {
            let r = try store.reader.query(namespace: ns, path: path, query: q)
            value = req.export ? r.node.exportJSON() : r.node.toJSON()
        } else if req.shallow && !wantETag && ifNoneMatch == nil {
            // Keys only: one seek per child, however large the children are. A location with no
            // children is a leaf (or nothing), which is cheap to read whole.
            let keys = try store.reader.shallowKeys(namespace: ns, path: path, after: req.shallowAfter, limit: req.query?.limit ?? .max)
            if keys.isEmpty && req.shallowAfter != nil {
                value = .object([:])  // past the last key: an empty page
            } else if keys.isEmpty {
                value = try store.reader.read(namespace: ns, path: path).node.toJSON()
            } else {
                var o: KeyMap<JSON> = [:]
                o.reserveCapacity(keys.count)
                for k in keys { o[k] = .bool(true) }
                value = .object(o)
            }
        } else {
            let r = try store.reader.read(namespace: ns, path: path)
            etag = ETag.of(node: r.node, version: r.version)
            if req.shallow {
                var node = r.node
                if let q = req.query { node = q.apply(to: node) }
                if node.hasChildren {
                    var o: KeyMap<JSON> = [:]
                    for k in node.children.keys { o[k] = .bool(true) }
                    value = .object(o)
                } else {
                    value = node.toJSON()
                }
            } else {
                value = req.export ? r.node.exportJSON() : r.node.toJSON()
            }
        }
        if let inm = ifNoneMatch, let etag, inm == etag {
            return RestAnswer.notModified(etag: etag).response
        }
        if req.print == .silent { return RestAnswer.noContent().response }
        var resp = Self.json(value, pretty: req.print == .pretty)
        if (wantETag || ifNoneMatch != nil), let etag { resp.headers[.eTag] = etag }
        return resp
    }

    /// `Accept: text/event-stream`: a `put` of the whole location, then every committed change.
    func stream(_ req: RestRequest, identity: Identity, channel: (any Channel)?) async throws -> Response {
        let ns = req.namespace!
        let path = req.path
        await store.reader.visibleReads()
        try gate.requireRead(ns, path, identity, query: nil, now: clock())
        let address = ClientCredentials.address(of: channel)
        let perAddress = policy.connectionsPerAddress
        guard perAddress.acquire(address) else { throw RestError(429, perAddress.refusal) }
        guard let (id, events) = hub.register(namespace: ns, path: path, identity: identity) else {
            perAddress.release(address)
            throw RestError(429, "Too many streams are open on this node")
        }
        // The first event (the whole location) is streamed from one snapshot on the read pool
        // (`StreamedRead`: memory about one chunk, paced by the client), or read whole where
        // the store does not stream; the changes after that snapshot follow.
        let store = self.store
        let initial: (text: String, stream: (any ReadStream)?, appliedIndex: UInt64, version: UInt64)
        do {
            initial = try await reads.run {
                // Past the node's open streams (a burst of listeners) the first event is read whole.
                let opened: (any ReadStream)?
                do { opened = try store.reader.openReadStream(namespace: ns, path: path, format: TreeJSONFormat(), query: nil) } catch is StoreUnavailable { opened = nil }
                if let s = opened { return ("", s, s.appliedIndex, s.version) }
                let r = try store.reader.read(namespace: ns, path: path)
                return (ChangeRouting.sseText(.put(path: .root, data: r.node)), nil, r.appliedIndex, r.version)
            }
            hub.noteInitialRead(id: id, version: initial.version)
        } catch {
            hub.unregister(id)
            perAddress.release(address)
            throw error
        }
        let hub = self.hub
        let clock = self.clock
        let keepAlive = config.keepAliveSeconds
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream; charset=utf-8"
        headers[.cacheControl] = "no-cache"
        headers[.accessControlAllowOrigin] = "*"
        let reads = self.reads
        let body = ResponseBody { writer in
            defer {
                initial.stream?.close()
                hub.release(id)
                perAddress.release(address)
            }
            if let stream = initial.stream {
                try await writer.write(ByteBuffer(string: ChangeRouting.rootPutHead))
                try await StreamedRead.pump(stream, reads: reads, to: &writer)
                stream.close()
                try await writer.write(ByteBuffer(string: ChangeRouting.rootPutTail))
            } else {
                try await writer.write(ByteBuffer(string: initial.text))
            }
            let ticker = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(keepAlive))
                    if Task.isCancelled { break }
                    hub.keepAlive(id: id)
                }
            }
            defer { ticker.cancel() }
            // A stream opened with an expiring token ends with `auth_revoked` when it expires.
            var expiry: Task<Void, Never>?
            if case .user(_, let expiresAt?) = identity {
                let delay = max(0, expiresAt - clock())
                expiry = Task {
                    try? await Task.sleep(for: .milliseconds(delay))
                    if !Task.isCancelled { hub.revokeAuth(id: id) }
                }
            }
            defer { expiry?.cancel() }
            // On the connection's event loop (`EventLoopTaskExecutor`): one hand-off per event.
            let executor = channel.map { EventLoopTaskExecutor($0.eventLoop) }
            try await withTaskExecutorPreference(executor) {
                for await (index, text) in events where index > initial.appliedIndex {
                    // A stream that lost events must not go on with a gap: drop the connection.
                    if hub.hasOverflowed(id) { break }
                    try await writer.write(ByteBuffer(string: text))
                    LatencyMarks.mark(.streamed, index, index)
                }
            }
            if hub.hasOverflowed(id) {
                channel?.close(promise: nil)
                throw StreamOverflow()
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }

    // MARK: - Writes

    func write(_ req: RestRequest, identity: Identity, method: HTTPRequest.Method, body: ByteBuffer, wantETag: Bool, ifMatch: String?) async throws -> Response {
        let ns = req.namespace!
        let path = req.path
        let condition = ifMatch.map { ETag.condition(ifMatch: $0.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))) }
        if let (request, echo) = prepareTextUpdate(req, namespace: ns, method: method, body: body, condition: condition, identity: identity) {
            return try await answerWrite(req, request, echo, wantETag: wantETag)
        }
        let json = try Self.body(body.readableBytesView, method: method)
        if case .priority(let node) = req.target {
            guard method == .put || method == .delete, ifMatch == nil else {
                throw RestError.badRequest("A priority is written with PUT or DELETE on /<path>/.priority.json, without if-match")
            }
            // It reads the node first and writes nothing when it finds none: a member behind
            // (restarted, wiped) would drop the priority of a node the cluster holds.
            try await catchUp.wait()
            let priority = try await PriorityWrite.set(json, at: node, namespace: ns, identity: identity, store: store)
            if req.print == .silent { return RestAnswer.noContent().response }
            return Self.json(priority, pretty: req.print == .pretty)
        }
        if condition != nil && method == .post { throw RestError.badRequest("if-match is not supported on POST requests") }
        let (request, echo) = try prepareWrite(namespace: ns, path: path, method: method, json: json, condition: condition, identity: identity)
        return try await answerWrite(req, request, echo, wantETag: wantETag)
    }

    /// Runs a prepared data write and answers it.
    private func answerWrite(_ req: RestRequest, _ request: WriteRequest, _ echo: WriteEcho, wantETag: Bool) async throws -> Response {
        let outcome = try await store.writer.write(request)
        guard outcome.applied else {
            var resp = Self.json(outcome.value.toJSON(), pretty: false, status: .preconditionFailed)
            resp.headers[.eTag] = ETag.of(node: outcome.value, version: outcome.version)
            return resp
        }
        if req.print == .silent { return RestAnswer.noContent().response }
        var resp = Self.json(echo.answer(outcome), pretty: req.print == .pretty)
        if wantETag { resp.headers[.eTag] = ETag.of(node: outcome.value, version: outcome.version) }
        return resp
    }

    /// A write's JSON body (DELETE has none).
    static func body(_ bytes: some Collection<UInt8>, method: HTTPRequest.Method) throws -> JSON {
        guard method != .delete else { return .null }
        guard !bytes.isEmpty else { throw RestError.badRequest("No data supplied.") }
        do { return try JSON.parse(bytes) } catch { throw RestError.badRequest(EmberError.invalidJSON("").description) }
    }

    /// The store request of a data write, and what its answer echoes (shared with `RestFastPath`,
    /// so both fronts judge and answer a write the same way).
    func prepareWrite(namespace ns: String, path: Path, method: HTTPRequest.Method, json: JSON, condition: WriteCondition?,
                      identity: Identity) throws -> (WriteRequest, WriteEcho) {
        var path = path
        let echo: WriteEcho
        let kind: WriteRequest.Kind
        switch method {
        case .put, .delete:
            try validate(json, at: path)
            kind = .set(json)
            echo = method == .delete ? .null : .value
        case .post:
            let name = pushIDs.withLock { gen -> String in
                var rng = SystemRandomNumberGenerator()
                return gen.next(now: clock(), using: &rng)
            }
            path = path.child(name)
            try validate(json, at: path)
            kind = .set(json)
            echo = .name(name)
        default:  // PATCH
            guard case .object(let obj) = json else {
                throw RestError.badRequest("Invalid data; a PATCH body must be a JSON object")
            }
            let parts = try validation.updateParts(base: path, obj)
            kind = .update(parts)
            echo = .parts(parts.map(\.0))
        }
        return (WriteRequest(namespace: ns, path: path, kind: kind, condition: condition, identity: identity), echo)
    }

    /// A PATCH of a data path whose body the text scan takes whole (`UpdateText.scan`: no
    /// server value, every check passed): its parts go to the store as their text, with the
    /// nodes the scan built. nil: the tree path (`prepareWrite`), which answers as before.
    /// (The fast path's small writes keep the tree path: its pipelined writers take no built nodes.)
    func prepareTextUpdate(_ req: RestRequest, namespace ns: String, method: HTTPRequest.Method, body: ByteBuffer,
                           condition: WriteCondition?, identity: Identity) -> (WriteRequest, WriteEcho)? {
        guard method == .patch, case .data = req.target else { return nil }
        guard let (text, nodes) = UpdateText.scan(body: Array(body.readableBytesView), base: req.path,
                                                  maxParts: validation.maxUpdateParts, maxNodes: validation.maxWriteNodes,
                                                  buildNodes: store.writer.appliesFrontNodes) else { return nil }
        return (WriteRequest(namespace: ns, path: req.path, kind: .updateText(text, nodes: nodes), condition: condition, identity: identity),
                .parts(text.parts.map(\.path)))
    }

    func validate(_ json: JSON, at path: Path) throws {
        try validation.validate(json, at: path)
    }

    // MARK: - Node endpoints

    func nodeEndpoint(_ name: String, method: HTTPRequest.Method) async throws -> Response {
        guard method == .get else { throw RestError(405, "Method \(method) is not supported") }
        switch name {
        case "healthz": return Self.json(.object(["status": .string("ok")]), pretty: false)
        case "readyz", "status":
            // Single node: a fixed leader; cluster node: its Raft view (ReplicatedDataStore).
            guard case .object(var status) = try await store.admin.status.nodeStatus() else { throw RestError(500, "bad status") }
            status["streams"] = .int(Int64(hub.count))
            return Self.json(.object(status), pretty: false)
        default: throw RestError(404, "Unknown node endpoint /\(name)")
        }
    }

    // MARK: - Helpers

    static func collect(_ body: inout RequestBody, contentLength: String?, limit: Int) async throws -> ByteBuffer {
        if let cl = contentLength, let n = Int(cl), n > limit {
            throw RestError(413, "The request body is \(n) bytes; the limit is \(limit) bytes")
        }
        do {
            return try await body.collect(upTo: limit)
        } catch {
            throw RestError(413, "The request body exceeds the limit of \(limit) bytes")
        }
    }

    /// Answers as Hummingbird responses (`RestAnswer`; the operations endpoints use them too).
    static func json(_ value: JSON, pretty: Bool, status: HTTPResponse.Status = .ok) -> Response {
        RestAnswer.json(value, pretty: pretty, status: status).response
    }

    static func error(_ e: RestError) -> Response { RestAnswer.error(e).response }
}

/// What the answer to an applied REST write holds (Firebase: the value written for PUT, the
/// generated name for POST, null for DELETE, the written parts for PATCH).
enum WriteEcho: Sendable {
    case value
    case null
    case name(String)
    case parts([Path])

    func answer(_ outcome: EmberNodeStore.WriteOutcome) -> JSON {
        switch self {
        case .value: return outcome.value.toJSON()
        case .null: return .null
        case .name(let n): return .object(["name": .string(n)])
        case .parts(let rels):
            var o: KeyMap<JSON> = [:]
            // Read once: a text update's value is built from its text when read (`TextPatch`).
            let value = outcome.value
            for rel in rels { o[rel.segments.joined(separator: "/")] = value.child(at: rel).toJSON() }
            return .object(o)
        }
    }
}

/// An SSE reader fell more than the queue limit behind; its connection is closed.
struct StreamOverflow: Error {}

