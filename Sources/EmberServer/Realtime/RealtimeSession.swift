import EmberCore
import EmberProtocol
import Foundation
import NIOCore
import NIOWebSocket
import Synchronization

/// One WebSocket connection speaking the Firebase wire protocol v5 (reference §6). Requests are
/// handled in arrival order; every message to the client goes through one bounded queue, so
/// pushes and responses keep commit order and a client that cannot keep up is disconnected.
public final class RealtimeSession: Sendable {
    public struct Limits: Sendable {
        /// Messages queued for one connection before it is closed as too slow (a session
        /// without a socket, whose frames wait in memory for a reader).
        public var outboundQueue = 10_000
        /// Bytes queued for one connection's socket and not yet written to it (encoded here or
        /// waiting in the channel) before the connection is cut off as a slow consumer.
        public var maxOutboundBytes = 64 << 20
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
        /// Seconds between the server's pings (`WireConnection`); a connection whose previous
        /// ping got no pong by the next one is closed.
        public var pingIntervalSeconds: Double = 30
        public init() {}
    }

    /// The protocol's state and rules (`WireServerSession`); this class drives it: its lock, its
    /// socket, its timers and the hub's index.
    typealias Wire = WireServerSession<EmberWire>
    typealias Op = Wire.Effect

    struct State {
        var wire: Wire
        /// The name the onDisconnect log knows the session by, once it registered one.
        var onDisconnectSession: OnDisconnectRef?
        var expiryTimer: Task<Void, Never>?
        /// The connection's own request rate (`Limits.requestRate`).
        var budget: WireRequestBudget
        /// What may be queued, when to flush, when to cut the client off (`WireOutbound`).
        var outbound: WireOutbound
        /// Frames queued in memory before a socket is attached, oldest first (`outbound` bounds them).
        var frames: [String] = []
        /// The socket writer waiting for frames (`nextFrames`).
        var frameWaiter: CheckedContinuation<[String]?, Never>?
        /// Set once the session writes straight to its socket (`attach`): frames are encoded
        /// into it and flushed on the event loop instead of queued in `frames`.
        var outbox: ConnectionOutbox?
        /// Runs once when the session ends (`attach`): starts the connection's close. No task
        /// waits per connection meanwhile.
        var onFinish: (@Sendable () -> Void)?
        /// Cleared when the hub forgets the session; later listens are not indexed.
        var indexed = true
    }

    public let id: String
    public let namespace: String
    /// The client's IP address (for `--trust-owner-from`), when the socket has one.
    public let address: String?
    /// The identity without a token: `.admin` for a connection with an admin client certificate
    /// (`ClientCertificate`), else anonymous. `unauth`, a refused `auth` and expiry return to it.
    public let baseIdentity: Identity
    let limits: Limits
    let state: Mutex<State>
    /// Runs after the identity changed or expired (the rules layer re-judges the listens); takes
    /// the session so it does not keep itself alive.
    private let identityChangedHook = Mutex<(@Sendable (RealtimeSession) -> Void)?>(nil)
    /// A listen began (true) or ended (false): the hub keeps its index of listens by path
    /// (`PathIndex`) in step. Called under the state lock, so the index sees them in order.
    let listenIndexChanged = Mutex<(@Sendable (RealtimeSession, Path, String, Bool) -> Void)?>(nil)
    /// Connections cut off for not reading (the hub's counter; for status and metrics).
    let slowConsumers: SlowConsumerCount?
    /// The node's ordered change feed: write acknowledgements follow the changes on it.
    let feed: ChangeFeed?
    /// Opened when the connection's teardown is done (a newer connection that named this one
    /// with `ls` waits for it: `LastSession`).
    let tornDown = TeardownLatch()

    init(id: String, namespace: String, address: String? = nil, base: Identity = .anonymous, limits: Limits,
         slowConsumers: SlowConsumerCount? = nil, feed: ChangeFeed? = nil) {
        self.slowConsumers = slowConsumers
        self.feed = feed
        self.id = id
        self.namespace = namespace
        self.address = address
        self.baseIdentity = base
        self.limits = limits
        state = Mutex(State(wire: Wire(base: base, limits: .init(maxListens: limits.maxListens, maxOnDisconnect: limits.maxOnDisconnect)),
                             budget: WireRequestBudget(rate: limits.requestRate),
                             outbound: WireOutbound(limits: .init(maxMessages: limits.outboundQueue, maxBytes: limits.maxOutboundBytes))))
    }

    public var closeReason: String? { state.withLock { $0.wire.closeReason } }
    /// The socket the session writes to, once attached.
    var socketChannel: (any Channel)? { state.withLock { $0.outbox?.channel } }
    public var listenCount: Int { state.withLock { $0.wire.listenCount } }

