/// A connection's requests read from its socket and not yet handled, sans-IO. They are handled in
/// arrival order, one at a time, by one handler (the driver's task) that runs only while some are
/// queued; a client sending faster than it is served meets backpressure: past `maxQueued` the
/// socket is not read until half are handled. After the socket closed, the connection is torn
/// down exactly once, when its last request has been handled. The driver (`WireConnection`) holds
/// it under its lock: the reader's event loop and the handler's task share it.
public struct WireRequestQueue<Message> {
    /// Named limit: requests read and not yet handled before reading pauses.
    public let maxQueued: Int
    /// Queued requests from `head` on; empty (no buffer kept) for an idle connection.
    private var queue: [Message] = []
    private var head = 0
    /// A handler is working through the queue.
    public private(set) var running = false
    /// Reading is paused (`maxQueued`).
    public private(set) var paused = false
    /// The socket closed.
    private var ended = false
    private var tornDown = false

    public init(maxQueued: Int) {
        precondition(maxQueued >= 2, "a request queue holds at least two requests")
        self.maxQueued = maxQueued
    }

    public var count: Int { queue.count - head }

    /// Nothing queued or being handled: the reader may handle a message itself (a pipelined
    /// write) without overtaking one. Stays true until the reader queues one (only it starts a
    /// handler while the connection is open).
    public var isIdle: Bool { !running && count == 0 }

    /// What the reader does after queuing a message.
    public struct Arrival: Equatable, Sendable {
        /// Start the handler (none was running).
        public var startHandler: Bool
        /// Stop reading the socket (the queue just reached `maxQueued`).
        public var pauseReading: Bool
    }

    /// A message read from the socket. `handlerReady`: the session is open (before it is, messages
    /// wait here and `startIfQueued` starts the handler once it opens).
    public mutating func arrive(_ message: Message, handlerReady: Bool) -> Arrival {
        queue.append(message)
        var pause = false
        if count >= maxQueued, !paused {
            paused = true
            pause = true
        }
        guard handlerReady, !running else { return Arrival(startHandler: false, pauseReading: pause) }
        running = true
        return Arrival(startHandler: true, pauseReading: pause)
    }

    /// The session opened: true when messages that arrived meanwhile need the handler started.
    public mutating func startIfQueued() -> Bool {
        guard count > 0, !running else { return false }
        running = true
        return true
    }

    public enum Next {
        /// Handle this message; `resumeReading`: the queue is down to half, read the socket again.
        case handle(Message, resumeReading: Bool)
        /// None left: the handler stops. `tearDown`: the socket closed meanwhile and this was the
        /// last request: tear the connection down (once).
        case stop(tearDown: Bool)
    }

    /// The handler asks for the next message.
    public mutating func next() -> Next {
        guard count > 0 else {
            running = false
            let tear = ended && !tornDown
            if tear { tornDown = true }
            compact()
            return .stop(tearDown: tear)
        }
        let message = queue[head]
        head += 1
        // A handler that keeps up without ever emptying the queue: drop the handled prefix.
        if head >= 64, head * 2 >= queue.count {
            queue.removeFirst(head)
            head = 0
        }
        var resume = false
        if paused, count <= maxQueued / 2 {
            paused = false
            resume = true
        }
        return .handle(message, resumeReading: resume)
    }

    /// The socket closed: true when the connection is torn down now (no handler runs; else the
    /// handler tears it down after its last message).
    public mutating func socketClosed() -> Bool {
        ended = true
        guard !running, !tornDown else { return false }
        tornDown = true
        return true
    }

    /// Drops handled messages once the queue is empty (a small buffer is kept for the next burst).
    private mutating func compact() {
        queue.removeAll(keepingCapacity: queue.capacity <= 16)
        head = 0
    }
}

extension WireRequestQueue: Sendable where Message: Sendable {}
