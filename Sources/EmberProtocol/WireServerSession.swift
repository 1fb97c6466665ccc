import EmberCore

/// What a server's session is built from: who a connection may speak for, what it keeps per
/// listen and per onDisconnect registration. The protocol's rules do not depend on what these
/// hold; emberd's are its `Identity`, `WireListen` and `OnDisconnectWrite` (`EmberWire`).
public protocol WireServerContext {
    associatedtype Identity: Equatable & Sendable
    associatedtype Listen: WireServerListen
    associatedtype OnDisconnect: Sendable

    /// A credential's claims, as the `auth` response echoes them (nil: `null`).
    static func claims(of identity: Identity) -> JSON?
    /// When a credential stops being valid (ms since the epoch; nil: never).
    static func expiry(of identity: Identity) -> Int64?
    /// An admin connection (client certificate) outranks tokens: `auth` does not change it.
    static func outranksTokens(_ identity: Identity) -> Bool
    /// The registrations left after `oc` at `path` (those at or below it are cancelled).
    static func cancel(_ writes: [OnDisconnect], at path: Path) -> [OnDisconnect]
}

/// What a session knows of each of its listens.
public protocol WireServerListen: Sendable {
    var path: Path { get }
    /// The client's `q` object as sent (tagged listens), echoed when the listen is revoked.
    var queryWire: JSON? { get }
}

/// The server side of a wire-protocol v5 session (reference §6) as a sans-IO state machine — the
/// server's mirror of `WireClientSession`. It holds every protocol rule: the handshake, which
/// request gets which answer, the credential and its expiry, the listens with their tags and the
/// per-connection limits, onDisconnect registrations, the error statuses (`WireFailure`) and, in
/// `WireAckQueue`, the order of write acknowledgements. Inputs are method calls (a parsed client
/// message, the outcome of a store operation, a timer firing, with the time as an input); outputs
/// are `Effect`s the driver carries out in order (send a message, start a store operation, keep
/// its listen index in step, re-judge listens, arm a timer). No I/O, no clock, no locks: emberd's
/// driver (`RealtimeSession`, `RealtimeHandler`) holds it under its connection's lock, and every
/// rule is testable by feeding inputs and reading effects (`WireServerSessionTests`).
///
/// Not here: the request budgets (`WireRequestBudget`, and the node's `ClientPolicy` shared with
/// REST), the order of pipelined writes and other requests (`WireRequestRoute`), what a write or a
/// listen's data holds (the rules and the store, judged by the driver), and redirects — emberd
/// sends no `r` control message; a cluster names its members in the hello (`en`).
public struct WireServerSession<Context: WireServerContext>: Sendable {
    public typealias Identity = Context.Identity

    public struct Limits: Sendable, Equatable {
        /// Listens one connection may hold.
        public var maxListens: Int
        /// onDisconnect operations one connection may register.
        public var maxOnDisconnect: Int
        public init(maxListens: Int = 10_000, maxOnDisconnect: Int = 1_000) {
            self.maxListens = maxListens
            self.maxOnDisconnect = maxOnDisconnect
        }
    }

    /// A listen as the client names it: path, and for a tagged (filtered) listen its tag and query.
    public struct ListenRequest: Sendable, Equatable {
        public let path: Path
        /// `q` as sent; nil for an untagged listen (its query is the default whatever it sent).
        public let queryWire: JSON?
        public let tag: Int64?
        public let query: QuerySpec

        public init(path: Path, queryWire: JSON?, tag: Int64?, query: QuerySpec) {
            self.path = path
            self.queryWire = tag == nil ? nil : queryWire
            self.tag = tag
            self.query = query
        }

        /// The listen's name within the connection: path plus canonical query.
        public var key: String { Self.key(path: path, queryWire: queryWire, tag: tag) }

        public static func key(path: Path, queryWire: JSON?, tag: Int64?) -> String {
            path.description + "|" + (tag == nil ? "" : (queryWire?.serialized() ?? ""))
        }
    }

    public enum Effect: Sendable {
        /// Send this message (in order with every other message of the connection).
        case send(JSON)
        /// Send this whole frame (a prebuilt answer).
        case sendFrame(String)
        /// A listen began (true) or ended (false): the hub's index of listens by path follows.
        case listenIndexed(path: Path, key: String, added: Bool)
        /// The identity changed (auth as someone else, unauth, a refused re-auth, expiry): the
        /// driver judges the listens again against the rules (`revokeListens`).
        case identityChanged
        /// Call `expiryTimerFired(generation:)` after this many ms.
        case armExpiry(generation: Int, afterMillis: Int64)
        /// Cancel any expiry timer armed before.
        case disarmExpiry

