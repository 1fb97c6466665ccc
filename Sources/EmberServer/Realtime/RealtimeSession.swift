import EmberCore
import Foundation
import Synchronization

/// One WebSocket connection speaking the Firebase wire protocol v5 (reference §6). Requests are
/// handled in arrival order; every message to the client goes through one bounded queue, so
/// pushes and responses keep commit order and a client that cannot keep up is disconnected.
public final class RealtimeSession: Sendable {
    public struct Limits: Sendable {
        /// Messages queued for one connection before it is closed as too slow.
        public var outboundQueue = 10_000
        /// Largest reassembled inbound message.
        public var maxMessageBytes = 16 * 1024 * 1024
        /// Listens one connection may hold.
        public var maxListens = 10_000
        /// onDisconnect operations one connection may register.
        public var maxOnDisconnect = 1_000
        /// Writes of one connection queued and not yet answered; a client pipelining more is not
        /// read until some are answered.
        public var maxPipelinedWrites = 1_000
        /// Requests per second one connection may make; over it, requests get `too_many_requests`.
        public var requestRate = RequestRateLimit()
        public init() {}
    }

    struct State {
        var listens: [String: WireListen] = [:]
        var onDisconnect: [(Path, WriteRequest.Kind)] = []
        /// Who the connection speaks for (`auth`/`gauth`); anonymous until then and after expiry.
        var identity: Identity = .anonymous
        /// Bumped on every identity change, so a stale expiry timer does nothing.
        var identityGeneration = 0
        var expiryTimer: Task<Void, Never>?
        var requestBucket: TokenBucket?
        var closed = false
        var closeReason: String?
        /// Frames queued for the socket, oldest first (at most `limits.outboundQueue`).
        var frames: [String] = []
        /// The socket writer waiting for frames (`nextFrames`).
        var frameWaiter: CheckedContinuation<[String]?, Never>?
    }

    public let id: String
    public let namespace: String
    /// The client's IP address (for `--trust-owner-from`), when the socket has one.
    public let address: String?
    /// The identity without a token: `.admin` for a connection with an admin client certificate
    /// (`ClientCertificate`), else anonymous. `unauth`, a refused `auth` and expiry return to it.
    public let baseIdentity: Identity
    let limits: Limits
    private let state = Mutex(State())
    /// Runs after the identity changed or expired (the rules layer re-judges the listens); takes
    /// the session so it does not keep itself alive.
    private let identityChangedHook = Mutex<(@Sendable (RealtimeSession) -> Void)?>(nil)
    /// Listens went from none to some (true) or back (false): the hub fans out only to
    /// sessions that listen.
    let listeningChanged = Mutex<(@Sendable (RealtimeSession, Bool) -> Void)?>(nil)

    init(id: String, namespace: String, address: String? = nil, base: Identity = .anonymous, limits: Limits) {
        self.id = id
        self.namespace = namespace
        self.address = address
        self.baseIdentity = base
        self.limits = limits
        state.withLock { $0.identity = base }
    }

    public var closeReason: String? { state.withLock { $0.closeReason } }
    public var listenCount: Int { state.withLock { $0.listens.count } }

    // MARK: - Sending (always under the state lock, which fixes the order)

    private func enqueue(_ s: inout State, _ message: JSON) {
        guard !s.closed else { return }
        for frame in WireFraming.split(message.serialized()) { enqueue(&s, frame: frame) }
    }

    /// `frame` must be one whole frame (at most `WireFraming.maxFrameCharacters` characters).
    private func enqueue(_ s: inout State, frame: String) {
        guard !s.closed else { return }
        guard s.frames.count < limits.outboundQueue else {
            s.closed = true
            s.closeReason = "outbound queue over \(limits.outboundQueue) messages: client too slow"
            // The socket writer still sends what is queued, then closes.
            if let w = s.frameWaiter { s.frameWaiter = nil; w.resume(returning: nil) }
            return
        }
        s.frames.append(frame)
        if let w = s.frameWaiter {
            // A waiter exists only while the queue was empty: this frame is all there is.
            s.frameWaiter = nil
            w.resume(returning: s.frames)
            s.frames = []
        }
    }

    func send(_ message: JSON) {
        state.withLock { enqueue(&$0, message) }
    }

    /// Queues whole frames in order (pipelined write responses, built without a JSON value).
    func send(frames: [String]) {
        state.withLock { s in for f in frames { enqueue(&s, frame: f) } }
    }