    func finish(reason: String?) {
        state.withLock { s in
            if !s.wire.isClosed {
                let closing = s.wire.close(reason: reason)
                perform(&s, closing)
                if let w = s.frameWaiter { s.frameWaiter = nil; w.resume(returning: nil) }
            }
            if let f = s.onFinish { s.onFinish = nil; f() }
        }
    }


    // MARK: - Driving the protocol

    /// Carries out the effects that are the connection's own — messages (in order, under the
    /// lock), the hub's index, the expiry timer — and collects the store operations for the
    /// handler in `ops`. Under the state lock. Stops after `identityChanged` and returns the
    /// effects after it: the caller runs the hook outside the lock first (the listens it revokes
    /// are told before, say, the `auth` response that follows).
    func perform(_ s: inout State, _ effects: some Collection<Op>, ops: inout [Op]) -> ArraySlice<Op>? {
        for (i, e) in zip(effects.indices, effects) {
            switch e {
            case .send(let message): enqueue(&s, message)
            case .sendFrame(let frame): enqueue(&s, frame: frame)
            case .listenIndexed(let path, let key, let added): notifyIndex(&s, path, key, added)
            case .identityChanged: return ArraySlice(effects[effects.index(after: i)...])
            case .disarmExpiry:
                s.expiryTimer?.cancel()
                s.expiryTimer = nil
            case .armExpiry(let generation, let delay):
                s.expiryTimer = Task { [weak self] in
                    try? await Task.sleep(for: .milliseconds(delay))
                    guard !Task.isCancelled else { return }
                    self?.expiryTimerFired(generation: generation)
                }
            default: ops.append(e)
            }
        }
        return nil
    }

    func perform(_ s: inout State, _ effects: [Op]) {
        var ops: [Op] = []
        let rest = perform(&s, effects, ops: &ops)
        assert(ops.isEmpty && rest == nil, "only the connection's own effects here")
    }

    /// Runs `step` on the protocol state and carries out its effects; returns the store
    /// operations for the handler, in order.
    @discardableResult
    func drive(_ step: (inout Wire) -> [Op]) -> [Op] {
        var ops: [Op] = []
        var rest = state.withLock { s in
            let effects = step(&s.wire)
            return perform(&s, effects, ops: &ops)
        }
        while let remaining = rest {
            runIdentityChangedHook()
            rest = state.withLock { s in perform(&s, remaining, ops: &ops) }
        }
        return ops
    }

    func send(_ message: JSON) {
        state.withLock { enqueue(&$0, message) }
    }

    /// Queues whole frames in order (pipelined write responses, built without a JSON value).
    func send(frames: [String]) {
        state.withLock { s in for f in frames { enqueue(&s, frame: f) } }
    }

    // MARK: - onDisconnect

    func addOnDisconnect(_ write: OnDisconnectWrite) -> Bool {
        state.withLock { $0.wire.addOnDisconnect(write) }
    }

    /// A registration that failed: its write was the last added (requests are handled in order).
    func removeLastOnDisconnect() {
        state.withLock { $0.wire.removeLastOnDisconnect() }
    }

    func cancelOnDisconnect(at path: Path) {
        state.withLock { $0.wire.cancelOnDisconnect(at: path) }
    }

    /// How the log names this session (set by its first registration).
    var onDisconnectSession: OnDisconnectRef? {
        get { state.withLock { $0.onDisconnectSession } }
        set { state.withLock { $0.onDisconnectSession = newValue } }
    }

    // MARK: - Identity and request rate

    public var identity: Identity { state.withLock { $0.wire.identity } }

    /// The timer armed for `generation` fired (`WireServerSession.expiryTimerFired`).
    func expiryTimerFired(generation: Int) {
        drive { $0.expiryTimerFired(generation: generation) }
    }

    /// Called (outside the state lock) whenever the identity changes: `auth` as someone else,
    /// `unauth`, a refused re-auth, expiry.
    func onIdentityChanged(_ hook: @escaping @Sendable (RealtimeSession) -> Void) {
        identityChangedHook.withLock { $0 = hook }
    }

    private func runIdentityChangedHook() {
        if let hook = identityChangedHook.withLock({ $0 }) { hook(self) }
    }

    /// Takes one request from the connection's budget (`WireRequestBudget`); nil when admitted,
    /// else the refusal's message (the connection is over its rate).
    func admitRequest(now: Int64) -> String? {
        state.withLock { s in s.budget.admit(now: now) ? nil : s.budget.refusal }
    }
}