        // Store operations to start; their outcome comes back through the matching input.
        /// Judge the listen by the rules (after the node's reads are visible); then `beginListen`
        /// or `failed`.
        case authorizeListen(r: Int64, ListenRequest)
        /// Read the listen's initial data; then `listenRead` or `listenReadFailed`.
        case readListen(r: Int64, ListenRequest)
        /// Read (rules, then data) for `g`; answered with `answer` or `failed`.
        case get(r: Int64, path: Path, query: QuerySpec?)
        /// A `p` or `m` write; answered through `WireAckQueue` or `answer`/`failed`.
        case write(r: Int64, action: String, body: KeyMap<JSON>)
        /// `o`/`om`: validate, judge, then `addOnDisconnect` and register it with the store.
        case registerOnDisconnect(r: Int64, action: String, path: Path, body: KeyMap<JSON>)
        /// `oc`: cancel in the store, then `cancelOnDisconnect`.
        case cancelOnDisconnect(r: Int64, path: Path)
        /// `auth`/`gauth`: verify the credential; then `credentialVerified` or `credentialRefused`.
        case verifyCredential(r: Int64, credential: String)

        /// The request a store operation answers (nil for the connection's own effects).
        public var request: Int64? {
            switch self {
            case .authorizeListen(let r, _), .readListen(let r, _), .get(let r, _, _), .write(let r, _, _),
                 .registerOnDisconnect(let r, _, _, _), .cancelOnDisconnect(let r, _), .verifyCredential(let r, _):
                r
            case .send, .sendFrame, .listenIndexed, .identityChanged, .armExpiry, .disarmExpiry:
                nil
            }
        }
    }

    public let limits: Limits
    /// The identity without a token (an admin client certificate, else anonymous): `unauth`, a
    /// refused `auth` and expiry return to it.
    public let baseIdentity: Identity
    public private(set) var identity: Identity
    /// Bumped on every identity change, so a stale expiry timer does nothing.
    public private(set) var identityGeneration = 0
    public private(set) var isClosed = false
    public private(set) var closeReason: String?
    @usableFromInline var listenTable: KeyMap<Context.Listen> = [:]
    public private(set) var onDisconnect: [Context.OnDisconnect] = []

    public init(base: Identity, limits: Limits = Limits()) {
        self.baseIdentity = base
        self.identity = base
        self.limits = limits
    }

    // MARK: - Handshake and closing

    /// The first message of a connection (`c`/`h`): server time, host, session id and, in a
    /// cluster, its members' client URLs (`en`; omitted when there are none).
    public static func hello(timestamp: Int64, host: String, sessionID: String, nodes: [String]) -> JSON {
        WireServerMessage.hello(timestamp: timestamp, host: host, sessionID: sessionID, nodes: nodes.isEmpty ? nil : nodes).json
    }

    /// The session ends (socket closed, a limit, shutdown): nothing more is sent and no timer
    /// runs; the first reason is kept. Nothing when it had already ended.
    public mutating func close(reason: String?) -> [Effect] {
        guard !isClosed else { return [] }
        isClosed = true
        closeReason = reason
        return [.disarmExpiry]
    }

    // MARK: - Requests

    /// One message from the client, in arrival order (`WireClientMessage.parse`). Rate limits are
    /// the driver's (`ClientPolicy`): a refused request is answered with `refused`.
    public mutating func receive(_ parsed: Result<WireClientMessage, WireClientMessage.ParseError>, now: Int64) -> [Effect] {
        switch parsed {
        case .failure(.notProtocol): return [.send(WireServerMessage.protocolError("Invalid message").json)]
        case .failure(.missingRequestFields): return [.send(WireServerMessage.protocolError("Request without r or a").json)]
        case .success(.ping): return [.send(WireServerMessage.pong.json)]
        case .success(.ignored): return []
        case .success(.request(let r, let action, let body)): return request(r, action, body, now: now)
        }
    }

    /// A request the driver's rate limits refused.
    public func refused(_ r: Int64, _ message: String) -> [Effect] {
        [.send(WireFailure.tooManyRequests(message).response(r).json)]
    }

    /// A request's store operation failed.
    public func failed(_ r: Int64, _ failure: WireFailure) -> [Effect] {
        [.send(failure.response(r).json)]
    }

    /// A request's store operation succeeded: its response.
    public func answer(_ r: Int64, _ data: JSON) -> [Effect] {
        [.send(WireServerMessage.response(r: r, status: "ok", data: data).json)]
    }

