import EmberRaft
import NIOCore

/// The leader's last encoded append entries (issue 38): a turn sends the same new entries to
/// every voter in steady replication, and a learner flush (`Event.flushLearners`) sends the
/// same committed entries to every learner; each was encoded once per member (~5 % of a
/// saturated leader's CPU went to encoding appends). Entries with equal first and last index
/// and term are the same entries (Raft's Log Matching: one entry per index and term, and equal
/// entries before an equal one), so their encoding is reused for the next member's frame.
/// Owned by the Raft loop (`RaftHost.sendRaft`), like the core it serves.
struct AppendEncodings {
    /// Appends with fewer entries are encoded per member: their frame costs less than a lookup.
    static let minEntries = 2
    /// Longest encoding kept (bytes): an append is bounded by `RaftConfig.maxBytesPerMessage`
    /// (or the learner's own bound) plus the entries' headers; one is kept at a time.
    static let maxBytes = PeerFrameCodec.maxFrameBytes

    private struct Range: Equatable {
        let firstIndex, firstTerm, lastIndex, lastTerm: UInt64
        let count: Int
    }
    private var last: (range: Range, bytes: ByteBuffer)?
    /// Encodings reused and made (tests, and what the cache saves).
    private(set) var reused = 0
    private(set) var encoded = 0

    /// `entries` encoded as an append frame carries them (`PeerFrameCodec.encodedEntries`),
    /// reused when the last encoding was of the same entries; nil for an append too small to
    /// share (the frame encodes it itself).
    mutating func bytes(for entries: [EmberRaft.LogEntry]) -> ByteBuffer? {
        guard entries.count >= Self.minEntries, let first = entries.first, let lastEntry = entries.last else { return nil }
        let range = Range(firstIndex: first.index, firstTerm: first.term, lastIndex: lastEntry.index, lastTerm: lastEntry.term,
                          count: entries.count)
        if let last, last.range == range {
            reused += 1
            return last.bytes
        }
        let bytes = PeerFrameCodec.encodedEntries(entries)
        encoded += 1
        last = bytes.readableBytes <= Self.maxBytes ? (range, bytes) : nil
        return bytes
    }
}
