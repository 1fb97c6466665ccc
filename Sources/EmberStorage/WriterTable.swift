import EmberCore

/// Who sent a client write, for exactly-once delivery (an Ember extension of the wire protocol):
/// a client names itself with a random `writer` id and numbers its writes `seq` = 1, 2, 3, … in the
/// order it makes them. A client that lost an acknowledgement (a dropped connection, or an app
/// killed before it noted the answer on disk) sends the write again with the same stamp; the
/// replicated log decides, in log order, that it already ran and answers it without running it
/// again — so an increment or a push-free `update` sent twice counts once.
public struct WriterStamp: Sendable, Equatable, Hashable {
    public let writer: String
    public let seq: UInt64

    /// Longest writer id: a key of the reserved namespace, well below Firebase's 768-byte keys.
    public static let maxWriterLength = 64

    public init(writer: String, seq: UInt64) {
        self.writer = writer
        self.seq = seq
    }

    /// A stamp from outside (the wire): nil unless the id is 1–64 of `A–Z a–z 0–9 - _` and the
    /// sequence number is positive.
    public init?(validating writer: String, seq: Int64) {
        guard seq > 0, !writer.isEmpty, writer.utf8.count <= Self.maxWriterLength,
              writer.utf8.allSatisfy({ KeyCodec.isNamespaceByte($0) }) else { return nil }
        self.init(writer: writer, seq: UInt64(seq))
    }
}

/// What the log remembers of each writer, in the reserved namespace `_ember_writers` (so Raft
/// snapshots, backups of the namespace and every replica carry it like data): the highest
/// sequence number seen, when it was last seen, and the outcome of each of the last `window`
/// numbers. Deterministic: only the log entry's own timestamp and the stored records are used.
public enum WriterTable {
    public static let namespace = "_ember_writers"
    /// Outcomes kept per writer: a write sent again more than this many writes after the newest
    /// one of its writer counts as already run (clients resend in order, right after reconnecting).
    static let window: UInt64 = 64
    /// A writer not seen for this long is forgotten (a record per app install would otherwise
    /// stay forever). Its writes sent again after that would run again.
    static let retentionMs: Int64 = 30 * 24 * 3600 * 1000
    /// Records after the writer's own key looked at (and dropped when expired) per stamped write:
    /// pruning paced by writes, with no timer and no scan.
    static let pruneProbe = 2

    /// What a write stamped with a sequence number came to, as remembered.
    enum Outcome: UInt8 {
        case unknown = 0, applied = 1, denied = 2, conditionFailed = 3
    }

    struct Record: Equatable {
        var last: UInt64
        var seenAt: Int64
        /// Two bits per number: bits 2k…2k+1 hold the outcome of `last - k` (k < 64).
        var low: UInt64
        var high: UInt64

        /// The remembered outcome of `seq`, or nil when that number has not run (or is newer).
        func outcome(of seq: UInt64) -> Outcome? {
            guard seq <= last else { return nil }
            let k = last - seq
            // Older than the window: clients send in order, so it ran long ago.
            guard k < WriterTable.window else { return .applied }
            let code = Outcome(rawValue: UInt8(truncatingIfNeeded: (k < 32 ? low >> (2 * k) : high >> (2 * (k - 32))) & 3))!
            return code == .unknown ? nil : code
        }

        mutating func note(_ seq: UInt64, _ outcome: Outcome, at time: Int64) {
            if seq > last {
                shift(by: seq - last)
                last = seq
            }
            let k = last - seq
            assert(k < WriterTable.window, "noted a number outside the window")
            let bits = UInt64(outcome.rawValue)
            if k < 32 {
                low = low & ~(3 << (2 * k)) | bits << (2 * k)
            } else {
                high = high & ~(3 << (2 * (k - 32))) | bits << (2 * (k - 32))
            }
            seenAt = max(seenAt, time)
        }

        /// Ages every remembered outcome by `n` numbers.
        private mutating func shift(by n: UInt64) {
            if n >= 64 { low = 0; high = 0; return }
            if n >= 32 {
                high = low << (2 * (n - 32))
                low = 0
                return
            }
            high = high << (2 * n) | low >> (64 - 2 * n)
            low = low << (2 * n)
        }

        static func fresh(_ seq: UInt64, _ outcome: Outcome, at time: Int64) -> Record {
            var r = Record(last: seq, seenAt: time, low: 0, high: 0)
            r.note(seq, outcome, at: time)
            return r
        }

        /// Stored as a string leaf: "last:seenAt:high:low" (hex), small and readable in a dump.
        var text: String {
            [String(last, radix: 16), String(seenAt, radix: 16), String(high, radix: 16), String(low, radix: 16)].joined(separator: ":")
        }

        init(last: UInt64, seenAt: Int64, low: UInt64, high: UInt64) {
            self.last = last
            self.seenAt = seenAt
            self.low = low
            self.high = high
        }

        init?(text: String) {
            let parts = text.split(separator: ":")
            guard parts.count == 4, let last = UInt64(parts[0], radix: 16), let seenAt = Int64(parts[1], radix: 16),
                  let high = UInt64(parts[2], radix: 16), let low = UInt64(parts[3], radix: 16) else { return nil }
            self.init(last: last, seenAt: seenAt, low: low, high: high)
        }
    }

    static func path(_ writer: String) -> Path { Path(validated: [writer]) }
}