    mutating func request(_ r: Int64, _ action: String, _ b: KeyMap<JSON>, now: Int64) -> [Effect] {
        do {
            switch action {
            case "q", "l": return [.authorizeListen(r: r, try Self.listenRequest(b, parseQuery: true))]
            case "n", "u":
                let l = try Self.listenRequest(b, parseQuery: false)
                var effects = endListen(l)
                effects.append(.send(WireServerMessage.response(r: r, status: "ok", data: .object([:])).json))
                return effects
            case "g":
                let path = try Self.path(b)
                var query: QuerySpec?
                if let qw = b["q"], case .object(let o) = qw, !o.isEmpty { query = try QuerySpec(wire: qw) }
                return [.get(r: r, path: path, query: query)]
            case "p", "m": return [.write(r: r, action: action, body: b)]
            case "o", "om": return [.registerOnDisconnect(r: r, action: action, path: try Self.path(b), body: b)]
            case "oc": return [.cancelOnDisconnect(r: r, path: try Self.path(b))]
            case "auth", "gauth":
                guard let cred = b["cred"]?.stringValue else { return [.send(response(r, "invalid_token", .string("auth needs cred")))] }
                // An admin client certificate outranks tokens, as on REST.
                if Context.outranksTokens(baseIdentity) {
                    return [.send(response(r, "ok", .object(["auth": .null, "expires": .null])))]
                }
                return [.verifyCredential(r: r, credential: cred)]
            case "unauth":
                var effects = setIdentity(baseIdentity, now: now)
                effects.append(.send(response(r, "ok", .string(""))))
                return effects
            case "s", "appcheck", "unappeck", "unappcheck":
                // Stats and App Check: accepted, nothing kept.
                return [.send(response(r, "ok", .string("")))]
            default:
                return [.send(response(r, "invalid_request", .string("Unknown action \(action)")))]
            }
        } catch {
            return failed(r, .invalidData(error.description))
        }
    }

    func response(_ r: Int64, _ status: String, _ data: JSON) -> JSON {
        WireServerMessage.response(r: r, status: status, data: data).json
    }

    /// A request's `p` as a path (no leading slash on the wire; either is accepted).
    public static func path(_ b: KeyMap<JSON>) throws(EmberError) -> Path {
        try WireClientMessage.path(of: b)
    }

    /// `q`/`n`: the path, and for a tagged listen its tag and query (an untagged listen's `q` is
    /// ignored: it receives the whole location).
    static func listenRequest(_ b: KeyMap<JSON>, parseQuery: Bool) throws(EmberError) -> ListenRequest {
        let path = try path(b)
        var tag: Int64?
        if case .int(let t)? = b["t"] { tag = t }
        let qw = tag == nil ? nil : b["q"]
        let query = parseQuery && tag != nil ? try QuerySpec(wire: qw ?? .object([:])) : .default
        return ListenRequest(path: path, queryWire: qw, tag: tag, query: query)
    }

    /// `p` and `m` are writes: the driver may pipeline them (`WireRequestRoute`, `WireAckQueue`)
    /// instead of handing them to `receive` one at a time.
    public static func isWrite(_ action: String) -> Bool {
        WireRequestRoute.isWrite(action)
    }

    // MARK: - Listens

    public var listenCount: Int { listenTable.count }
    public var listenKeys: [String] { Array(listenTable.keys) }

    /// The rules allowed the listen: it joins the table (a duplicate is answered `ok` at once, one
    /// past `maxListens` with `too_many_listens`), then its initial data is read.
    public mutating func beginListen(r: Int64, _ l: ListenRequest, _ make: () -> Context.Listen) -> [Effect] {
        let key = l.key
        if listenTable[key] != nil { return [.send(response(r, "ok", .object([:])))] }
        guard listenTable.count < limits.maxListens else {
            return [.send(response(r, "too_many_listens", .string("Too many listens on this connection (limit \(limits.maxListens))")))]
        }
        listenTable[key] = make()
        return [.listenIndexed(path: l.path, key: key, added: true), .readListen(r: r, l)]
    }

    /// The initial read is done: the data (`activate` turns the read into the listen's first
    /// messages, folding in changes that arrived meanwhile), then `ok` — clients mark their
    /// cache complete on `ok`. A tagged listen without an index gets the `no_index` warning. A
    /// listen ended meanwhile sends nothing.
    public mutating func listenRead(r: Int64, _ l: ListenRequest, indexed: Bool, activate: (inout Context.Listen) -> [JSON]) -> [Effect] {
        guard let i = listenTable.index(forKey: l.key) else { return [] }
        var effects = activate(&listenTable.values[i]).map { Effect.send($0) }
        var ok: KeyMap<JSON> = [:]
        if l.tag != nil, !indexed { ok["w"] = .array([.string("no_index")]) }
        effects.append(.send(response(r, "ok", .object(ok))))
        return effects
    }

    /// The initial read failed: the listen ends and the request fails.
    public mutating func listenReadFailed(r: Int64, _ l: ListenRequest, _ failure: WireFailure) -> [Effect] {
        endListen(l) + failed(r, failure)
    }

    /// Ends listen `l` (`n`, a failed read); nothing when there is none.
    public mutating func endListen(_ l: ListenRequest) -> [Effect] {
        let key = l.key
        guard listenTable.removeValue(forKey: key) != nil else { return [] }
        return [.listenIndexed(path: l.path, key: key, added: false)]
    }

