import EmberCore

/// The client side of a wire-protocol session as a sans-IO state machine: what a client has asked
/// for (listens, writes, gets, its credential), which of it the current connection has been sent,
/// request numbers and what each outstanding response belongs to, and what a (re)connect must send
/// again and in which order. Inputs are method calls (the app's commands, the socket opening and
/// closing, each parsed server message); outputs are `Effect`s the caller carries out in order
/// (send a message, complete a request, report data). No I/O, no clock, no closures: the caller
/// keeps its callbacks keyed by the ids handed out here, so every rule of the protocol is testable
/// by feeding messages in and reading effects out (`WireClientSessionTests`).
///
/// The rules are the Firebase SDKs' (JS `PersistentConnection`): on every handshake the
/// credential first, then listens in the order they were made (so writes' results reach them),
/// then writes in their original order, then gets (`restoreState_`); a compare-and-set write that
/// was sent when the connection dropped may or may not have been applied, so it fails with
/// `disconnect` (the transaction code reruns it) instead of being sent again.
public struct WireClientSession: Sendable {
    public typealias ListenID = Int
    public typealias WriteID = Int
    public typealias GetID = Int

    public enum Phase: Sendable, Equatable {
        case disconnected
        /// A socket is open; the server's hello has not arrived.
        case awaitingHello
        case connected
    }

    public enum Effect: Sendable, Equatable {
        /// Send this message now (the caller frames it).
        case send(WireClientMessage)
        /// The handshake completed: the server's clock (ms) and its cluster's client URLs.
        case connected(serverTimeMs: Int64, nodes: [String]?)
        /// A listen's answer: `ok` (it stays active) or a failure, which ends it — as does
        /// `permission_denied` when the server revokes it.
        case listenCompleted(ListenID, status: String, data: JSON)
        case writeCompleted(WriteID, status: String, data: JSON)
        case getCompleted(GetID, status: String, data: JSON)
        /// A get that found no connection: the caller calls `getTimedOut` after its timeout.
        case armGetTimeout(GetID)
        case data(path: Path, data: JSON, isMerge: Bool, tag: Int?)
        /// The server refused the credential sent on this connection (status of `auth`/`gauth`).
        case credentialRefused(status: String)
        /// The server revoked the credential (`ac`): reconnect with a fresh one.
        case credentialRevoked
        /// The server ends the session for good (`c`/`s`): do not reconnect.
        case shutdown(reason: String)
    }

    struct Listen: Sendable {
        var id: ListenID
        var path: Path
        var query: JSON?
        var tag: Int?
    }

    struct Write: Sendable {
        var action: String
        var path: Path
        var data: JSON
        var hash: String?
        var stamp: JSON?
        var sent = false
    }

    struct Get: Sendable {
        var path: Path
        var query: JSON?
        var sent = false
    }

    /// What an outstanding request's response is for.
    enum Pending: Sendable {
        case listen(key: String, id: ListenID)
        case write(WriteID)
        case get(GetID)
        case credential
        /// `n`, `unauth`: nothing waits for the answer.
        case none
    }

    public private(set) var phase: Phase = .disconnected
    /// The credential sent on every handshake (nil: none).
    public private(set) var credential: String?
    private var nextRequest: Int64 = 1
    private var pending: [Int64: Pending] = [:]
    /// Active listens by `listenKey`; one per (path, tag): listening again replaces.
    private var listens: KeyMap<Listen> = [:]
    private var lastListenID = 0
    private var writes: [WriteID: Write] = [:]
    private var lastWriteID = 0
    private var gets: [GetID: Get] = [:]
    private var lastGetID = 0

    public init(credential: String? = nil) {
        self.credential = credential
    }

    public var isConnected: Bool { phase == .connected }
    /// Writes not yet answered (sent or queued).
    public var outstandingWrites: Int { writes.count }
    public var activeListens: Int { listens.count }
    /// Requests sent on this connection and not answered yet.
    public var awaitedResponses: Int { pending.count }

    static func listenKey(_ path: Path, _ tag: Int?) -> String { "\(path)|\(tag.map(String.init) ?? "")" }

    // MARK: - Commands

