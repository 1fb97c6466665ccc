import Foundation
import Synchronization

/// The ordered hand-off from the storage writer to the listeners: committed changes, and the
/// work that must follow them in order (rules revocation, state resync, write acknowledgements),
/// run one after another on a thread of its own. The writer thread only appends to a queue, so
/// building events and frames for listeners never holds up the next LMDB commit.
///
/// Order: items run in the order they were queued. A write's acknowledgement is queued (or
/// awaited with `barrier`) after its change, so a connection still receives the change before
/// the writer hears that its write is done, as when changes were published on the writer thread.
public final class ChangeFeed: @unchecked Sendable {
    /// Changes (and work items) queued and not yet run before the writer waits for the feed
    /// (`publish` blocks): a named bound on the hand-off, reached only when listeners fall this far
    /// behind the log. It may be passed by one commit's changes (the writer bounds a commit).
    public static let defaultMaxQueued = 65_536

    enum Item {
        /// One commit's changes, in log order: queued under one lock and with one wake-up, so the
        /// writer does not contend with the feed's thread once per write (it did, ~10 futex calls
        /// per commit at 20k writes/s).
        case changes([CommittedChange])
        case work(@Sendable () -> Void)

        /// What an item counts against `maxQueued`: its changes, or 1.
        var weight: Int {
            if case .changes(let cs) = self { return cs.count }
            return 1
        }
    }

    // `@unchecked Sendable`: the queue and flags are read and written only under `condition`.
    private let condition = NSCondition()
    private var queue: [Item] = []
    private var head = 0
    /// Changes and work items queued and not yet taken (the bound's measure).
    private var queuedWeight = 0
    private var stopped = false
    private var consumerWaiting = false
    private var producersWaiting = 0
    private let maxQueued: Int
    private var deliver: (@Sendable (CommittedChange) -> Void)?
    private var thread: Thread?
    /// Items run so far (tests and status).
    private let completed = Atomic<Int>(0)

    public init(maxQueued: Int = ChangeFeed.defaultMaxQueued) {
        precondition(maxQueued > 0, "the feed needs room for one item")
        self.maxQueued = maxQueued
    }

    /// Starts the feed's thread; `deliver` gets every published change in order. Once.
    public func start(_ deliver: @escaping @Sendable (CommittedChange) -> Void) {
        condition.lock()
        precondition(self.deliver == nil, "a feed starts once")
        self.deliver = deliver
        condition.unlock()
        let t = Thread { [self] in run() }
        t.name = "ember-fanout"
        condition.lock()
        thread = t
        condition.unlock()
        t.start()
    }

    /// Queues a committed change (from the writer thread, in commit order).
    public func publish(_ change: CommittedChange) { publish([change]) }

    /// Queues one commit's changes at once, in order (from the writer thread, in commit order).
    /// Waits only while `maxQueued` changes and work items are queued; the bound counts each
    /// change, and one commit may pass it.
    public func publish(_ changes: [CommittedChange]) {
        guard !changes.isEmpty else { return }
        LatencyMarks.mark(.feedQueued, changes[0].index, changes[changes.count - 1].index)
        append(.changes(changes), bounded: true)
    }

    /// Runs `work` on the feed after everything queued so far.
    public func enqueue(_ work: @escaping @Sendable () -> Void) {
        append(.work(work), bounded: true)
    }

    /// Returns once everything queued before this call has run (its listeners have their frames).
    public func barrier() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            // Not bounded: a suspended task holds no thread, and there is one per waiting request.
            append(.work { c.resume() }, bounded: false)
        }
    }

    /// Runs `work` on the feed after everything queued so far and waits for it (for rare events
    /// that must see every earlier change delivered and no later one, e.g. a state replacement).
    /// On the feed's own thread it runs at once.
    public func sync(_ work: @escaping @Sendable () -> Void) {
        if isFeedThread || !isRunning {
            work()
            return
        }
        let done = NSCondition()
        let finished = Mutex(false)
        append(.work {
            work()
            done.lock()
            finished.withLock { $0 = true }
            done.signal()
            done.unlock()
        }, bounded: false)
        done.lock()
        while !finished.withLock({ $0 }) { done.wait() }
        done.unlock()
    }

    /// Stops the thread once the queued items have run; later items run on the caller's thread
    /// (changes are dropped: nobody listens any more).
    public func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    /// True on the feed's own thread.
    var isFeedThread: Bool {
        condition.lock()
        defer { condition.unlock() }
        return thread != nil && Thread.current === thread
    }

    private var isRunning: Bool {
        condition.lock()
        defer { condition.unlock() }
        return deliver != nil && !stopped
    }

    /// Producers waiting in `publish`/`enqueue` for room (tests wait for one to be there).
    var waitingProducers: Int {
        condition.lock()
        defer { condition.unlock() }
        return producersWaiting
    }

    /// Changes and work items queued and not yet taken by the feed's thread.
    public var backlog: Int {
        condition.lock()
        defer { condition.unlock() }
        return queuedWeight
    }

    private func append(_ item: Item, bounded: Bool) {
        condition.lock()
        if stopped || deliver == nil {
            condition.unlock()
            // Not running (a hub without a node, or after shutdown): work runs inline, in order
            // with the caller.
            if case .work(let w) = item { w() }
            return
        }
        while bounded && queuedWeight >= maxQueued && !stopped {
            producersWaiting += 1
            condition.wait()
            producersWaiting -= 1
        }
        queue.append(item)
        queuedWeight += item.weight
        if consumerWaiting { condition.broadcast() }
        condition.unlock()
    }

    /// Upper bound on items taken from the queue at once (the consumer's own batch).
    static let takeLimit = 1024

    private func run() {
        // The store's writer may wait on this thread (a full queue), so its reads (rules
        // revocation, resync) must never wait on the writer's pending commit.
        FanOutThread.markCurrent()
        while true {
            condition.lock()
            while queue.count == head && !stopped {
                consumerWaiting = true
                condition.wait()
                consumerWaiting = false
            }
            if queue.count == head && stopped {
                condition.unlock()
                return
            }
            let end = min(queue.count, head + Self.takeLimit)
            let batch = Array(queue[head..<end])
            for item in batch { queuedWeight -= item.weight }
            assert(queuedWeight >= 0, "the feed's weight counts what it holds")
            head = end
            if head == queue.count {
                queue.removeAll(keepingCapacity: queue.count <= Self.takeLimit * 4)
                head = 0
            } else if head > Self.takeLimit * 16 {
                queue.removeFirst(head)
                head = 0
            }
            if producersWaiting > 0 { condition.broadcast() }
            let deliver = self.deliver!
            condition.unlock()
            for item in batch {
                switch item {
                case .changes(let cs): for c in cs { deliver(c) }
                case .work(let w): w()
                }
            }
            completed.add(batch.count, ordering: .relaxed)
        }
    }
}