    /// The listen named `key`, changed in place (fan-out, resync); nil when there is none.
    @inlinable
    public mutating func withListen<R>(_ key: String, _ body: (inout Context.Listen) -> R) -> R? {
        guard let i = listenTable.index(forKey: key) else { return nil }
        return body(&listenTable.values[i])
    }

    /// Every listen, changed in place in key order (resync after a snapshot install).
    public mutating func forEachListenSorted(_ body: (inout Context.Listen) -> Void) {
        for key in listenTable.keys.sorted() { body(&listenTable[key]!) }
    }

    /// Every listen, changed in place in the table's order (a commit's fan-out).
    @inlinable
    public mutating func forEachListen(_ body: (inout Context.Listen) -> Void) {
        var i = listenTable.startIndex
        while i != listenTable.endIndex {
            body(&listenTable.values[i])
            i = listenTable.index(after: i)
        }
    }

    /// The listens the rules no longer let this identity read end: each gets a `c` push
    /// (`{"p": path, "q": query}`), which clients surface as permission_denied. In key order.
    public mutating func revokeListens(stillAllowed: (Context.Listen, Identity) -> Bool) -> [Effect] {
        guard !isClosed else { return [] }
        var effects: [Effect] = []
        for key in listenTable.keys.sorted() {
            let l = listenTable[key]!
            guard !stillAllowed(l, identity) else { continue }
            listenTable.removeValue(forKey: key)
            effects.append(.listenIndexed(path: l.path, key: key, added: false))
            effects.append(.send(WireServerMessage.listenRevoked(path: l.path, query: l.queryWire).json))
        }
        return effects
    }

    /// The driver drops its whole index of this session's listens (the session left the hub).
    public var indexedListens: [(path: Path, key: String)] { listenTable.map { ($0.value.path, $0.key) } }

    // MARK: - onDisconnect

    /// Counts a registration against `maxOnDisconnect`; false (refused) past it.
    public mutating func addOnDisconnect(_ write: Context.OnDisconnect) -> Bool {
        guard onDisconnect.count < limits.maxOnDisconnect else { return false }
        onDisconnect.append(write)
        return true
    }

    /// The store refused the registration just added (requests are handled in order).
    public mutating func removeLastOnDisconnect() {
        _ = onDisconnect.popLast()
    }

    public mutating func cancelOnDisconnect(at path: Path) {
        onDisconnect = Context.cancel(onDisconnect, at: path)
    }

    /// `maxOnDisconnect` reached: the registration's failure.
    public static var tooManyOnDisconnect: WireFailure { .tooManyRequests("Too many onDisconnect operations") }

    // MARK: - Credential

    /// The verifier accepted the credential of `auth` request `r`: the identity changes (its
    /// expiry armed), the listens are judged again, then the response with the claims and the
    /// expiry in seconds.
    public mutating func credentialVerified(r: Int64, _ identity: Identity, now: Int64) -> [Effect] {
        var effects = setIdentity(identity, now: now)
        let expires: JSON = Context.expiry(of: identity).map { .int($0 / 1000) } ?? .null
        effects.append(.send(response(r, "ok", .object(["auth": Context.claims(of: identity) ?? .null, "expires": expires]))))
        return effects
    }

    /// The verifier refused it: the connection returns to its base identity; the status says
    /// why (`invalid_token`, `expired_token`).
    public mutating func credentialRefused(r: Int64, status: String, message: String, now: Int64) -> [Effect] {
        var effects = setIdentity(baseIdentity, now: now)
        effects.append(.send(response(r, status, .string(message))))
        return effects
    }

    /// Sets the identity. One with an expiry flips back to the base identity at that moment
    /// (`expiryTimerFired`); the listens are judged again when it changed.
    mutating func setIdentity(_ new: Identity, now: Int64) -> [Effect] {
        let changed = identity != new
        identity = new
        identityGeneration += 1
        var effects: [Effect] = [.disarmExpiry]
        if !isClosed, let expiresAt = Context.expiry(of: new) {
            effects.append(.armExpiry(generation: identityGeneration, afterMillis: max(0, expiresAt - now)))
        }
        if changed { effects.append(.identityChanged) }
        return effects
    }

    /// The timer armed for `generation` fired: if that identity is still the connection's, it
    /// drops to the base identity and the client is told with `ac` (`expired_token`) so it
    /// re-authenticates; the listens are judged again. A stale timer does nothing.
    public mutating func expiryTimerFired(generation: Int) -> [Effect] {
        guard identityGeneration == generation, !isClosed else { return [] }
        identity = baseIdentity
        identityGeneration += 1
        return [.send(WireServerMessage.authRevoked(status: "expired_token", reason: "Auth token is expired.").json), .identityChanged]
    }
}