    func finish(reason: String?) {
        state.withLock { s in
            s.expiryTimer?.cancel()
            s.expiryTimer = nil
            if !s.closed {
                s.closed = true
                s.closeReason = reason
                if let w = s.frameWaiter { s.frameWaiter = nil; w.resume(returning: nil) }
            }
        }
    }

    /// The frames queued so far (at most `max`), oldest first, waiting while there is none; nil
    /// once the session is closed and its queue is empty. One consumer (the socket writer).
    func nextFrames(max: Int = .max) async -> [String]? {
        await withCheckedContinuation { (c: CheckedContinuation<[String]?, Never>) in
            state.withLock { s in
                if s.frames.count > max {
                    c.resume(returning: Array(s.frames[..<max]))
                    s.frames.removeFirst(max)
                } else if !s.frames.isEmpty {
                    c.resume(returning: s.frames)
                    s.frames = []
                } else if s.closed {
                    c.resume(returning: nil)
                } else {
                    precondition(s.frameWaiter == nil, "one consumer of a session's frames")
                    s.frameWaiter = c
                }
            }
        }
    }

    /// The queued frames one by one, taking each from the queue only when it is read (tests
    /// read a session this way, possibly in several loops).
    public var outbound: OutboundFrames { OutboundFrames(session: self) }

