import EmberCore

/// The answers to a connection's pipelined writes (`p`/`m` sent without waiting), kept in request
/// order: a write's answer leaves only once every write before it is answered, whatever order the
/// store completes them in, and a write refused before it reached the store waits its turn too.
/// Sans-IO: the server's driver (`WireResponses`) holds it under its lock and sends the frames
/// each completion releases.
public struct WireAckQueue: Sendable {
    /// How a write ended.
    public enum Completion: Sendable, Equatable {
        case applied
        /// A compare-and-set whose condition no longer held (`datastale`: the SDK's transaction reruns).
        case stale
        case failed(WireFailure)
    }

    struct Slot: Sendable {
        let seq: UInt64
        let r: Int64
        let path: Path
        /// The answer's frame once the write completed.
        var frame: String?
    }

    /// Named limit: writes unanswered at once (the connection is not read past it).
    public let limit: Int
    /// Unanswered writes in request order, and answered ones behind an unanswered one. Starts
    /// small (an idle connection holds it); grows with the writes in flight.
    private var slots: [Slot] = []
    private var head = 0
    private var nextSeq: UInt64 = 0

    public init(limit: Int) {
        precondition(limit > 0, "the pipelined write limit must be positive")
        self.limit = limit
    }

    /// Writes reserved and not yet answered.
    public var count: Int { slots.count - head }
    public var isEmpty: Bool { count == 0 }
    /// Fewer than `limit` writes are unanswered: another may be reserved.
    public var hasRoom: Bool { count < limit }

    /// Takes the next answer slot for request `r` (a write to `path`); returns its tag, which the
    /// completion names. Only with room (`hasRoom`).
    public mutating func reserve(r: Int64, path: Path) -> UInt64 {
        precondition(hasRoom, "a write's answer slot is reserved only when one is free")
        let seq = nextSeq
        nextSeq += 1
        slots.append(Slot(seq: seq, r: r, path: path))
        return seq
    }

    /// Records completions (by tag) and returns the frames now due, in request order: the prefix
    /// of answered writes. Tags of writes no longer queued are ignored.
    public mutating func complete(_ completions: [(tag: UInt64, completion: Completion)]) -> [String] {
        guard head < slots.count else { return [] }
        let first = slots[head].seq
        for (seq, completion) in completions {
            guard seq >= first, seq - first < UInt64(count) else { continue }
            let i = head + Int(seq - first)
            assert(slots[i].seq == seq, "slots are kept in tag order")
            slots[i].frame = Self.frame(r: slots[i].r, path: slots[i].path, completion)
        }
        var frames: [String] = []
        while head < slots.count, let frame = slots[head].frame {
            frames.append(frame)
            head += 1
        }
        // Compacted once drained (the common case) or once the answered prefix is large.
        if head == slots.count {
            slots.removeAll(keepingCapacity: slots.count <= 16)
            head = 0
        } else if head >= 64, head * 2 >= slots.count {
            slots.removeFirst(head)
            head = 0
        }
        return frames
    }

    /// The answer to request `r`: the plain `ok` as a prebuilt frame (every acknowledged write
    /// gets one), `datastale` for a failed compare-and-set, the failure's status otherwise.
    public static func frame(r: Int64, path: Path, _ completion: Completion) -> String {
        completion == .applied ? okFrame(r) : response(r: r, path: path, completion).text
    }

    /// The answer to write request `r` as a message.
    public static func response(r: Int64, path: Path, _ completion: Completion) -> WireServerMessage {
        switch completion {
        case .applied: .response(r: r, status: "ok", data: .string(""))
        case .stale: .response(r: r, status: "datastale", data: .string("The data at \(path) changed; retry the transaction"))
        case .failed(let f): f.response(r)
        }
    }

    /// `{"s":"ok","d":""}` for request `r` as a frame, without building a JSON value.
    public static func okFrame(_ r: Int64) -> String {
        #"{"t":"d","d":{"r":"# + String(r) + #","b":{"s":"ok","d":""}}}"#
    }
}
