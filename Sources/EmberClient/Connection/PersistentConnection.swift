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

/// The wire connection (JS/iOS `PersistentConnection`): owns the socket, timers, token fetches and
/// the callbacks of what the Repo asked for; the protocol's rules — request numbers, which
/// listens, writes and gets a connection was sent, what a reconnect sends again and in which order
/// — are EmberProtocol's `WireClientSession`, a pure state machine this actor feeds and whose
/// effects it carries out. It knows nothing about the sync tree.
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
        /// Calls back once every command and input queued before it was handled: a barrier for
        /// tests that check something did not happen (waiting for it would pass on a slow machine).
        case barrier(@Sendable () -> Void)
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

    private enum State {
        case disconnected
        case connecting(id: Int, any TransportConnection)
        case connected(id: Int, any TransportConnection, since: ContinuousClock.Instant)
    }

    /// How long a get waits for a connection before failing with `offline` (JS: 3 s).
    static let defaultGetConnectTimeout: Duration = .seconds(3)
    static let keepAliveInterval: Duration = .seconds(45)
    static let defaultHandshakeTimeout: Duration = .seconds(20)

    /// The nodes of the database (one URL for a single node). The connection uses one at a time
    /// and moves to the next when a connection attempt fails or an established one drops, so a
    /// client of a cluster survives the death of its node; listens and pending writes are
    /// re-sent on every connect (`WireClientSession`). Handshakes add the cluster's other nodes
    /// (`NodeList`), so one URL of a cluster is enough; a spreading list (a seed) moves once to
    /// a random node the first handshake named, so a cluster's clients spread over its members
    /// and learners.
    private(set) var nodes: NodeList
    var urls: [String] { nodes.all }
    var url: String { nodes.current }
    /// How long an opened socket may go without the server's hello before it counts as failed
    /// (a node that accepts connections but never answers must not hold the client forever).
    let handshakeTimeout: Duration
    /// Starts a connection's handshake timer: calls `fire` once `handshakeTimeout` has passed.
    /// Tests pass their own to fire timers when they choose, not when a wall clock says.
    typealias HandshakeTimer = @Sendable (_ after: Duration, _ fire: @escaping @Sendable () -> Void) -> Void
    private let startHandshakeTimer: HandshakeTimer
    static let sleepingHandshakeTimer: HandshakeTimer = { after, fire in
        Task {
            try? await Task.sleep(for: after)
            fire()
        }
    }
    /// How long a get made without a connection waits for one (tests shorten it: their check is
    /// the `offline` completion itself, not how long it took).
    let getConnectTimeout: Duration
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
    /// The protocol state; the dictionaries below hold the callbacks of its ids.
    private var session: WireClientSession
    private var listenHandlers: [WireClientSession.ListenID: ListenEntry] = [:]
    private var writeHandlers: [WireClientSession.WriteID: RequestCompletion] = [:]
    private var getHandlers: [WireClientSession.GetID: RequestCompletion] = [:]
    private var lastSend = ContinuousClock.now
    private var tokenProvider: AuthTokenProvider?
    /// Set when the server revoked or refused the token: the next fetch asks for a new one.
    private var forceTokenRefresh = false
    /// Handshake timers that fired, whether or not they closed anything (a test waits for one to
    /// fire before it checks that a connected socket was left alone).
    private(set) var handshakeTimeoutsSeen = 0

    init(url: String, transport: any WireTransport, policy: ReconnectPolicy, delegate: (any ConnectionDelegate)?,
         authToken: String? = nil, tokenProvider: AuthTokenProvider? = nil,
         handshakeTimeout: Duration = PersistentConnection.defaultHandshakeTimeout,
         getConnectTimeout: Duration = PersistentConnection.defaultGetConnectTimeout) {
        self.init(urls: [url], transport: transport, policy: policy, delegate: delegate, authToken: authToken,
                  tokenProvider: tokenProvider, handshakeTimeout: handshakeTimeout, getConnectTimeout: getConnectTimeout)
    }

    /// `spreadSeed`: spread over the cluster's nodes with choices drawn from it (`NodeList`);
    /// nil: the given order.
    init(urls: [String], transport: any WireTransport, policy: ReconnectPolicy, delegate: (any ConnectionDelegate)?,
         authToken: String? = nil, tokenProvider: AuthTokenProvider? = nil,
         handshakeTimeout: Duration = PersistentConnection.defaultHandshakeTimeout,
         getConnectTimeout: Duration = PersistentConnection.defaultGetConnectTimeout, spreadSeed: UInt64? = nil,
         handshakeTimer: HandshakeTimer? = nil) {
        precondition(!urls.isEmpty, "a connection needs at least one URL")
        nodes = NodeList(given: urls, seed: spreadSeed)
        self.handshakeTimeout = handshakeTimeout
        startHandshakeTimer = handshakeTimer ?? Self.sleepingHandshakeTimer
        self.getConnectTimeout = getConnectTimeout
        session = WireClientSession(credential: authToken)
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
                run(session.setCredential(token))
                establish()
            case .failed:
                // Like JS: no connection without the credential the app asked for; try again later.
                scheduleReconnect(connectedFor: nil)
            }
        case .tokenRefreshed(let token):
            run(session.setCredential(token))
        case .handshakeTimeout(let id):
            handshakeTimeoutsSeen += 1
            guard case .connecting(let current, _) = state, current == id else { return }
            closeCurrent()
        case .getTimeout(let id):
            run(session.getTimedOut(id))
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
        case .listen(let entry):
            let (id, replaced, effects) = session.listen(path: entry.path, query: entry.queryWire, tag: entry.tag,
                                                         hash: { _ in entry.hash() })
            if let replaced { listenHandlers[replaced] = nil }
            listenHandlers[id] = entry
            run(effects)
        case .unlisten(let path, let tag):
            let (removed, effects) = session.unlisten(path: path, tag: tag)
            if let removed { listenHandlers[removed] = nil }
            run(effects)
        case .write(let action, let path, let data, let hash, let stamp, let onComplete):
            let (id, effects) = session.write(action: action, path: path, data: data, hash: hash, stamp: stamp?.wire)
            writeHandlers[id] = onComplete
            run(effects)
        case .purgeWrites:
            run(session.purgeWrites())
        case .get(let path, let queryWire, let onComplete):
            let (id, effects) = session.get(path: path, query: queryWire)
            getHandlers[id] = onComplete
            run(effects)
        case .setAuthToken(let token):
            tokenProvider = nil
            run(session.setCredential(token))
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
        case .barrier(let reached):
            reached()
        }
    }

    // MARK: - Effects

    /// Carries out the session's effects in order.
    private func run(_ effects: [WireClientSession.Effect]) {
        for effect in effects {
            switch effect {
            case .send(let message):
                send(message)
            case .connected(let serverTimeMs, _):
                // The nodes it named were learned when the hello arrived (`receive`).
                guard case .connecting(let id, let socket) = state else { continue }
                state = .connected(id: id, socket, since: .now)
                lastSend = .now
                scheduleKeepAlive(id)
                let localMs = Int64(Date().timeIntervalSince1970 * 1000)
                delegate?.connection(didUpdateServerTimeOffset: serverTimeMs - localMs)
                delegate?.connection(didChangeStatus: true)
            case .listenCompleted(let id, let status, let data):
                guard let entry = listenHandlers[id] else { continue }
                if status != "ok" { listenHandlers[id] = nil }
                entry.onComplete(status, data)
            case .writeCompleted(let id, let status, let data):
                writeHandlers.removeValue(forKey: id)?(status, data)
            case .getCompleted(let id, let status, let data):
                getHandlers.removeValue(forKey: id)?(status, data)
            case .armGetTimeout(let id):
                let inbox = inbox, timeout = getConnectTimeout
                Task {
                    try? await Task.sleep(for: timeout)
                    inbox.yield(.getTimeout(id: id))
                }
            case .data(let path, let data, let isMerge, let tag):
                delegate?.connection(didReceive: data, at: path, isMerge: isMerge, tag: tag)
            case .credentialRefused:
                // A refused token from a provider is replaced: reconnect and ask for a fresh one
                // (with the usual back-off, so a server that refuses every token is not hammered).
                guard tokenProvider != nil, isConnected else { continue }
                forceTokenRefresh = true
                closeCurrent()
            case .credentialRevoked:
                // JS `onAuthRevoked_`: drop the connection and come back with a fresh token.
                forceTokenRefresh = true
                closeCurrent()
            case .shutdown:
                killed = true
                closeCurrent()
            }
        }
    }

    private func send(_ message: WireClientMessage) {
        let socket: any TransportConnection
        switch state {
        case .connecting(_, let s), .connected(_, let s, _): socket = s
        case .disconnected: return
        }
        let text = message.text
        // Credentials stay out of the log.
        if case .request(let r, let action, _) = message, action.hasSuffix("auth") {
            ClientLog.log("> \(action) request \(r)")
        } else {
            ClientLog.log("> \(text.prefix(1000))")
        }
        for frame in WireFraming.split(text) { socket.send(frame) }
        lastSend = .now
    }

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
        session.opened()
        startHandshakeTimer(handshakeTimeout) { inbox.yield(.handshakeTimeout(connectionID: id)) }
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
        // Next node (round-robin): a dead node's address would only fail again.
        nodes.advance()
        run(session.closed())
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
        if case .hello(_, _, _, let named) = message, case .connecting(_, let socket) = state,
           let target = nodes.handshake(named: named) {
            moveOnHello(socket, to: target)
            return
        }
        let handlers = listenHandlers
        run(session.receive(message, hash: { handlers[$0]?.hash() ?? "" }))
    }

    /// Leaves a node whose hello just arrived for the one the spread picked (`NodeList.handshake`):
    /// nothing was sent on this socket yet, the app never saw it connected, and the next attempt
    /// starts now (no back-off: nothing failed).
    private func moveOnHello(_ socket: any TransportConnection, to target: String) {
        ClientLog.log("Moving to \(target): spreading clients over the nodes the handshake named")
        socket.close()
        state = .disconnected
        run(session.closed())
        connectNow()
    }

    private func scheduleKeepAlive(_ id: Int) {
        let inbox = inbox
        Task {
            try? await Task.sleep(for: Self.keepAliveInterval / 3)
            inbox.yield(.keepAlive(connectionID: id))
        }
    }
}