    /// Listens at `path` (with a query `tag` and its wire query, or the default query). `hash` is
    /// the client's hash of its cached data there, asked only if the listen is sent now. Returns
    /// the new listen's id and the id of the listen it replaced at the same path and tag.
    public mutating func listen(path: Path, query: JSON?, tag: Int?, hash: (ListenID) -> String)
        -> (id: ListenID, replaced: ListenID?, effects: [Effect]) {
        lastListenID += 1
        let key = Self.listenKey(path, tag)
        let replaced = listens[key]?.id
        listens[key] = Listen(id: lastListenID, path: path, query: query, tag: tag)
        var out: [Effect] = []
        if isConnected { sendListen(key, hash: hash, &out) }
        return (lastListenID, replaced, out)
    }

    /// Stops the listen at `path`/`tag`; returns its id (nil: there was none).
    public mutating func unlisten(path: Path, tag: Int?) -> (removed: ListenID?, effects: [Effect]) {
        guard let entry = listens.removeValue(forKey: Self.listenKey(path, tag)) else { return (nil, []) }
        var out: [Effect] = []
        if isConnected {
            var body: KeyMap<JSON> = ["p": .string(path.wireText)]
            if let tag = entry.tag {
                body["t"] = .int(Int64(tag))
                if let q = entry.query { body["q"] = q }
            }
            request("n", body, .none, &out)
        }
        return (entry.id, out)
    }

    /// Queues a write (`p`, `m`, `o`, `om`, `oc`); `hash` makes it a compare-and-set, `stamp`
    /// is Ember's exactly-once name for it (`w`). Writes go out in the order they were made.
    public mutating func write(action: String, path: Path, data: JSON, hash: String? = nil, stamp: JSON? = nil)
        -> (id: WriteID, effects: [Effect]) {
        lastWriteID += 1
        writes[lastWriteID] = Write(action: action, path: path, data: data, hash: hash, stamp: stamp)
        var out: [Effect] = []
        if isConnected { sendWrite(lastWriteID, &out) }
        return (lastWriteID, out)
    }

    /// Fails every queued write with `write_canceled`, in order. Answers to writes already sent
    /// find nothing to complete (the server may still apply them).
    public mutating func purgeWrites() -> [Effect] {
        let purged = writes.keys.sorted()
        writes.removeAll()
        return purged.map { .writeCompleted($0, status: "write_canceled", data: .string("Write cancelled by user")) }
    }

    /// A one-time read; without a connection it waits for one until `getTimedOut`.
    public mutating func get(path: Path, query: JSON?) -> (id: GetID, effects: [Effect]) {
        lastGetID += 1
        gets[lastGetID] = Get(path: path, query: query)
        var out: [Effect] = []
        if isConnected { sendGet(lastGetID, &out) } else { out.append(.armGetTimeout(lastGetID)) }
        return (lastGetID, out)
    }

    /// A get's wait for a connection ended: it fails with `offline` unless it was sent.
    public mutating func getTimedOut(_ id: GetID) -> [Effect] {
        guard let get = gets[id], !get.sent else { return [] }
        gets[id] = nil
        return [.getCompleted(id, status: "offline", data: .string("Client is offline."))]
    }

    /// Sets the credential; on a live connection it is sent at once (`unauth` when nil).
    public mutating func setCredential(_ token: String?) -> [Effect] {
        credential = token
        guard isConnected else { return [] }
        var out: [Effect] = []
        if token == nil { request("unauth", [:], .none, &out) } else { sendCredential(&out) }
        return out
    }

    // MARK: - Connection events

    /// A socket opened; the server's hello is awaited.
    public mutating func opened() {
        precondition(phase == .disconnected, "a session has one connection at a time")
        phase = .awaitingHello
    }

    /// The socket closed (or failed to open). Answers still awaited will never come: sent
    /// compare-and-set writes fail with `disconnect`, everything else is sent again on the next
    /// handshake.
    public mutating func closed() -> [Effect] {
        phase = .disconnected
        pending.removeAll()
        var out: [Effect] = []
        for id in writes.keys.sorted() {
            guard var write = writes[id] else { continue }
            if write.sent && write.hash != nil {
                writes[id] = nil
                out.append(.writeCompleted(id, status: "disconnect", data: .null))
            } else {
                write.sent = false
                writes[id] = write
            }
        }
        for id in gets.keys { gets[id]!.sent = false }
        return out
    }

