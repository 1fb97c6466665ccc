import EmberCore
import EmberNodeStore
import Synchronization

/// Logs the delivery lanes' cursors of a namespace together: one `advance` entry in flight per
/// namespace at a time, carrying every cursor its lanes settled meanwhile, and at most one
/// every `minInterval`. Ten triggers keeping up with one stream of writes cost one small log
/// entry per interval (each applied on every member: cursors moved, records pruned), not ten
/// streams of entries through Raft, nor one per commit round trip when commits are quick.
final class TriggerCursorLog: Sendable {
    typealias Done = @Sendable (_ error: String?) -> Void
    private struct Queue {
        var waiting: [(TriggerCursor, Done)] = []
        var busy = false
    }
    private let queues = Mutex<[String: Queue]>([:])
    private let port: any TriggersPort

    /// Named limit: the least time from one entry's start to the next one's (at most 50
    /// entries/s per namespace). What is delivered meanwhile waits in memory; a failover
    /// delivers it again (at least once), so the interval stays short.
    static let minInterval = Duration.milliseconds(20)

    init(port: any TriggersPort) { self.port = port }

    /// Queues a lane's cursor; `done` once the entry carrying it is logged (nil) or not (why).
    /// A lane has at most one cursor waiting or in flight.
    func submit(namespace ns: String, _ cursor: TriggerCursor, done: @escaping Done) {
        let start = queues.withLock { q -> Bool in
            q[ns, default: Queue()].waiting.append((cursor, done))
            if q[ns]!.busy { return false }
            q[ns]!.busy = true
            return true
        }
        if start { Task { [self] in await drain(ns) } }
    }

    private func drain(_ ns: String) async {
        while true {
            let batch = queues.withLock { q -> [(TriggerCursor, Done)] in
                guard var queue = q[ns], !queue.waiting.isEmpty else { q[ns] = nil; return [] }
                let n = min(queue.waiting.count, TriggerOperation.maxCursors)
                let b = Array(queue.waiting.prefix(n))
                queue.waiting.removeFirst(n)
                q[ns] = queue
                return b
            }
            if batch.isEmpty { return }
            let started = ContinuousClock.now
            do {
                try await port.log(namespace: ns, .advance(batch.map(\.0)))
                for (_, done) in batch { done(nil) }
            } catch {
                for (_, done) in batch { done("\(error)") }
            }
            // The lanes hand in their next cursors meanwhile; they go together in the next entry.
            try? await Task.sleep(until: started + Self.minInterval, clock: .continuous)
        }
    }
}
