import Foundation
import Synchronization

/// Timed marks on a write's way from the leader to a listener on another member (issue 38: what
/// makes a learner's listener p99), a debugging aid off unless `EMBER_LATENCY_MARKS` names a
/// directory when the process starts. Each mark is a stage, the log index range it concerns and
/// the wall clock (CLOCK_REALTIME, nanoseconds: comparable across the processes of one machine).
/// They are kept in memory, at most `maxMarks`, and written to
/// `<directory>/<node>-<pid>.marks` when the node stops (`write(node:)`), one
/// `stage first last nanoseconds peer` line each; `scripts/latency-marks.py` puts them together.
/// Off, a mark is one load and a branch.
public enum LatencyMarks {
    public enum Stage: String, Sendable {
        /// A member's write of entries to its log starts / is durable (leader and voters).
        case writeStart = "write-start", writeDone = "write-done"
        /// The leader's commit index covers the entries (the turn that advanced it is planned).
        case commit
        /// The leader hands an AppendEntries carrying the entries to a learner's link.
        case sentToLearner = "sent-learner"
        /// A member's transport hands an AppendEntries with entries to its Raft loop's inbox.
        case received
        /// The loop steps it (the turn that handles it starts).
        case stepped
        /// The store's writer queues a commit's changes for the listeners (after the commit).
        case feedQueued = "feed-queued"
        /// The listeners' thread publishes a change of this index to the node's streams.
        case published
        /// An SSE stream wrote an event of this index to its connection.
        case streamed
        /// The leader's transport hands an acknowledgement (AppendEntriesResponse) to its loop's
        /// inbox / the loop steps it (the peer is named).
        case ackReceived = "ack-received", ackStepped = "ack-stepped"
    }

    struct Mark {
        let stage: Stage
        let first: UInt64
        let last: UInt64
        let nanos: Int64
        let peer: String
    }

    /// Marks kept per process (about 50 bytes each): later ones are dropped, counted in the file.
    public static let maxMarks = 1_000_000
    /// The directory named by `EMBER_LATENCY_MARKS`, read once.
    static let directory: String? = ProcessInfo.processInfo.environment["EMBER_LATENCY_MARKS"].flatMap { $0.isEmpty ? nil : $0 }
    public static let enabled = directory != nil
    private static let marks = Mutex<(list: [Mark], dropped: Int)>(([], 0))

    @inline(__always)
    public static func mark(_ stage: Stage, _ first: UInt64, _ last: UInt64, peer: String = "-") {
        guard enabled else { return }
        record(stage, first, last, peer)
    }

    @inline(never)
    private static func record(_ stage: Stage, _ first: UInt64, _ last: UInt64, _ peer: String) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let mark = Mark(stage: stage, first: first, last: last, nanos: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec), peer: peer)
        marks.withLock { m in
            if m.list.count < maxMarks { m.list.append(mark) } else { m.dropped += 1 }
        }
    }

    /// Writes the marks kept so far to the directory (when enabled) and forgets them.
    public static func write(node: String) {
        guard let directory else { return }
        let (list, dropped) = marks.withLock { m in
            defer { m = ([], 0) }
            return m
        }
        var text = "# node \(node) pid \(getpid()) marks \(list.count) dropped \(dropped)\n"
        text.reserveCapacity(list.count * 48)
        for m in list { text += "\(m.stage.rawValue) \(m.first) \(m.last) \(m.nanos) \(m.peer)\n" }
        let path = "\(directory)/\(node)-\(getpid()).marks"
        if !FileManager.default.createFile(atPath: path, contents: Data(text.utf8)) {
            FileHandle.standardError.write(Data("latency marks: could not write \(path)\n".utf8))
        }
    }
}