    /// One message from the server. `hash` is asked for listens (re)sent by a handshake.
    public mutating func receive(_ message: WireServerMessage, hash: (ListenID) -> String) -> [Effect] {
        var out: [Effect] = []
        switch message {
        case .hello(let timestamp, _, _, let nodes):
            guard phase == .awaitingHello else { return [] }
            phase = .connected
            out.append(.connected(serverTimeMs: timestamp, nodes: nodes))
            restore(hash: hash, &out)
        case .response(let r, let status, let data):
            guard let what = pending.removeValue(forKey: r) else { return [] }
            responded(what, status: status, data: data, &out)
        case .dataPush(let path, let data, let isMerge, let tag, _):
            guard isConnected else { return [] }
            out.append(.data(path: path, data: data, isMerge: isMerge, tag: tag.map { Int(truncatingIfNeeded: $0) }))
        case .listenRevoked(let path, _):
            for (key, entry) in listens.sorted(by: { $0.value.id < $1.value.id }) where entry.path == path {
                listens[key] = nil
                out.append(.listenCompleted(entry.id, status: "permission_denied", data: .string("listen revoked")))
            }
        case .authRevoked:
            out.append(.credentialRevoked)
        case .shutdown(let reason):
            out.append(.shutdown(reason: reason))
        case .pong, .protocolError, .ignored:
            // Pongs only prove liveness (any message does); a protocol error is the server
            // saying this client sent garbage, which a request's own response also reports.
            break
        }
        return out
    }

    // MARK: - Internals

    /// After the handshake: credential, listens in the order made, writes in order, gets.
    private mutating func restore(hash: (ListenID) -> String, _ out: inout [Effect]) {
        if credential != nil { sendCredential(&out) }
        for key in listens.keys.sorted(by: { listens[$0]!.id < listens[$1]!.id }) { sendListen(key, hash: hash, &out) }
        for id in writes.keys.sorted() { sendWrite(id, &out) }
        for id in gets.keys.sorted() { sendGet(id, &out) }
    }

    private mutating func responded(_ what: Pending, status: String, data: JSON, _ out: inout [Effect]) {
        switch what {
        case .listen(let key, let id):
            // Only the listen this response belongs to (not a later one at the same key).
            guard listens[key]?.id == id else { return }
            if status != "ok" { listens[key] = nil }
            out.append(.listenCompleted(id, status: status, data: data))
        case .write(let id):
            guard writes.removeValue(forKey: id) != nil else { return }
            out.append(.writeCompleted(id, status: status, data: data))
        case .get(let id):
            guard gets.removeValue(forKey: id) != nil else { return }
            out.append(.getCompleted(id, status: status, data: data))
        case .credential:
            if status != "ok" { out.append(.credentialRefused(status: status)) }
        case .none:
            break
        }
    }

    private mutating func request(_ action: String, _ body: KeyMap<JSON>, _ what: Pending, _ out: inout [Effect]) {
        precondition(isConnected, "requests go out on a connected session only")
        let r = nextRequest
        nextRequest += 1
        pending[r] = what
        out.append(.send(.request(r: r, action: action, body: body)))
    }

    /// `auth` for a JWT, `gauth` for anything else (an admin/OAuth token such as `owner`), as
    /// the JS SDK chooses.
    private mutating func sendCredential(_ out: inout [Effect]) {
        guard let token = credential else { return }
        let isJWT = token.split(separator: ".", omittingEmptySubsequences: false).count == 3
        request(isJWT ? "auth" : "gauth", ["cred": .string(token)], .credential, &out)
    }

    private mutating func sendListen(_ key: String, hash: (ListenID) -> String, _ out: inout [Effect]) {
        guard let entry = listens[key] else { return }
        var body: KeyMap<JSON> = ["p": .string(entry.path.wireText), "h": .string(hash(entry.id))]
        if let tag = entry.tag {
            body["t"] = .int(Int64(tag))
            body["q"] = entry.query ?? .object([:])
        }
        request("q", body, .listen(key: key, id: entry.id), &out)
    }

    private mutating func sendWrite(_ id: WriteID, _ out: inout [Effect]) {
        guard var write = writes[id], !write.sent else { return }
        write.sent = true
        writes[id] = write
        var body: KeyMap<JSON> = ["p": .string(write.path.wireText), "d": write.data]
        if let h = write.hash { body["h"] = .string(h) }
        if let stamp = write.stamp { body["w"] = stamp }
        request(write.action, body, .write(id), &out)
    }

    private mutating func sendGet(_ id: GetID, _ out: inout [Effect]) {
        guard var get = gets[id], !get.sent else { return }
        get.sent = true
        gets[id] = get
        request("g", ["p": .string(get.path.wireText), "q": get.query ?? .object([:])], .get(id), &out)
    }
}