    public struct OutboundFrames: AsyncSequence, Sendable {
        let session: RealtimeSession
        public struct AsyncIterator: AsyncIteratorProtocol {
            let session: RealtimeSession
            public mutating func next() async -> String? {
                await session.nextFrames(max: 1)?.first
            }
        }
        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(session: session) }
    }

    // MARK: - Fan-out

    /// Called in commit order for every change in this session's namespace.
    func deliver(_ change: CommittedChange) {
        deliver(SharedFrames(change: change))
    }

    /// As `deliver(_:)`, with untagged listens' frames shared with the other sessions of the
    /// same publish.
    func deliver(_ shared: SharedFrames) {
        state.withLock { s in
            guard !s.closed else { return }
            for key in s.listens.keys {
                for frame in s.listens[key]!.applyFrames(shared.change, shared: shared) { enqueue(&s, frame: frame) }
            }
        }
    }

    // MARK: - Listens

    enum ListenStart {
        case started
        case duplicate
        case tooMany
    }

    func beginListen(path: Path, query: QuerySpec, queryWire: JSON?, tag: Int64?) -> ListenStart {
        state.withLock { s in
            let key = WireListen.key(path: path, queryWire: queryWire, tag: tag)
            if s.listens[key] != nil { return .duplicate }
            guard s.listens.count < limits.maxListens else { return .tooMany }
            s.listens[key] = WireListen(path: path, query: query, queryWire: queryWire, tag: tag)
            if s.listens.count == 1 { notifyListening(true) }
            return .started
        }
    }

    /// Called under the state lock, so transitions reach the hub in order.
    private func notifyListening(_ on: Bool) {
        if let hook = listeningChanged.withLock({ $0 }) { hook(self, on) }
    }

    /// Sends the initial data, then the `ok` (clients mark their cache complete on `ok`).
    func completeListen(path: Path, queryWire: JSON?, tag: Int64?, read: ReadResult, response: JSON) {
        state.withLock { s in
            let key = WireListen.key(path: path, queryWire: queryWire, tag: tag)
            guard s.listens[key] != nil else { return }
            for m in s.listens[key]!.activate(with: read) { enqueue(&s, m) }
            enqueue(&s, response)
        }
    }

    func endListen(path: Path, queryWire: JSON?, tag: Int64?) {
        state.withLock { s in
            if s.listens.removeValue(forKey: WireListen.key(path: path, queryWire: queryWire, tag: tag)) != nil, s.listens.isEmpty {
                notifyListening(false)
            }
        }
    }

    // MARK: - onDisconnect

    func addOnDisconnect(_ path: Path, _ kind: WriteRequest.Kind) -> Bool {
        state.withLock { s in
            guard s.onDisconnect.count < limits.maxOnDisconnect else { return false }
            s.onDisconnect.append((path, kind))
            return true
        }
    }

    func cancelOnDisconnect(at path: Path) {
        state.withLock { s in s.onDisconnect = OnDisconnectCancel.apply(s.onDisconnect, cancel: path) }
    }

    /// Taken once when the connection ends.
    func takeOnDisconnect() -> [(Path, WriteRequest.Kind)] {
        state.withLock { s in
            defer { s.onDisconnect = [] }
            return s.onDisconnect
        }
    }

    // MARK: - Identity and request rate

    public var identity: Identity { state.withLock { $0.identity } }

    /// Sets the connection's identity. A user identity with an expiry flips back to anonymous at
    /// that moment, and the client is told with `ac` (`expired_token`) so it re-authenticates.
    func setIdentity(_ identity: Identity, now: Int64) {
        let changed = state.withLock { s -> Bool in
            let changed = s.identity != identity
            s.identity = identity
            s.identityGeneration += 1
            s.expiryTimer?.cancel()
            s.expiryTimer = nil
            guard case .user(_, let expiresAt?) = identity, !s.closed else { return changed }
            let generation = s.identityGeneration
            let delay = max(0, expiresAt - now)
            s.expiryTimer = Task { [weak self] in
                try? await Task.sleep(for: .milliseconds(delay))
                guard !Task.isCancelled else { return }
                self?.expireIdentity(generation: generation)
            }
            return changed
        }
        if changed { runIdentityChangedHook() }
    }

    /// The token behind the identity set as `generation` expired: drop to anonymous and send
    /// `ac`. Listens and writes are re-judged against the new identity by the rules layer.
    func expireIdentity(generation: Int) {
        let expired = state.withLock { s -> Bool in
            guard s.identityGeneration == generation, !s.closed else { return false }
            s.identity = baseIdentity
            s.identityGeneration += 1
            s.expiryTimer = nil
            enqueue(&s, WireMessages.authRevoked(status: "expired_token", reason: "Auth token is expired."))
            return true
        }
        if expired { runIdentityChangedHook() }
    }

    /// Called (outside the state lock) whenever the identity changes: `auth` as someone else,
    /// `unauth`, a refused re-auth, expiry.
    func onIdentityChanged(_ hook: @escaping @Sendable (RealtimeSession) -> Void) {
        identityChangedHook.withLock { $0 = hook }
    }

    private func runIdentityChangedHook() {
        if let hook = identityChangedHook.withLock({ $0 }) { hook(self) }
    }

    /// Takes one request from the connection's budget; false when it is over the rate limit.
    func admitRequest(now: Int64) -> Bool {
        state.withLock { s in
            if s.requestBucket == nil {
                guard let b = limits.requestRate.bucket(now: now) else { return true }
                s.requestBucket = b
            }
            return s.requestBucket!.take(now: now)
        }
    }

    /// The listened locations (for `resync`, which reads them outside the state lock).
    var listenedPaths: [Path] {
        state.withLock { s in s.closed ? [] : s.listens.values.map(\.path) }
    }

    /// The node's state was replaced from a snapshot: listens the rules no longer allow are
    /// cancelled (`c`), the others get their complete data again (`WireListen.resync`), queued
    /// ahead of every later push. `reads` holds the new data by path; a listen begun after they
    /// were taken has none here and reads the new state itself.
    func resync(reads: [Path: ReadResult], stillAllowed: (Path, QuerySpec, Identity) -> Bool) {
        revokeListens(stillAllowed: stillAllowed)
        state.withLock { s in
            guard !s.closed else { return }
            for key in s.listens.keys.sorted() {
                guard let read = reads[s.listens[key]!.path] else { continue }
                for m in s.listens[key]!.resync(with: read) { enqueue(&s, m) }
            }
        }
    }

    /// Cancels the listens the rules no longer let this connection read: each gets a `c` push
    /// (`{"p": path, "q": query}`), which clients surface as permission_denied.
    func revokeListens(stillAllowed: (Path, QuerySpec, Identity) -> Bool) {
        state.withLock { s in
            guard !s.closed else { return }
            for key in s.listens.keys.sorted() {
                let l = s.listens[key]!
                guard !stillAllowed(l.path, l.query, s.identity) else { continue }
                s.listens.removeValue(forKey: key)
                if s.listens.isEmpty { notifyListening(false) }
                var b: [String: JSON] = ["p": .string(WireMessages.wirePath(l.path))]
                if let q = l.queryWire { b["q"] = q }
                enqueue(&s, .object(["t": .string("d"), "d": .object(["a": .string("c"), "b": .object(b)])]))
            }
        }
    }
}
