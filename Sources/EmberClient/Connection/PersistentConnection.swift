import EmberCore
import EmberProtocol
import Foundation

/// What the connection reports to the Repo. Called from the connection's isolation in protocol
/// order; implementations hop to their own queue without reordering.
protocol ConnectionDelegate: AnyObject, Sendable {
    func connection(didReceive data: JSON, at path: Path, isMerge: Bool, tag: Int?)
    func connection(didChangeStatus connected: Bool)
    func connection(didUpdateServerTimeOffset ms: Int64)
}

/// Completion of a request: the response status (`ok`, `datastale`, `permission_denied`, …, or the
/// client-side `disconnect` / `offline`) and its data.
typealias RequestCompletion = @Sendable (_ status: String, _ data: JSON) -> Void

/// The wire connection (JS/iOS `PersistentConnection`): owns the socket, request numbers, the
/// active listens and the ordered queue of outstanding writes, and on every (re)connect restores
/// listens (with fresh hashes), then writes, then gets. It knows nothing about the sync tree.
///
/// Inputs (Repo commands and socket events) go through one ordered inbox that a single loop
/// drains, so the order in which the Repo submits writes is the order they reach the server.
actor PersistentConnection {
    struct ListenEntry: Sendable {
        var path: Path
        var queryWire: JSON?
        var tag: Int?
        /// Hash of the client's cached server data, read when the listen is (re)sent.
        var hash: @Sendable () -> String
        var onComplete: RequestCompletion
        var order = 0
    }

    enum Command: Sendable {
        case listen(ListenEntry)
        case unlisten(path: Path, tag: Int?)
        /// `p`/`m`/`o`/`om`/`oc`: writes and onDisconnect operations, kept until acknowledged.
        case write(action: String, path: Path, data: JSON, hash: String?, stamp: WriteStamp? = nil, onComplete: RequestCompletion)
        case get(path: Path, queryWire: JSON?, onComplete: RequestCompletion)
        /// Fails every queued write (and onDisconnect operation) with `write_canceled`.
        case purgeWrites
        /// The credential sent on every connect (nil: none, `unauth` when connected).
        case setAuthToken(String?)
        /// Where credentials come from: asked before every connect, and with `forceRefresh` after
        /// the server revoked or refused the last one.
        case setAuthTokenProvider(AuthTokenProvider?)
        case goOffline
        case goOnline
        case shutdown
    }

    enum Input: Sendable {
        case command(Command)
        case transport(connectionID: Int, TransportEvent)
        case reconnectTimer(generation: Int)
        case keepAlive(connectionID: Int)
        case getTimeout(id: Int)
        case handshakeTimeout(connectionID: Int)
        /// A token fetched before connecting (`reconnectGeneration` it was fetched for).
        case tokenFetched(generation: Int, TokenFetch)
        /// A token fetched while connected (a new provider): sent with `auth` at once.
        case tokenRefreshed(String?)
    }

    enum TokenFetch: Sendable {
        case token(String?)
        case failed(String)
    }

    private struct PendingWrite {
        var action: String
        var path: Path
        var data: JSON
        var hash: String?
        var stamp: WriteStamp?
        var onComplete: RequestCompletion
        var sent = false
    }

    private struct PendingGet {
        var path: Path
        var queryWire: JSON?
        var onComplete: RequestCompletion
        var sent = false
    }

    private enum State {
        case disconnected
        case connecting(id: Int, any TransportConnection)
        case connected(id: Int, any TransportConnection, since: ContinuousClock.Instant)
    }

    /// How long a get waits for a connection before failing with `offline` (JS: 3 s).
    static let getConnectTimeout: Duration = .seconds(3)
    static let keepAliveInterval: Duration = .seconds(45)
    static let defaultHandshakeTimeout: Duration = .seconds(20)

    /// The nodes of the database (one URL for a single node). The connection uses one at a time
    /// and moves to the next when a connection attempt fails or an established one drops, so a
    /// client of a cluster survives the death of its node; listens and pending writes are
    /// re-sent on every connect (`restoreState`). Handshakes add the cluster's other nodes
    /// (`NodeList`), so one URL of a cluster is enough.
    private(set) var nodes: NodeList
    var urls: [String] { nodes.all }
    var url: String { nodes.current }
    /// How long an opened socket may go without the server's hello before it counts as failed
    /// (a node that accepts connections but never answers must not hold the client forever).
    let handshakeTimeout: Duration
    private let transport: any WireTransport
    private weak var delegate: (any ConnectionDelegate)?
    private var backoff: ReconnectBackoff
    private let inbox: AsyncStream<Input>.Continuation

    private var state: State = .disconnected
    private var connectionCounter = 0
    private var reconnectGeneration = 0
    private var interrupted = false
    private var killed = false
    /// Frames reassembled into messages (EmberProtocol's, shared with the server).
    private var reassembler = WireReassembler(maxMessageBytes: maxInboundMessageBytes)
    /// Largest server message the client reassembles: Firebase's largest read (256 MB).
    static let maxInboundMessageBytes = 256 << 20
    private var nextRequest: Int64 = 1
    private var callbacks: [Int64: (String, JSON) -> Void] = [:]
    private var listens: [String: ListenEntry] = [:]
    private var listenCounter = 0
    private var writes: [Int: PendingWrite] = [:]
    private var nextWriteID = 0
    private var lastSend = ContinuousClock.now
    private var authToken: String?
    private var tokenProvider: AuthTokenProvider?
    /// Set when the server revoked or refused the token: the next fetch asks for a new one.
    private var forceTokenRefresh = false
    private var gets: [Int: PendingGet] = [:]
    private var nextGetID = 0

    init(url: String, transport: any WireTransport, policy: ReconnectPolicy, delegate: (any ConnectionDelegate)?,
         authToken: String? = nil, tokenProvider: AuthTokenProvider? = nil,
         handshakeTimeout: Duration = PersistentConnection.defaultHandshakeTimeout) {
        self.init(urls: [url], transport: transport, policy: policy, delegate: delegate, authToken: authToken,
                  tokenProvider: tokenProvider, handshakeTimeout: handshakeTimeout)
    }

    init(urls: [String], transport: any WireTransport, policy: ReconnectPolicy, delegate: (any ConnectionDelegate)?,
         authToken: String? = nil, tokenProvider: AuthTokenProvider? = nil,
         handshakeTimeout: Duration = PersistentConnection.defaultHandshakeTimeout) {
        precondition(!urls.isEmpty, "a connection needs at least one URL")
        nodes = NodeList(given: urls)
        self.handshakeTimeout = handshakeTimeout
        self.authToken = authToken
        self.tokenProvider = tokenProvider
        self.transport = transport
        self.delegate = delegate
        backoff = ReconnectBackoff(policy: policy)
        let (stream, continuation) = AsyncStream<Input>.makeStream()
        inbox = continuation
        Task { [weak self] in
            for await input in stream {
                guard let self else { return }
                await self.handle(input)
            }
        }
        continuation.yield(.reconnectTimer(generation: 0))
    }

    /// Queues a command; commands take effect in submission order.
    nonisolated func submit(_ command: Command) {
        inbox.yield(.command(command))
    }

    var isConnected: Bool {
        if case .connected = state { return true }
        return false
    }

    // MARK: - Inbox

    private func handle(_ input: Input) {
        switch input {
        case .command(let command): handle(command)
        case .transport(let id, let event):
            guard id == currentConnectionID else { return }
            switch event {
            case .message(let frame):
                do {
                    if case .message(let text) = try reassembler.feed(frame) { receive(text) }
                } catch {
                    // A server message past the bound (or a bad count frame): the connection is
                    // dropped and made again rather than its stream read out of step.
                    ClientLog.log("Bad message from \(url) (\(error)); reconnecting")
                    switch state {
                    case .connecting(_, let socket), .connected(_, let socket, _): socket.close()
                    case .disconnected: break
                    }
                }
            case .closed:
                onClosed()
            }
        case .keepAlive(let id):
            guard case .connected(let current, let socket, _) = state, current == id else { return }
            // JS sends "0" after 45 s without traffic so proxies keep the socket open.
            if ContinuousClock.now - lastSend >= Self.keepAliveInterval {
                socket.send("0")
                lastSend = .now
            }
            scheduleKeepAlive(id)
        case .reconnectTimer(let generation):
            guard generation == reconnectGeneration, case .disconnected = state else { return }
            connectNow()
        case .tokenFetched(let generation, let fetch):
            guard generation == reconnectGeneration, case .disconnected = state else { return }
            switch fetch {
            case .token(let token):
                authToken = token
                establish()
            case .failed:
                // Like JS: no connection without the credential the app asked for; try again later.
                scheduleReconnect(connectedFor: nil)
            }
        case .tokenRefreshed(let token):
            authToken = token
            if isConnected {
                if token == nil { sendRequest("unauth", [:]) { _, _ in } } else { sendAuth() }
            }
        case .handshakeTimeout(let id):
            guard case .connecting(let current, _) = state, current == id else { return }
            closeCurrent()
        case .getTimeout(let id):
            if let get = gets[id], !get.sent {
                gets[id] = nil
                get.onComplete("offline", .string("Client is offline."))
            }
        }
    }

    private var currentConnectionID: Int? {
        switch state {
        case .disconnected: return nil
        case .connecting(let id, _), .connected(let id, _, _): return id
        }
    }

    private func handle(_ command: Command) {
        switch command {
        case .listen(var entry):
            listenCounter += 1
            entry.order = listenCounter
            let key = Self.listenKey(entry.path, entry.tag)
            listens[key] = entry
            if isConnected { sendListen(key) }
        case .unlisten(let path, let tag):
            let key = Self.listenKey(path, tag)
            guard let entry = listens.removeValue(forKey: key) else { return }
            if isConnected {
                var body: [String: JSON] = ["p": .string(path.wireText)]
                if let tag = entry.tag {
                    body["t"] = .int(Int64(tag))
                    if let q = entry.queryWire { body["q"] = q }
                }
                sendRequest("n", body) { _, _ in }
            }
        case .write(let action, let path, let data, let hash, let stamp, let onComplete):
            nextWriteID += 1
            writes[nextWriteID] = PendingWrite(action: action, path: path, data: data, hash: hash, stamp: stamp, onComplete: onComplete)
            if isConnected { sendWrite(nextWriteID) }
        case .purgeWrites:
            // Replies to writes already sent find nothing to complete; the server may still apply them.
            let purged = writes.sorted { $0.key < $1.key }
            writes.removeAll()
            for (_, write) in purged { write.onComplete("write_canceled", .string("Write cancelled by user")) }
        case .get(let path, let queryWire, let onComplete):
            nextGetID += 1
            let id = nextGetID
            gets[id] = PendingGet(path: path, queryWire: queryWire, onComplete: onComplete)
            if isConnected {
                sendGet(id)
            } else {
                let inbox = inbox
                Task {
                    try? await Task.sleep(for: Self.getConnectTimeout)
                    inbox.yield(.getTimeout(id: id))
                }
            }
        case .setAuthToken(let token):
            authToken = token
            tokenProvider = nil
            if isConnected {
                if token == nil { sendRequest("unauth", [:]) { _, _ in } } else { sendAuth() }
            }
        case .setAuthTokenProvider(let provider):
            tokenProvider = provider
            guard let provider else { return }
            if isConnected {
                let inbox = inbox
                Task {
                    if let token = try? await provider(false) { inbox.yield(.tokenRefreshed(token)) }
                }
            }
        case .goOffline:
            interrupted = true
            closeCurrent()
        case .goOnline:
            interrupted = false
            backoff.reset()
            if case .disconnected = state { connectNow() }
        case .shutdown:
            killed = true
            closeCurrent()
            inbox.finish()
        }
    }

    static func listenKey(_ path: Path, _ tag: Int?) -> String { "\(path)|\(tag.map(String.init) ?? "")" }

    // MARK: - Connecting

    /// Connects, first asking the token provider (if any) for the credential to send.
    private func connectNow() {
        guard !interrupted, !killed else { return }
        guard let provider = tokenProvider else { return establish() }
        reconnectGeneration += 1
        let generation = reconnectGeneration
        let force = forceTokenRefresh
        forceTokenRefresh = false
        let inbox = inbox
        Task {
            do {
                let token = try await provider(force)
                inbox.yield(.tokenFetched(generation: generation, .token(token)))
            } catch {
                inbox.yield(.tokenFetched(generation: generation, .failed("\(error)")))
            }
        }
    }

    private func establish() {
        guard !interrupted, !killed else { return }
        connectionCounter += 1
        let id = connectionCounter
        reassembler = WireReassembler(maxMessageBytes: Self.maxInboundMessageBytes)
        let inbox = inbox
        ClientLog.log("Connecting to \(url)")
        let socket = transport.open(url: url) { event in inbox.yield(.transport(connectionID: id, event)) }
        state = .connecting(id: id, socket)
        let timeout = handshakeTimeout
        Task {
            try? await Task.sleep(for: timeout)
            inbox.yield(.handshakeTimeout(connectionID: id))
        }
    }

    private func closeCurrent() {
        switch state {
        case .disconnected: return
        case .connecting(_, let socket), .connected(_, let socket, _):
            socket.close()
            onClosed()
        }
    }

    private func onClosed() {
        var connectedFor: Duration? = nil
        if case .connected(_, _, let since) = state { connectedFor = ContinuousClock.now - since }
        state = .disconnected
        ClientLog.log("Disconnected from \(url)")
        callbacks.removeAll()
        // Next node (round-robin): a dead node's address would only fail again.
        nodes.advance()
        // A compare-and-set that was sent may or may not have been applied: the transaction
        // code must rerun it, so it fails with `disconnect` instead of being resent.
        for id in writes.keys.sorted() {
            guard var write = writes[id] else { continue }
            if write.sent && write.hash != nil {
                writes[id] = nil
                write.onComplete("disconnect", .null)
            } else {
                write.sent = false
                writes[id] = write
            }
        }
        for id in gets.keys { gets[id]!.sent = false }
        if connectedFor != nil { delegate?.connection(didChangeStatus: false) }
        scheduleReconnect(connectedFor: connectedFor)
    }

    private func scheduleReconnect(connectedFor: Duration?) {
        guard !interrupted, !killed else { return }
        reconnectGeneration += 1
        let generation = reconnectGeneration
        let delay = backoff.nextDelay(connectedFor: connectedFor)
        let inbox = inbox
        Task {
            try? await Task.sleep(for: delay)
            inbox.yield(.reconnectTimer(generation: generation))
        }
    }

    // MARK: - Receiving

    private func receive(_ text: String) {
        ClientLog.log("< \(text.prefix(1000))")
        guard let message = WireServerMessage.parse(text) else { return }
        switch message {
        case .hello(let timestamp, _, _, let nodes):
            guard case .connecting(let id, let socket) = state else { return }
            if let nodes { self.nodes.learn(clientURLs: nodes) }
            state = .connected(id: id, socket, since: .now)
            lastSend = .now
            scheduleKeepAlive(id)
            let localMs = Int64(Date().timeIntervalSince1970 * 1000)
            delegate?.connection(didUpdateServerTimeOffset: timestamp - localMs)
            delegate?.connection(didChangeStatus: true)
            restoreState()
        case .response(let r, let status, let data):
            callbacks.removeValue(forKey: r)?(status, data)
        case .dataPush(let path, let data, let isMerge, let tag, _):
            delegate?.connection(didReceive: data, at: path, isMerge: isMerge, tag: tag.map { Int(truncatingIfNeeded: $0) })
        case .listenRevoked(let path, _):
            for (key, entry) in listens where entry.path == path {
                listens[key] = nil
                entry.onComplete("permission_denied", .string("listen revoked"))
            }
        case .authRevoked:
            // JS `onAuthRevoked_`: drop the connection and come back with a fresh token.
            forceTokenRefresh = true
            closeCurrent()
        case .shutdown:
            killed = true
            closeCurrent()
        case .pong, .protocolError, .ignored:
            // Pongs only prove liveness (any message does); a protocol error is the server
            // saying this client sent garbage, which a request's own response also reports.
            break
        }
    }

    /// After the handshake: listens first (so writes' results reach them), then writes in their
    /// original order, then gets (JS `restoreState_`).
    private func restoreState() {
        if authToken != nil { sendAuth() }
        for key in listens.keys.sorted(by: { listens[$0]!.order < listens[$1]!.order }) { sendListen(key) }
        for id in writes.keys.sorted() { sendWrite(id) }
        for id in gets.keys.sorted() { sendGet(id) }
    }

    // MARK: - Sending

    private func scheduleKeepAlive(_ id: Int) {
        let inbox = inbox
        Task {
            try? await Task.sleep(for: Self.keepAliveInterval / 3)
            inbox.yield(.keepAlive(connectionID: id))
        }
    }

    private func sendRequest(_ action: String, _ body: [String: JSON], _ callback: @escaping (String, JSON) -> Void) {
        guard case .connected(_, let socket, _) = state else { return }
        let r = nextRequest
        nextRequest += 1
        callbacks[r] = callback
        let text = ClientMessage.request(r, action: action, body: body)
        // Credentials stay out of the log.
        ClientLog.log(action.hasSuffix("auth") ? "> \(action) request \(r)" : "> \(text.prefix(1000))")
        for frame in WireFraming.split(text) { socket.send(frame) }
        lastSend = .now
    }

    /// `auth` for a JWT, `gauth` for anything else (an admin/OAuth token such as `owner`), as
    /// the JS SDK chooses. Sent before listens and writes; requests are handled in order.
    private func sendAuth() {
        guard let token = authToken else { return }
        let isJWT = token.split(separator: ".", omittingEmptySubsequences: false).count == 3
        sendRequest(isJWT ? "auth" : "gauth", ["cred": .string(token)]) { status, _ in self.authResponded(status) }
    }

    /// A refused token from a provider is replaced: reconnect and ask for a fresh one (with the
    /// usual back-off, so a server that refuses every token is not hammered).
    private func authResponded(_ status: String) {
        guard status != "ok", tokenProvider != nil, isConnected else { return }
        forceTokenRefresh = true
        closeCurrent()
    }

    private func sendListen(_ key: String) {
        guard let entry = listens[key] else { return }
        var body: [String: JSON] = ["p": .string(entry.path.wireText), "h": .string(entry.hash())]
        if let tag = entry.tag {
            body["t"] = .int(Int64(tag))
            body["q"] = entry.queryWire ?? .object([:])
        }
        let order = entry.order
        // Only the listen this response belongs to (not a later one at the same key).
        sendRequest("q", body) { status, data in self.listenResponded(key: key, order: order, status: status, data: data) }
    }

    private func listenResponded(key: String, order: Int, status: String, data: JSON) {
        guard let entry = listens[key], entry.order == order else { return }
        if status != "ok" { listens[key] = nil }
        entry.onComplete(status, data)
    }

    private func sendWrite(_ id: Int) {
        guard var write = writes[id], !write.sent else { return }
        write.sent = true
        writes[id] = write
        var body: [String: JSON] = ["p": .string(write.path.wireText), "d": write.data]
        if let h = write.hash { body["h"] = .string(h) }
        if let stamp = write.stamp { body["w"] = stamp.wire }
        sendRequest(write.action, body) { status, data in self.writeResponded(id: id, status: status, data: data) }
    }

    private func writeResponded(id: Int, status: String, data: JSON) {
        guard let write = writes.removeValue(forKey: id) else { return }
        write.onComplete(status, data)
    }

    private func sendGet(_ id: Int) {
        guard var get = gets[id], !get.sent else { return }
        get.sent = true
        gets[id] = get
        var body: [String: JSON] = ["p": .string(get.path.wireText)]
        body["q"] = get.queryWire ?? .object([:])
        sendRequest("g", body) { status, data in self.getResponded(id: id, status: status, data: data) }
    }

    private func getResponded(id: Int, status: String, data: JSON) {
        guard let get = gets.removeValue(forKey: id) else { return }
        get.onComplete(status, data)
    }
}
