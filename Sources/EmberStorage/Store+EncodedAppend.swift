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

    /// `setHardState` (when given) then `append`, without waiting: queued on the writer now, in
    /// order with every call made after this one; `done` runs on the writer thread once both are
    /// durable, or with the error (a failed transaction stored nothing; the hard state may be
    /// stored when the append failed: writing it again is harmless; a bad encoding fails the
    /// append). A Raft host's loop goes on meanwhile: behind a bulk import's multi-MB apply a
    /// persist waits seconds, and heartbeats must not (issue 42). Entries are decoded on the
    /// writer where they are not yet. False when the store is closed (`done` never runs).
    /// `applyingThrough` > 0: committed entries through it are applied in the append's transaction
    /// (`appendAndApply`: one sync for both), and `done` gets their results once it committed.
    public func startPersist(hardState: HardState?, encoded raw: [EncodedEntry], applyingThrough: UInt64 = 0,
                             done: @escaping @Sendable (Result<[WriteResult], any Error>) -> Void) -> Bool {
        enqueueExclusive { w in
            done(Result {
                if let hardState { try w.setHardState(hardState) }
                let (entries, encoded) = try Self.appendable(raw)
                if applyingThrough > 0 { return try w.appendAndApply(entries, encoded: encoded, through: applyingThrough) }
                if !entries.isEmpty { try w.append(entries, encoded: encoded) }
                return []
            })
        }
    }
}
