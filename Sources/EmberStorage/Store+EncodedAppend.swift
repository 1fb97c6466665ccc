import EmberCore

/// A log entry as a Raft host appends it (issue 42): its encoding, with index, term and
/// timestamp in its header, and the entry itself when the host has it decoded already (a
/// leader's own and checked writes, Raft's no-ops and membership entries). The store's writer
/// decodes the others: a follower's loop decoded each multi-MB entry of a bulk import in full,
/// although it needs only the header (its timestamp), and the apply that uses the values runs on
/// the writer.
public struct EncodedEntry: Sendable {
    public let index: UInt64
    public let term: UInt64
    public let encoded: [UInt8]
    public let decoded: LogEntry?

    public init(index: UInt64, term: UInt64, encoded: [UInt8], decoded: LogEntry?) {
        precondition(decoded == nil || (decoded!.index == index && decoded!.term == term), "the entry at its index and term")
        self.index = index
        self.term = term
        self.encoded = encoded
        self.decoded = decoded
    }

    /// The entry: as the host decoded it, or decoded now (its header must name its index and term).
    public func entry() throws(StorageError) -> LogEntry {
        if let decoded { return decoded }
        let e = try LogEntry(decoding: encoded)
        guard e.index == index, e.term == term else {
            throw .corrupt("entry \(index) (term \(term)) is encoded as \(e.index) (term \(e.term))")
        }
        return e
    }
}

extension EmberStore {
    /// The entries of `raw`, decoded where they are not yet (on the writer), with the check an
    /// append of validated entries makes (each namespace), and their encodings.
    static func appendable(_ raw: [EncodedEntry]) throws -> (entries: [LogEntry], encoded: [[UInt8]]) {
        var entries: [LogEntry] = []
        entries.reserveCapacity(raw.count)
        for r in raw {
            let e = try r.entry()
            try KeyCodec.validateNamespace(e.namespace)
            entries.append(e)
        }
        return (entries, raw.map(\.encoded))
    }

    /// `append(entries:encoded:validated: true)`, each entry decoded by the writer if it is not
    /// yet. A bad encoding fails the append, which then stores nothing.
    public func append(encoded raw: [EncodedEntry]) async throws {
        try await perform { w in
            let (entries, encoded) = try Self.appendable(raw)
            try w.append(entries, encoded: encoded)
        }
    }

    /// `appendAndApply(entries:encoded:through:validated: true)`, decoding on the writer.
    @discardableResult
    public func appendAndApply(encoded raw: [EncodedEntry], through index: UInt64) async throws -> [WriteResult] {
        try await perform { w in
            let (entries, encoded) = try Self.appendable(raw)
            return try w.appendAndApply(entries, encoded: encoded, through: index)
        }
    }

    /// `appendAndApplyReleasing(entries:encoded:through:validated: true)`, decoding on the writer.
    public func appendAndApplyReleasing(encoded raw: [EncodedEntry], through index: UInt64) async throws
        -> (results: [WriteResult], release: Release) {
        let (results, seq) = try await performReleasing { w in
            let (entries, encoded) = try Self.appendable(raw)
            return try w.appendAndApply(entries, encoded: encoded, through: index)
        }
        return (results, Release(seq: seq))
    }

    /// `startPersist(hardState:entries:encoded:validated: true)`, decoding on the writer; a bad
    /// encoding comes back to `done` as the append's error.
    public func startPersist(hardState: HardState?, encoded raw: [EncodedEntry],
                             done: @escaping @Sendable (Result<Void, any Error>) -> Void) -> Bool {
        enqueueExclusive { w in
            done(Result {
                if let hardState { try w.setHardState(hardState) }
                if !raw.isEmpty {
                    let (entries, encoded) = try Self.appendable(raw)
                    try w.append(entries, encoded: encoded)
                }
            })
        }
    }
}
